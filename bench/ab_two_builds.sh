#!/bin/bash
# Two builds of meshcomm-bench, run alternately on one cell: the way to see
# what a change did to one size of one operation on a machine whose speed
# drifts from minute to minute (docs/benchmarks.md).
#
#   bench/ab_two_builds.sh BEFORE AFTER ROUNDS -- OP -n N -b SIZE -e SIZE --iters K
#
# BEFORE and AFTER are meshcomm-bench binaries (build one from another tree:
# `git worktree add /tmp/before REV && cmake -S /tmp/before -B /tmp/before/build
# -G Ninja && cmake --build /tmp/before/build --target meshcomm-bench`). Each
# round runs both, their order swapped every other round; prints each
# round's times (us) and the median of the per-round ratios AFTER/BEFORE with
# their range and how many rounds AFTER was faster.
set -euo pipefail
if [[ $# -lt 5 || $4 != "--" ]]; then
  sed -n '2,13p' "$0" >&2
  exit 2
fi
before=$1 after=$2 rounds=$3
shift 4
time_of() { "$1" "${@:2}" --csv | tail -1 | cut -d, -f6; }
for ((i = 1; i <= rounds; i++)); do
  if ((i % 2)); then
    a=$(time_of "$before" "$@"); b=$(time_of "$after" "$@")
  else
    b=$(time_of "$after" "$@"); a=$(time_of "$before" "$@")
  fi
  echo "$a $b"
done | /usr/bin/python3 -c '
import statistics, sys
rows = [tuple(map(float, line.split())) for line in sys.stdin if line.strip()]
ratios = [b / a for a, b in rows]
print("rounds (before/after us):", " ".join(f"{a:.3f}/{b:.3f}" for a, b in rows))
print(f"median after/before {statistics.median(ratios):.3f} "
      f"[{min(ratios):.2f}-{max(ratios):.2f}], after faster in "
      f"{sum(r < 1 for r in ratios)} of {len(ratios)}; medians "
      f"{statistics.median(a for a, _ in rows):.3f} -> {statistics.median(b for _, b in rows):.3f} us")'

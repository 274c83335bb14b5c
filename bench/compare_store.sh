#!/usr/bin/env bash
# Runs one TCPStore workload (set/get/add, 64 B and 1 MiB values, 1 and 4
# client processes) against meshcomm's store (bench/store_bench) and against
# torch.distributed.TCPStore (bench/torch_store_bench.py), in the same run,
# and prints both side by side with the ratio meshcomm/torch.
#
# usage: bench/compare_store.sh [--build-dir DIR] [--duration-ms MS]
#                               [--max-ops N] [--install-only]
#   --build-dir DIR   where store_bench is built (default: build-bench; built
#                     there with cmake if missing)
#   --duration-ms MS  per measurement (default 2000), passed to both sides
#   --max-ops N       per client and measurement (default 200000), both sides
#   --install-only    only make sure python3-torch is installed
#
# python3-torch comes from Debian (apt-get) the first time, for
# /usr/bin/python3; nothing is installed when `import torch` already works.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build-bench"
DURATION_MS=2000
MAX_OPS=200000
INSTALL_ONLY=0
PY=/usr/bin/python3

die() { echo "compare_store.sh: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) [[ $# -ge 2 ]] || die "--build-dir needs a value"; BUILD_DIR="$(realpath -m "$2")"; shift 2 ;;
    --duration-ms) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ && "$2" -gt 0 ]] || die "--duration-ms needs a positive integer"; DURATION_MS="$2"; shift 2 ;;
    --max-ops) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ && "$2" -gt 0 ]] || die "--max-ops needs a positive integer"; MAX_OPS="$2"; shift 2 ;;
    --install-only) INSTALL_ONLY=1; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1'" ;;
  esac
done

ensure_torch() {
  if "$PY" -c 'import torch.distributed' 2>/dev/null; then return 0; fi
  echo "compare_store.sh: torch is missing for $PY; installing python3-torch with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  # A stale or absent package list makes the install fail; refresh it once.
  if ! apt-get install -y --no-install-recommends python3-torch >&2; then
    apt-get update >&2
    apt-get install -y --no-install-recommends python3-torch >&2
  fi
  "$PY" -c 'import torch.distributed' || die "python3-torch installed but 'import torch.distributed' fails"
}

ensure_torch
[[ "$INSTALL_ONLY" -eq 1 ]] && exit 0

STORE_BENCH="$BUILD_DIR/bin/store_bench"
if [[ ! -x "$STORE_BENCH" ]]; then
  echo "compare_store.sh: building store_bench in $BUILD_DIR" >&2
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DMESHCOMM_BUILD_PYTHON=OFF -DMESHCOMM_BUILD_TESTS=OFF >&2
  cmake --build "$BUILD_DIR" -j2 --target store_bench >&2
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

COMMON=(--duration-ms "$DURATION_MS" --max-ops "$MAX_OPS" --csv)
# Each side is bounded on its own; the outer timeout is a backstop against a
# hang (15 measurements of at most a few seconds each, plus start-up).
LIMIT=$(( (DURATION_MS / 1000 + 30) * 15 + 120 ))

echo "compare_store.sh: meshcomm store_bench ..." >&2
timeout -k 5 "$LIMIT" "$STORE_BENCH" "${COMMON[@]}" > "$TMP/meshcomm.csv"
echo "compare_store.sh: torch.distributed.TCPStore ..." >&2
timeout -k 5 "$LIMIT" "$PY" "$ROOT/bench/torch_store_bench.py" "${COMMON[@]}" > "$TMP/torch.csv"

"$PY" - "$TMP/meshcomm.csv" "$TMP/torch.csv" "$DURATION_MS" "$MAX_OPS" <<'EOF'
import csv, sys

def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {(r["op"], int(r["value_bytes"]), int(r["clients"])): float(r["ops_per_s"]) for r in rows}

mesh, torch = load(sys.argv[1]), load(sys.argv[2])
print(f"# TCPStore ops/s, {sys.argv[3]} ms or {sys.argv[4]} ops per client per row "
      "(whichever ends first); add has no value payload")
print(f"{'op':<5} {'value_bytes':>11} {'clients':>7} {'meshcomm_ops_s':>15} {'torch_ops_s':>12} {'ratio':>7}")
keys = sorted(set(mesh) | set(torch), key=lambda k: (["set", "get", "add"].index(k[0]), k[1], k[2]))
for k in keys:
    m, t = mesh.get(k), torch.get(k)
    ratio = f"{m / t:.2f}" if m and t else "n/a"
    ms = f"{m:.0f}" if m is not None else "n/a"
    ts = f"{t:.0f}" if t is not None else "n/a"
    print(f"{k[0]:<5} {k[1]:>11} {k[2]:>7} {ms:>15} {ts:>12} {ratio:>7}")
EOF

#!/usr/bin/env bash
# Runs every suite of `make test` ROUNDS times in a row (default 5) while
# busy loops keep every core occupied, and reports each suite's result per
# round. A test that passes alone but fails here depends on timing.
#
#   scripts/flake-hunt.sh [ROUNDS] [SUITES...]
#   SUITES: make targets (default: test-cpp test-python test-python-tcp
#           test-torch test-launchers); logs go to build/flake-hunt/.
#
# The busy loops are this script's children, bounded in time (4 h) and
# stopped by pid when it ends.
set -uo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
shift || true
SUITES=("$@")
[[ ${#SUITES[@]} -gt 0 ]] || SUITES=(test-cpp test-python test-python-tcp test-torch test-launchers)
LOGS=build/flake-hunt
mkdir -p "$LOGS"

burners=()
stop_burners() {
  for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${burners[@]}"; do wait "$pid" 2>/dev/null; done
}
trap stop_burners EXIT
for _ in $(seq "$(nproc)"); do
  timeout 4h bash -c 'while :; do :; done' &
  burners+=($!)
done
echo "flake-hunt: ${#burners[@]} busy loops (pids ${burners[*]}); $ROUNDS rounds of ${SUITES[*]}"

failures=0
for round in $(seq "$ROUNDS"); do
  for suite in "${SUITES[@]}"; do
    log="$LOGS/round$round-$suite.log"
    start=$(date +%s)
    if make --no-print-directory "$suite" >"$log" 2>&1; then
      result=pass
    else
      result=FAIL
      failures=$((failures + 1))
    fi
    echo "round $round $suite: $result in $(( $(date +%s) - start )) s ($log)"
  done
done
echo "flake-hunt: $failures failing suite runs"
[[ $failures -eq 0 ]]

#!/usr/bin/env bash
# make demo: a real 4-process data-parallel training job on this machine,
# launched by meshrun, then a small all_reduce bandwidth table.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
NPROC=${NPROC:-4}
export PYTHONPATH="$PWD/$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"

echo "== meshcomm demo: $NPROC ranks train an MLP with all_reduce'd gradients =="
timeout 300 "$PYTHON" tools/meshrun --nproc-per-node "$NPROC" examples/data_parallel_train.py

echo
echo "== all_reduce through shared memory, $NPROC ranks on this host (meshcomm-bench) =="
timeout 300 "$BUILD/bin/meshcomm-bench" all_reduce -n "$NPROC" -b 8 -e 4M -f 8 --check

#!/usr/bin/env bash
# make demo: a real 4-process job on this machine, then a bandwidth table.
# Each rank is started with the variables a launcher sets (RANK, WORLD_SIZE,
# MASTER_ADDR, MASTER_PORT), exactly as under torchrun.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
NPROC=${NPROC:-4}

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

echo "== meshcomm demo: $NPROC ranks agree on the statistics of a sharded data set =="
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) WORLD_SIZE=$NPROC
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for ((r = 0; r < NPROC; r++)); do
  RANK=$r timeout 120 "$BUILD/bin/average_demo" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
pids=()
if [ $status -ne 0 ]; then
  echo "demo: a rank failed" >&2
  exit 1
fi

echo
echo "== all_reduce over TCP loopback, $NPROC ranks (meshcomm-bench) =="
timeout 300 "$BUILD/bin/meshcomm-bench" all_reduce -n "$NPROC" -b 8 -e 4M -f 8 --check

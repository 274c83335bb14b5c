#!/usr/bin/env bash
# Runs one meshcomm job across hosts that are network namespaces of this
# machine (bench/compare.sh --transport tcp): one meshrun per namespace,
# as on real hosts, each starting K ranks there.
#
#   netns_meshrun.sh --netns "NS0 NS1 ..." --addr ADDR0 --port PORT -k K \
#       [--build-dir DIR] COMMAND...
#
# ADDR0 is NS0's address, where rank 0 hosts the store on PORT. The hosts
# share this machine's hostname and boot id, so each namespace's name is its
# MESHCOMM_HOST_ID: ranks of one namespace share memory, the others are
# reached over TCP. meshcomm counts the ranks of every namespace against
# the machine's cores (by boot id), so its waits busy-poll or give up the
# core as they would for that many ranks on one host. The first host's
# output goes to stdout without meshrun's
# "[rank R] " prefix (meshcomm-bench prints on rank 0 only), the others' to
# stderr. Exit status: the first non-zero one of the meshruns.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NETNS="" ADDR="" PORT="" K="" BUILD_DIR="$ROOT/build"
die() { echo "netns_meshrun.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --netns) NETNS="$2"; shift 2 ;;
    --addr) ADDR="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    -k) K="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --) shift; break ;;
    -*) die "unknown option '$1'" ;;
    *) break ;;
  esac
done
[[ -n "$NETNS" && -n "$ADDR" && -n "$PORT" && -n "$K" && $# -gt 0 ]] ||
  die "usage: netns_meshrun.sh --netns \"NS0 NS1\" --addr ADDR0 --port PORT -k K COMMAND..."

read -r -a hosts <<< "$NETNS"
pids=()
stop() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
}
trap 'stop; exit 143' TERM INT
for i in "${!hosts[@]}"; do
  cmd=(ip netns exec "${hosts[$i]}" env MESHCOMM_HOST_ID="${hosts[$i]}"
       PYTHONPATH="$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}"
       /usr/bin/python3 "$ROOT/tools/meshrun" --nnodes "${#hosts[@]}" --node-rank "$i"
       --nproc-per-node "$K" --master-addr "$ADDR" --master-port "$PORT" --no-python "$@")
  if [[ "$i" -eq 0 ]]; then
    "${cmd[@]}" > >(sed -u 's/^\[rank [0-9]*\] //') &
  else
    "${cmd[@]}" >&2 &
  fi
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do
  wait "$pid" || { code=$?; [[ "$rc" -ne 0 ]] || rc=$code; stop; }
done
# The prefix filter of the first host ends with its meshrun; let it drain.
wait
exit "$rc"

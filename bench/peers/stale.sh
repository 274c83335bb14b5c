# Sourced (with ROOT set to the repository) by the scripts that build the
# benchmark programs of bench/peers: bench/compare.sh, install_peers.sh and
# run_peer.sh. A program is rebuilt when its source or one of the headers
# the programs include is newer than it; a header that a program does not
# include only costs it a needless rebuild.

PEER_HEADERS=("$ROOT/bench/peers/peer_bench.h" "$ROOT/tools/bench/calibration.h"
              "$ROOT/tools/bench/forked_job.h")

stale() {  # stale PROGRAM SOURCE: PROGRAM is missing, or older than SOURCE or a header
  local program="$1" input
  [[ -x "$program" ]] || return 0
  for input in "$2" "${PEER_HEADERS[@]}"; do
    if [[ "$input" -nt "$program" ]]; then return 0; fi
  done
  return 1
}

#!/usr/bin/env bash
# What this machine can move at all, to set meshcomm's TCP figures against:
# memory bandwidth of one core (and of each of two at once), and raw TCP
# throughput in the patterns of a large all_reduce, over loopback and across
# a veth pair between two network namespaces, unshaped and shaped with tc's
# token bucket as bench/compare.sh --transport tcp shapes it.
#
#   bash bench/tcp_ceilings.sh [--seconds T] [--repeats N] [--rates "10gbit 1gbit"]
#                              [--loopback-only]
#
# Every run lasts T seconds (3; at most 60) and is repeated N times (1) in
# turn with the others, so load on the machine spreads over all of them.
# The probes (bench/probes/tcp_streams.c, bench/probes/memory_bandwidth.c)
# are compiled into a temporary directory. The namespaces need root; they
# get unique names and are removed at the end, also on failure or ^C.
# Without root, or with --loopback-only (what bench/compare.sh --transport
# tcp takes before its loopback sweep), only the memory and loopback
# figures are taken.
#
# Reading the figures: "ring, both directions" is what each rank sends per
# second while it also receives as much (two ranks: both directions of the
# same connections), i.e. the bus bandwidth a ring all_reduce over TCP
# would reach if copying, reducing and waiting cost nothing; across the
# namespaces it is the leaders' exchange of the hierarchical all_reduce,
# whose bus bandwidth with two hosts of two ranks can reach 1.5x what each
# leader sends per second.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_EACH=3 REPEATS=1 RATES="10gbit 1gbit" LOOPBACK_ONLY=0
die() { echo "tcp_ceilings.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) SECONDS_EACH="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --rates) RATES="$2"; shift 2 ;;
    --loopback-only) LOOPBACK_ONLY=1; shift ;;
    *) die "unknown option '$1' (see the comment at the top)" ;;
  esac
done
[[ "$REPEATS" =~ ^[1-9][0-9]?$ ]] || die "--repeats must be 1..99"

WORK="$(mktemp -d /tmp/tcp_ceilings.XXXXXX)"
NS_TAG="mtc$$r$RANDOM"
HOSTS=("${NS_TAG}a" "${NS_TAG}b")
HOST_ADDR=(10.78.0.1 10.78.0.2)
HOST_IF=mtc0
NS_UP=0
source "$ROOT/bench/emulated_hosts.sh"
cleanup() {
  [[ "$NS_UP" -eq 1 ]] && emulated_hosts_down
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

gcc -O2 -Wall -o "$WORK/tcp_streams" "$ROOT/bench/probes/tcp_streams.c"
gcc -O2 -march=native -Wall -o "$WORK/memory_bandwidth" "$ROOT/bench/probes/memory_bandwidth.c"
STREAMS=("$WORK/tcp_streams" --seconds "$SECONDS_EACH")

say() { echo "== $*"; }
run() {  # LABEL=... run COMMAND...: its one line of output, after the label
  local out
  if out=$("$@" 2>&1); then echo "$LABEL: $out"; else echo "$LABEL: FAILED: $out"; fi
}

namespaces_up() {
  NS_UP=1
  emulated_hosts_up
}

ACROSS=(--netns "${HOSTS[0]},${HOSTS[1]}" --addrs "${HOST_ADDR[0]},${HOST_ADDR[1]}")
loopback_runs() {
  LABEL="loopback one way, 1 stream" run "${STREAMS[@]}" --oneway
  LABEL="loopback one way, 2 streams" run "${STREAMS[@]}" --oneway --streams 2
  LABEL="loopback 2 ranks both ways, 1 stream" run "${STREAMS[@]}"
  LABEL="loopback 2 ranks both ways, 2 streams" run "${STREAMS[@]}" --streams 2
  LABEL="loopback 2 ranks both ways, 4 MiB buffers" run "${STREAMS[@]}" --sndbuf 4194304 --rcvbuf 4194304
  LABEL="loopback ring of 4 ranks, 1 stream" run "${STREAMS[@]}" --ranks 4
}
across_runs() {  # across_runs WHAT
  LABEL="veth $1 one way, 1 stream" run "${STREAMS[@]}" "${ACROSS[@]}" --oneway
  LABEL="veth $1 both ways, 1 stream" run "${STREAMS[@]}" "${ACROSS[@]}"
  LABEL="veth $1 both ways, 2 streams" run "${STREAMS[@]}" "${ACROSS[@]}" --streams 2
}

say "$(date -u +%FT%TZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), kernel $(uname -r)"
say "tcp_rmem $(sysctl -n net.ipv4.tcp_rmem | tr '\t' ' '), tcp_wmem $(sysctl -n net.ipv4.tcp_wmem | tr '\t' ' ')"
[[ "$(id -u)" -eq 0 && "$LOOPBACK_ONLY" -eq 0 ]] && namespaces_up
for rep in $(seq "$REPEATS"); do
  say "repeat $rep of $REPEATS"
  LABEL="memory" run "$WORK/memory_bandwidth" --bytes 64M --seconds 1
  LABEL="memory, two cores at once" run "$WORK/memory_bandwidth" --bytes 64M --seconds 1 --procs 2
  loopback_runs
  if [[ "$NS_UP" -eq 1 ]]; then
    across_runs unshaped
    for rate in $RATES; do
      shape_link "$rate"
      across_runs "tbf $rate"
      unshape_link
    done
  fi
done
say "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"

#!/usr/bin/env bash
# What this machine can move at all, to set meshcomm's TCP figures against:
# memory bandwidth of one core (and of each of two at once), and raw TCP
# throughput in the patterns of a large all_reduce, over loopback and across
# a veth pair between two network namespaces, unshaped and shaped with tc's
# token bucket as bench/compare.sh --transport tcp shapes it.
#
#   bash bench/tcp_ceilings.sh [--seconds T] [--repeats N] [--rates "10gbit 1gbit"]
#
# Every run lasts T seconds (3; at most 60) and is repeated N times (1) in
# turn with the others, so load on the machine spreads over all of them.
# The probes (bench/probes/tcp_streams.c, bench/probes/memory_bandwidth.c)
# are compiled into a temporary directory. The namespaces need root; they
# get unique names and are removed at the end, also on failure or ^C.
# Without root only the memory and loopback figures are taken.
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
SECONDS_EACH=3 REPEATS=1 RATES="10gbit 1gbit"
die() { echo "tcp_ceilings.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) SECONDS_EACH="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --rates) RATES="$2"; shift 2 ;;
    *) die "unknown option '$1' (see the comment at the top)" ;;
  esac
done
[[ "$REPEATS" =~ ^[1-9][0-9]?$ ]] || die "--repeats must be 1..99"

WORK="$(mktemp -d /tmp/tcp_ceilings.XXXXXX)"
NS_TAG="mtc$$r$RANDOM"
HOSTS=("${NS_TAG}a" "${NS_TAG}b")
ADDRS=(10.78.0.1 10.78.0.2)
IFACE=mtc0
NS_UP=0
cleanup() {
  if [[ "$NS_UP" -eq 1 ]]; then
    local ns
    for ns in "${HOSTS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  fi
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
  ip netns add "${HOSTS[0]}"
  ip netns add "${HOSTS[1]}"
  NS_UP=1
  ip netns exec "${HOSTS[0]}" ip link add "$IFACE" type veth peer name "$IFACE" netns "${HOSTS[1]}"
  local i
  for i in 0 1; do
    ip netns exec "${HOSTS[$i]}" ip addr add "${ADDRS[$i]}/24" dev "$IFACE"
    ip netns exec "${HOSTS[$i]}" ip link set "$IFACE" up
    ip netns exec "${HOSTS[$i]}" ip link set lo up
  done
}

# As bench/compare_tcp.sh: both ends, a bucket of 1 ms at the rate (at
# least 64 KiB), packets queued up to 20 ms.
shape() {
  local rate="$1" bits burst i
  case "${rate,,}" in
    *gbit) bits=$(( ${rate%[gG]bit} * 1000000000 )) ;;
    *mbit) bits=$(( ${rate%[mM]bit} * 1000000 )) ;;
    *) die "--rates: '$rate' is not a rate like 10gbit or 500mbit" ;;
  esac
  burst=$((bits / 8 / 1000))
  (( burst < 65536 )) && burst=65536
  for i in 0 1; do
    ip netns exec "${HOSTS[$i]}" tc qdisc replace dev "$IFACE" root tbf rate "$rate" \
      burst "$burst" latency 20ms
  done
}
unshape() {
  local i
  for i in 0 1; do ip netns exec "${HOSTS[$i]}" tc qdisc del dev "$IFACE" root 2>/dev/null || true; done
}

ACROSS=(--netns "${HOSTS[0]},${HOSTS[1]}" --addrs "${ADDRS[0]},${ADDRS[1]}")
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
[[ "$(id -u)" -eq 0 ]] && namespaces_up
for rep in $(seq "$REPEATS"); do
  say "repeat $rep of $REPEATS"
  LABEL="memory" run "$WORK/memory_bandwidth" --bytes 64M --seconds 1
  LABEL="memory, two cores at once" run "$WORK/memory_bandwidth" --bytes 64M --seconds 1 --procs 2
  loopback_runs
  if [[ "$NS_UP" -eq 1 ]]; then
    across_runs unshaped
    for rate in $RATES; do
      shape "$rate"
      across_runs "tbf $rate"
      unshape
    done
  fi
done
say "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"

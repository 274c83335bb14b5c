# Two emulated hosts for the TCP benchmarks: two network namespaces joined
# by a veth pair, and tc's token bucket on the link (netem is not available
# here). Sourced by bench/compare_tcp.sh and bench/tcp_ceilings.sh, which
# set, before calling these functions:
#   HOSTS=(ns0 ns1)       unique namespace names
#   HOST_ADDR=(a0 a1)     the two ends' addresses (a /24)
#   HOST_IF=name          the veth's name on both ends
# and define die(). Needs root.

# Creates both namespaces and the link between them.
emulated_hosts_up() {
  ip netns add "${HOSTS[0]}"
  ip netns add "${HOSTS[1]}"
  ip netns exec "${HOSTS[0]}" ip link add "$HOST_IF" type veth peer name "$HOST_IF" netns "${HOSTS[1]}"
  local i
  for i in 0 1; do
    ip netns exec "${HOSTS[$i]}" ip addr add "${HOST_ADDR[$i]}/24" dev "$HOST_IF"
    ip netns exec "${HOSTS[$i]}" ip link set "$HOST_IF" up
    ip netns exec "${HOSTS[$i]}" ip link set lo up
  done
}

# Removes both namespaces (and with them the link); safe to call twice.
emulated_hosts_down() {
  local ns
  for ns in "${HOSTS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
}

# Shapes both directions of the link to RATE (tc's syntax: 1gbit, 10gbit).
# The bucket holds 1 ms at the rate (at least 64 KiB, one GSO packet), so
# no burst runs far beyond it; packets queue for up to 20 ms.
shape_link() {
  local rate="$1" bits
  bits=$(tc_bits "$rate")
  local burst=$((bits / 8 / 1000))
  (( burst < 65536 )) && burst=65536
  local i
  for i in 0 1; do
    ip netns exec "${HOSTS[$i]}" tc qdisc replace dev "$HOST_IF" root tbf rate "$rate" \
      burst "$burst" latency 20ms
  done
}

unshape_link() {
  local i
  for i in 0 1; do ip netns exec "${HOSTS[$i]}" tc qdisc del dev "$HOST_IF" root 2>/dev/null || true; done
}

tc_bits() {  # 10gbit -> 10000000000
  local r="${1,,}" m=1
  case "$r" in *gbit) m=1000000000 ;; *mbit) m=1000000 ;; *kbit) m=1000 ;; *bit) m=1 ;;
    *) die "--rates: '$1' is not a rate like 1gbit or 500mbit" ;; esac
  r="${r%[gmk]bit}"; r="${r%bit}"
  [[ "$r" =~ ^[0-9]+$ ]] || die "--rates: '$1' is not a rate like 1gbit or 500mbit"
  echo $((r * m))
}

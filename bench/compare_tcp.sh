# bench/compare.sh --transport tcp: the TCP sweep, sourced by compare.sh
# after its options, packages, peer programs and run_one are in place.
#
# Every library talks TCP: meshcomm with shared memory off (MESHCOMM_SHM=0;
# across namespaces its ranks of one host still share memory, the
# hierarchical route), Open MPI with `--mca btl tcp,self`, Gloo and
# torch-gloo with their TCP transport. Networks (--networks):
#   loopback  every rank on this host over 127.0.0.1, P from --nranks
#   2xK       two hosts of K ranks each: two network namespaces joined by a
#             veth pair (10.77.0.1 and .2, interface mcb0 in both), made
#             here with unique names and removed on exit; P = 2K
# Then, for each rate of --rates, the same veth shaped with tc's token
# bucket filter on both ends and one 64 MiB all_reduce across 2 hosts x 2
# ranks per library (network "2x2@RATE").
#
# How each library's ranks get into their namespaces: meshcomm runs one
# meshrun per namespace (bench/netns_meshrun.sh), as on real hosts; Open
# MPI's mpirun starts its daemon in each namespace through a launch agent
# (bench/netns_rsh.sh, hostfile "NS slots=K"), and ranks fill the first
# host first; gloo_bench and torch_bench.py fork their ranks and each enters
# its namespace (--netns, --iface mcb0) before opening a socket.

[[ "$(id -u)" -eq 0 ]] || [[ "$NETWORKS" == loopback && -z "$RATES" ]] ||
  die "--transport tcp across network namespaces needs root (or --networks loopback --rates '')"

TCP_LIBS=()
for lib in $LIBS; do
  case "$lib" in
    meshcomm|openmpi|gloo|torch) TCP_LIBS+=("$lib") ;;
    *) say "no TCP form of '$lib' in this sweep; skipped" ;;
  esac
done

# ---- sizes: the sweep, and its last size when the factor steps over it ----

to_bytes() {  # 64M -> 67108864 (K, M, G are powers of 1024, optional B)
  local v="${1%[bB]}" shift=0
  case "$v" in *[kK]) shift=10 ;; *[mM]) shift=20 ;; *[gG]) shift=30 ;; esac
  v="${v%[kKmMgG]}"
  [[ "$v" =~ ^[0-9]+$ ]] || die "bad size '$1'"
  echo $((v << shift))
}
MIN_BYTES=$(to_bytes "$MINB")
MAX_BYTES=$(to_bytes "$MAXB")
LAST_BYTES=$MIN_BYTES
while (( LAST_BYTES * FACTOR <= MAX_BYTES )); do LAST_BYTES=$((LAST_BYTES * FACTOR)); done
SWEEPS=("${SWEEP[*]}")
if (( LAST_BYTES < MAX_BYTES )); then
  TAIL=(-b "$MAXB" -e "$MAXB")
  [[ -n "$ITERS" ]] && TAIL+=(--iters "$ITERS")
  [[ -n "$WARMUP" ]] && TAIL+=(--warmup "$WARMUP")
  SWEEPS+=("${TAIL[*]}")
fi
if [[ "$QUICK" -eq 1 ]] && ! given -b && ! given -e && ! given -f; then
  SWEEPS=("-b 8 -e 8" "-b 64K -e 64M -f 1024")
  [[ -n "$ITERS" ]] && SWEEPS=("${SWEEPS[@]/%/ --iters $ITERS}")
  [[ -n "$WARMUP" ]] && SWEEPS=("${SWEEPS[@]/%/ --warmup $WARMUP}")
fi
LARGE=(-b 64M -e 64M)
[[ -n "$WARMUP" ]] && LARGE+=(--warmup "$WARMUP")

# ---- hosts: two network namespaces and a veth pair ----

NS_TAG="mcb$$r$RANDOM"
HOSTS=("${NS_TAG}h0" "${NS_TAG}h1")
HOST_ADDR=(10.77.0.1 10.77.0.2)
HOST_IF=mcb0
HOSTS_UP=0
MPI_HOSTFILE="$LOGS/hostfile"
NEXT_PORT=$((29500 + RANDOM % 2000))

source "$ROOT/bench/emulated_hosts.sh"

hosts_down() {
  emulated_hosts_down
  [[ -n "${MPI_TMPDIR:-}" ]] && rm -rf "$MPI_TMPDIR"
  HOSTS_UP=0
}

hosts_up() {
  [[ "$HOSTS_UP" -eq 1 ]] && return 0
  trap hosts_down EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  HOSTS_UP=1
  # Open MPI's daemons, one per namespace, each with a /tmp of its own
  # (bench/netns_rsh.sh); short, since it ends up in socket paths.
  MPI_TMPDIR="$(mktemp -d /tmp/mcb-ompi.XXXXXX)"
  emulated_hosts_up
  say "hosts: network namespaces ${HOSTS[*]} (${HOST_ADDR[*]}, veth $HOST_IF)"
}

# ---- one library, one operation, one network ----

# run_tcp LIB OP NETWORK P SWEEP...: NETWORK is loopback or 2xK.
run_tcp() {
  local lib="$1" op="$2" net="$3" p="$4"
  shift 4
  local sweep=("$@") per_host=0
  NETWORK="$net"
  if [[ "$net" != loopback ]]; then
    per_host="${net#2x}"
    per_host="${per_host%@*}"
  fi
  local ns_list=""
  if [[ "$net" != loopback ]]; then
    local r
    for ((r = 0; r < p; r++)); do ns_list+="${ns_list:+,}${HOSTS[$((r / per_host))]}"; done
  fi
  case "$lib" in
    meshcomm)
      if [[ "$net" == loopback ]]; then
        run_one meshcomm "$op" "$p" env MESHCOMM_SHM=0 "$MESHCOMM_BENCH" "$op" -n "$p" \
          "${sweep[@]}" --csv --time-limit "$TIMEOUT"
      else
        NEXT_PORT=$((NEXT_PORT + 1))
        run_one meshcomm "$op" "$p" "$ROOT/bench/netns_meshrun.sh" --netns "${HOSTS[*]}" \
          --addr "${HOST_ADDR[0]}" --port "$NEXT_PORT" -k "$per_host" --build-dir "$BUILD_DIR" \
          -- "$MESHCOMM_BENCH" "$op" "${sweep[@]}" --csv --time-limit "$TIMEOUT"
      fi ;;
    openmpi)
      local mpi=(mpirun --bind-to none --mca pml ob1 --mca btl tcp,self)
      [[ "$(id -u)" -eq 0 ]] && mpi+=(--allow-run-as-root)
      if [[ "$net" == loopback ]]; then
        mpi+=(--mca btl_tcp_if_include lo -np "$p")
        [[ "$p" -gt "$(nproc)" ]] && mpi+=(--oversubscribe)
      else
        printf '%s slots=%s\n' "${HOSTS[0]}" "$per_host" "${HOSTS[1]}" "$per_host" > "$MPI_HOSTFILE"
        mpi=(ip netns exec "${HOSTS[0]}" env NETNS_RSH_TMPDIR="$MPI_TMPDIR" "${mpi[@]}" --mca plm_rsh_agent "$ROOT/bench/netns_rsh.sh"
             --hostfile "$MPI_HOSTFILE" --map-by slot --mca btl_tcp_if_include "$HOST_IF"
             --mca oob_tcp_if_include "$HOST_IF" -np "$p")
      fi
      run_one openmpi "$op" "$p" "${mpi[@]}" "$PEERS_DIR/mpi_bench" "$op" "${sweep[@]}" ;;
    gloo|torch)
      local where=()
      [[ "$net" == loopback ]] || where=(--netns "$ns_list" --iface "$HOST_IF")
      if [[ "$lib" == torch ]]; then
        run_one torch-gloo "$op" "$p" "$PY" "$SRC/torch_bench.py" "$op" -n "$p" "${sweep[@]}" \
          "${where[@]}" --time-limit "$TIMEOUT"
      elif [[ "$op" == all_reduce ]]; then
        run_one gloo-ring "$op" "$p" "$PEERS_DIR/gloo_bench" "$op" -n "$p" "${sweep[@]}" \
          --algorithm ring "${where[@]}" --time-limit "$TIMEOUT"
        run_one gloo-hd "$op" "$p" "$PEERS_DIR/gloo_bench" "$op" -n "$p" "${sweep[@]}" \
          --algorithm hd "${where[@]}" --time-limit "$TIMEOUT"
      else
        run_one gloo "$op" "$p" "$PEERS_DIR/gloo_bench" "$op" -n "$p" "${sweep[@]}" \
          "${where[@]}" --time-limit "$TIMEOUT"
      fi ;;
  esac
}

# ---- the run ----

# What loopback TCP itself carries on this machine, before and after the
# sweep (the report takes the higher): the report marks the targets that
# would need more than that (bench/compare_tcp_report.py --ceilings).
CEILINGS="$LOGS/tcp-ceilings.txt"
measure_ceilings() {
  [[ " $NETWORKS " == *" loopback "* ]] || return 0
  say "loopback TCP ceilings (bench/tcp_ceilings.sh --loopback-only)"
  bash "$ROOT/bench/tcp_ceilings.sh" --loopback-only --seconds 2 >> "$CEILINGS" 2>&1 ||
    say "bench/tcp_ceilings.sh failed; see $CEILINGS"
}
measure_ceilings

for REP in $(seq "$REPEATS"); do
  for net in $NETWORKS; do
    if [[ "$net" == loopback ]]; then
      ranks="$NRANKS"
    else
      hosts_up
      ranks=$((2 * ${net#2x}))
    fi
    for p in $ranks; do
      for op in $OPS; do
        for lib in "${TCP_LIBS[@]}"; do
          for k in "${!SWEEPS[@]}"; do
            read -r -a sw <<< "${SWEEPS[$k]}"
            RUN_TAG="$net-$k"
            run_tcp "$lib" "$op" "$net" "$p" "${sw[@]}"
          done
        done
      done
    done
  done
  for rate in $RATES; do
    hosts_up
    shape_link "$rate"
    say "veth shaped to $rate (tc tbf)"
    for lib in "${TCP_LIBS[@]}"; do
      RUN_TAG="2x2@$rate"
      run_tcp "$lib" all_reduce "2x2@$rate" 4 "${LARGE[@]}"
    done
    unshape_link
  done
done
hosts_down
trap - EXIT
measure_ceilings

CEILING_ARGS=()
[[ -s "$CEILINGS" ]] && CEILING_ARGS=(--ceilings "$CEILINGS")
finish_run compare-tcp compare_tcp_report.py "${CEILING_ARGS[@]}"
exit 0

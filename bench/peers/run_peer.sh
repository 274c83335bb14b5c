#!/usr/bin/env bash
# Runs one library's sweep of one collective on this host, with that
# library's launcher and settings (bench/peers/PEERS.md says why each one),
# and prints the benchmark's CSV on stdout: a header, then one row per size,
# with meshcomm-bench --csv's columns
#   op,nranks,bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,check
# Launchers' and libraries' notes go to stderr.
#
# usage: bench/peers/run_peer.sh LIB TRANSPORT OP NRANKS MINB MAXB FACTOR [EXTRA...]
#   LIB        impi mpich5 ompi5 oneccl deepspeed (installed by
#              bench/peers/install_peers.sh), or meshcomm, openmpi (Debian's
#              4.1), gloo (Debian's, bench/peers/gloo_bench.cc), torch-gloo
#              (Debian's torch 1.13; bench/compare.sh --install-only --libs
#              "openmpi gloo torch" installs their packages), torch-meshcomm
#              (torch.distributed on meshcomm's backend, with the build's venv),
#              torch-meshcomm-op (meshcomm.torch.all_reduce_, the same venv)
#   TRANSPORT  shm: the library's own choice among the ranks of one host
#              (shared memory for all but gloo and torch-gloo, which only
#              have TCP); tcp: TCP over loopback only
#   OP         all_reduce broadcast all_gather reduce_scatter all_to_all
#              barrier (deepspeed: all_reduce only)
#   MINB MAXB FACTOR   the size sweep, as meshcomm-bench -b -e -f take it
#              (one cell: MINB = MAXB)
#   EXTRA      passed to the benchmark program: --check, --iters N,
#              --warmup N, --buffers K; gloo: --algorithm ring|hd
# Environment:
#   PEERS_DIR        the peers' prefix (default build-peers beside bench/)
#   MESHCOMM_BUILD   meshcomm's build (default build), for meshcomm-bench
#   PEER_TIMEOUT     seconds before the run is killed (default 600); the
#                    exit status is then 124
# Exit status: the benchmark's (1: a --check failed), 2 for a usage error or
# a missing install, 4 when the library has no such transport or operation.
#
# Ranks are never pinned to cores, for any library (meshcomm-bench does not
# pin, and bench/compare.sh runs Open MPI 4.1 with --bind-to none).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SRC="$ROOT/bench/peers"
PEERS="${PEERS_DIR:-$ROOT/build-peers}"
MESHCOMM_BUILD="${MESHCOMM_BUILD:-$ROOT/build}"
TIMEOUT="${PEER_TIMEOUT:-600}"

usage() { echo "run_peer.sh: $*" >&2; echo "usage: run_peer.sh LIB TRANSPORT OP NRANKS MINB MAXB FACTOR [EXTRA...] (see the header of $0)" >&2; exit 2; }
missing() { echo "run_peer.sh: $*" >&2; exit 2; }
unsupported() { echo "run_peer.sh: $*" >&2; exit 4; }

[[ $# -ge 7 ]] || usage "expected at least 7 arguments, got $#"
LIB="$1" TRANSPORT="$2" OP="$3" N="$4" MINB="$5" MAXB="$6" FACTOR="$7"
shift 7
EXTRA=("$@")
case "$TRANSPORT" in shm|tcp) ;; *) usage "TRANSPORT must be shm or tcp, not '$TRANSPORT'" ;; esac
case "$OP" in all_reduce|broadcast|all_gather|reduce_scatter|all_to_all|barrier) ;;
  *) usage "unknown operation '$OP'" ;; esac
[[ "$N" =~ ^[1-9][0-9]*$ ]] || usage "NRANKS must be a positive integer, not '$N'"
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || usage "PEER_TIMEOUT must be a positive number of seconds"
SWEEP=(-b "$MINB" -e "$MAXB" -f "$FACTOR")
CORES="$(nproc)"
OVERSUBSCRIBED=0
[[ "$N" -gt "$CORES" ]] && OVERSUBSCRIBED=1

source "$SRC/stale.sh"

need() {  # need FILE WHAT: FILE must exist, else say how to get it
  [[ -e "$1" ]] || missing "$1 not found: $2"
}
need_debs() {  # need_debs LIB PACKAGE...: Debian packages bench/compare.sh installs
  local lib="$1" p
  shift
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing "$lib needs Debian's $p: bench/compare.sh --install-only --libs $lib"
  done
}
run() {  # the run itself, bounded; launchers pass SIGTERM on to their ranks
  exec timeout -k 10 "$TIMEOUT" "$@" < /dev/null
}

# libfabric's tcp provider on loopback, as Intel MPI and oneCCL use it for
# TCP. The library is the one in the mpich wheel (2.5.1; Intel's wheels ask
# for >= 2.6, which PyPI lacks), else Debian's libfabric1; its path goes into
# the variable named $1 (each of the two reads its own).
ofi_tcp_on_loopback() {
  local f
  for f in "$PEERS/mpich5/lib/mpich/libfabric.so.1" /usr/lib/x86_64-linux-gnu/libfabric.so.1; do
    if [[ -e "$f" ]]; then
      export FI_PROVIDER=tcp FI_TCP_IFACE=lo "$1=$f"
      return
    fi
  done
  missing "no libfabric for TCP: run bench/peers/install_peers.sh mpich5 (or install Debian's libfabric1)"
}

# Intel MPI's hydra launcher, as impi and oneccl use it.
intel_mpiexec() {
  local intel="$PEERS/intel"
  need "$intel/bin/mpiexec" "run bench/peers/install_peers.sh impi"
  # I_MPI_ROOT: the wheel's tools and tuning files are found from it.
  # I_MPI_PIN=0: no pinning (see the header).
  export I_MPI_ROOT="$intel" I_MPI_PIN=0
  MPIEXEC=("$intel/bin/mpiexec" -n "$N")
}

case "$LIB" in
  impi)
    need "$PEERS/bin/mpi_bench-impi" "run bench/peers/install_peers.sh impi"
    intel_mpiexec
    if [[ "$TRANSPORT" == shm ]]; then
      export I_MPI_FABRICS=shm
    else
      # ofi only (no shm), libfabric's tcp provider on loopback, and
      # collectives built on point-to-point, not on shared memory.
      export I_MPI_FABRICS=ofi I_MPI_COLL_INTRANODE=pt2pt
      ofi_tcp_on_loopback I_MPI_OFI_LIBRARY
    fi
    run "${MPIEXEC[@]}" "$PEERS/bin/mpi_bench-impi" "$OP" "${SWEEP[@]}" "${EXTRA[@]}" ;;

  mpich5)
    need "$PEERS/bin/mpi_bench-mpich5" "run bench/peers/install_peers.sh mpich5"
    # More ranks than cores: after 4096 polls that find nothing a waiting
    # rank sleeps 1 us, so the rank it waits for gets the core.
    [[ "$OVERSUBSCRIBED" -eq 1 ]] && export MPIR_CVAR_CH4_PROGRESS_THROTTLE=1
    if [[ "$TRANSPORT" == tcp ]]; then
      # No shared memory between local ranks; the ofi netmod with libfabric's
      # tcp provider on loopback.
      export MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_CH4_NETMOD=ofi FI_PROVIDER=tcp FI_TCP_IFACE=lo
    fi
    run "$PEERS/mpich5/bin/mpiexec" -n "$N" "$PEERS/bin/mpi_bench-mpich5" "$OP" "${SWEEP[@]}" "${EXTRA[@]}" ;;

  ompi5|openmpi)
    if [[ "$LIB" == ompi5 ]]; then
      need "$PEERS/bin/mpi_bench-ompi5" "run bench/peers/install_peers.sh ompi5"
      cmd=("$PEERS/ompi5/bin/mpirun") bench="$PEERS/bin/mpi_bench-ompi5" sm=sm
    else
      need_debs openmpi openmpi-bin libopenmpi-dev
      bench="$PEERS/mpi_bench" sm=vader  # 4.1 names its shared-memory btl vader
      # bench/compare.sh's build, with Open MPI's own wrapper and launcher
      # named: plain mpicc and mpirun may be MPICH's (Debian alternatives).
      if stale "$bench" "$SRC/mpi_bench.c"; then
        mkdir -p "$PEERS"
        mpicc.openmpi -O2 -std=c11 -Wall -Wextra -o "$bench" "$SRC/mpi_bench.c" >&2
      fi
      cmd=(mpirun.openmpi)
    fi
    # ob1 with the shared-memory (or TCP) btl: what Open MPI picks on one
    # host without a network card, named so that nothing else is probed.
    cmd+=(--bind-to none --mca pml ob1 -np "$N")
    if [[ "$TRANSPORT" == shm ]]; then
      cmd+=(--mca btl "self,$sm")
    else
      cmd+=(--mca btl tcp,self --mca btl_tcp_if_include lo)
    fi
    [[ "$OVERSUBSCRIBED" -eq 1 ]] && cmd+=(--oversubscribe)
    [[ "$(id -u)" -eq 0 ]] && cmd+=(--allow-run-as-root)
    run "${cmd[@]}" "$bench" "$OP" "${SWEEP[@]}" "${EXTRA[@]}" ;;

  oneccl)
    need "$PEERS/bin/ccl_bench" "run bench/peers/install_peers.sh oneccl"
    intel_mpiexec
    # The calling thread drives each operation instead of handing it to a
    # worker thread per rank: on 2 cores a worker thread that has to be
    # scheduled costs each small operation milliseconds.
    export CCL_WORKER_OFFLOAD=0
    if [[ "$TRANSPORT" == shm ]]; then
      # Intel MPI carries oneCCL's messages: shared memory on one host.
      export CCL_ATL_TRANSPORT=mpi I_MPI_FABRICS=shm
    else
      # libfabric's tcp provider directly, oneCCL's key-value store on
      # loopback too. MPI only exchanges the store's address at start-up.
      export CCL_ATL_TRANSPORT=ofi CCL_KVS_IFACE=lo
      ofi_tcp_on_loopback CCL_OFI_LIBRARY_PATH
    fi
    run "${MPIEXEC[@]}" "$PEERS/bin/ccl_bench" "$OP" "${SWEEP[@]}" "${EXTRA[@]}" ;;

  deepspeed)
    [[ "$TRANSPORT" == shm ]] || unsupported "deepspeed: the op is shared memory only (no tcp)"
    [[ "$OP" == all_reduce ]] || unsupported "deepspeed: the op has only all_reduce"
    need "$PEERS/deepspeed/op/build/deepspeed_shm_comm.so" "run bench/peers/install_peers.sh deepspeed"
    run "$PEERS/pyenv/bin/python" "$SRC/deepspeed_bench.py" "$OP" -n "$N" \
      --op-dir "$PEERS/deepspeed/op" "${SWEEP[@]}" --time-limit "$TIMEOUT" "${EXTRA[@]}" ;;

  meshcomm)
    need "$MESHCOMM_BUILD/bin/meshcomm-bench" "build meshcomm first (make build), or set MESHCOMM_BUILD"
    [[ "$TRANSPORT" == tcp ]] && export MESHCOMM_SHM=0
    run "$MESHCOMM_BUILD/bin/meshcomm-bench" "$OP" -n "$N" "${SWEEP[@]}" --csv \
      --time-limit "$TIMEOUT" "${EXTRA[@]}" ;;

  torch-meshcomm|torch-meshcomm-op)
    # torch.distributed's functions on the meshcomm backend, as torch users
    # call them, or (-op, all_reduce only) meshcomm.torch.all_reduce_
    # (bench/peers/torch_bench.py, torch 2.x from the build's venv).
    need "$MESHCOMM_BUILD/venv/bin/python" "make build makes the venv with torch"
    backend=meshcomm
    if [[ "$LIB" == torch-meshcomm-op ]]; then
      [[ "$OP" == all_reduce ]] || unsupported "torch-meshcomm-op: meshcomm.torch has only all_reduce_"
      backend=meshcomm-op
    fi
    [[ "$TRANSPORT" == tcp ]] && export MESHCOMM_SHM=0
    export PYTHONPATH="$MESHCOMM_BUILD/python"
    run "$MESHCOMM_BUILD/venv/bin/python" "$SRC/torch_bench.py" "$OP" -n "$N" "${SWEEP[@]}" \
      --backend "$backend" --time-limit "$TIMEOUT" "${EXTRA[@]}" ;;

  gloo)
    # Gloo's only transport here is TCP (127.0.0.1), whatever TRANSPORT says.
    if stale "$PEERS/gloo_bench" "$SRC/gloo_bench.cc"; then
      need_debs gloo libgloo-dev
      mkdir -p "$PEERS"
      g++ -O2 -std=c++20 -Wall -Wextra -o "$PEERS/gloo_bench" "$SRC/gloo_bench.cc" -lgloo -pthread >&2
    fi
    run "$PEERS/gloo_bench" "$OP" -n "$N" "${SWEEP[@]}" --time-limit "$TIMEOUT" "${EXTRA[@]}" ;;

  torch-gloo)
    # torch's gloo backend is TCP only, whatever TRANSPORT says.
    need_debs torch python3-torch
    run /usr/bin/python3 "$SRC/torch_bench.py" "$OP" -n "$N" "${SWEEP[@]}" \
      --time-limit "$TIMEOUT" "${EXTRA[@]}" ;;

  *) usage "unknown library '$LIB'" ;;
esac

#!/usr/bin/env bash
# Runs the same collective sweeps with meshcomm (meshcomm-bench) and with
# Open MPI, Gloo and torch.distributed (gloo backend), in one run on this
# host, and writes every row to one CSV, then a markdown report and plots.
#
# usage: bench/compare.sh [options]
#        bench/compare.sh --per-cell [percell options]
#   --per-cell          (first argument only) the per-cell comparison
#                       instead: every library run back to back per (transport,
#                       op, ranks, size) in rotating rounds, with a verdict per
#                       cell against the best peer; the remaining arguments go
#                       to bench/percell.py (see its --help)
#   --nranks "2 4 8"    process counts (default "2 4 8")
#   --ops "OPS"         any of all_reduce broadcast all_gather reduce_scatter
#                       all_to_all barrier (default: all six)
#   --libs "LIBS"       any of meshcomm openmpi gloo torch torch-meshcomm
#                       (default: all five; gloo's all_reduce runs as
#                       gloo-ring and gloo-hd; torch is Debian's torch with
#                       gloo; torch-meshcomm runs torch 2.x from the build's
#                       venv three ways: torch-meshcomm (the meshcomm.torch
#                       backend), torch2-gloo (gloo on that torch) and
#                       meshcomm-py (meshcomm's own Python API), then a DDP
#                       step-time comparison, bench/torch_ddp_bench.py)
#   -b SIZE -e SIZE -f F  size sweep, as meshcomm-bench takes it (default
#                       -b 8 -e 64M -f 4; 8 x 4^k stops at 32M)
#   --iters N           fixed timed iterations (default: adaptive, ~0.25 s)
#   --warmup N          untimed iterations per size (default 5)
#   --repeats N         sweep everything N times, each repeat visiting every
#                       library in turn, so a slow minute of the host falls on
#                       all of them; the report takes each row's median
#                       (default 1)
#   --timeout S         bound of each single benchmark invocation (default 600)
#   --build-dir DIR     meshcomm build with bin/meshcomm-bench (default build)
#   --peers-dir DIR     where the peer programs are built (default build-peers)
#   --results-dir DIR   where the CSV, logs and report go (default bench/results)
#   --img-dir DIR       where the plots go (default docs/img)
#   --install-only      only install the missing Debian packages
#   --no-report         skip compare_report.py
#   --transport tcp     every library over TCP instead (bench/compare_tcp.sh):
#                       meshcomm with MESHCOMM_SHM=0, Open MPI with btl
#                       tcp,self, Gloo and torch-gloo; on loopback and across
#                       two network namespaces; the report is
#                       bench/compare_tcp_report.py. It changes the defaults
#                       to --nranks "2 4" -b 8 -e 64M -f 8 --warmup 2
#                       --timeout 300 (the 64 MiB row in a run of its own)
#                       and adds:
#   --networks "NETS"   loopback and/or 2xK, two hosts of K ranks (network
#                       namespaces; needs root) (default "loopback 2x1 2x2")
#   --rates "RATES"     a 64 MiB all_reduce, 2 hosts x 2 ranks, with the veth
#                       shaped by tc tbf to each rate (default "1gbit
#                       10gbit"; "" for none)
#   --quick             all_reduce only, at 8 B, 64 KiB and 64 MiB (a few
#                       minutes); --ops and sizes given on the line win
#
# The Debian packages the chosen libraries need (openmpi-bin libopenmpi-dev,
# libgloo-dev, python3-torch; python3-matplotlib for the report and the
# per-cell plots) are installed with apt-get first when missing (as root, or
# through sudo).
#
# A benchmark that fails or outlasts --timeout is killed and reported; its
# rows are missing from the CSV and the run goes on with the next one.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY=/usr/bin/python3
NRANKS="2 4 8"
OPS="all_reduce broadcast all_gather reduce_scatter all_to_all barrier"
LIBS="meshcomm openmpi gloo torch torch-meshcomm"
MINB=8
MAXB=64M
FACTOR=4
ITERS=""
WARMUP=""
REPEATS=1
TIMEOUT=600
BUILD_DIR="$ROOT/build"
PEERS_DIR="$ROOT/build-peers"
RESULTS_DIR="$ROOT/bench/results"
IMG_DIR="$ROOT/docs/img"
INSTALL_ONLY=0
REPORT=1
TRANSPORT=shm
NETWORKS="loopback 2x1 2x2"
RATES="1gbit 10gbit"
QUICK=0
GIVEN=" "  # the options given on the command line, for --transport tcp's defaults

die() { echo "compare.sh: $*" >&2; exit 2; }
say() { echo "compare.sh: $*" >&2; }

need_value() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value"; }
PER_CELL=0
if [[ "${1:-}" == --per-cell ]]; then
  shift
  PER_CELL=1
  PER_CELL_ARGS=("$@")
  # The Debian packages of the libraries it compares (Open MPI 4.1, Gloo);
  # the others come from bench/peers/install_peers.sh.
  LIBS=""
  while [[ $# -gt 0 ]]; do
    if [[ "$1" == --libs && $# -ge 2 ]]; then
      for lib in $2; do [[ "$lib" == openmpi || "$lib" == gloo ]] && LIBS+=" $lib"; done
    fi
    shift
  done
fi
while [[ $# -gt 0 ]]; do
  GIVEN+="$1 "
  case "$1" in
    --nranks) need_value "$@"; NRANKS="$2"; shift 2 ;;
    --ops) need_value "$@"; OPS="$2"; shift 2 ;;
    --libs) need_value "$@"; LIBS="$2"; shift 2 ;;
    -b) need_value "$@"; MINB="$2"; shift 2 ;;
    -e) need_value "$@"; MAXB="$2"; shift 2 ;;
    -f) need_value "$@"; FACTOR="$2"; shift 2 ;;
    --iters) need_value "$@"; ITERS="$2"; shift 2 ;;
    --warmup) need_value "$@"; WARMUP="$2"; shift 2 ;;
    --repeats) need_value "$@"; [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "--repeats needs a positive count"; REPEATS="$2"; shift 2 ;;
    --timeout) need_value "$@"; [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "--timeout needs seconds"; TIMEOUT="$2"; shift 2 ;;
    --build-dir) need_value "$@"; BUILD_DIR="$(realpath -m "$2")"; shift 2 ;;
    --peers-dir) need_value "$@"; PEERS_DIR="$(realpath -m "$2")"; shift 2 ;;
    --results-dir) need_value "$@"; RESULTS_DIR="$(realpath -m "$2")"; shift 2 ;;
    --img-dir) need_value "$@"; IMG_DIR="$(realpath -m "$2")"; shift 2 ;;
    --install-only) INSTALL_ONLY=1; shift ;;
    --no-report) REPORT=0; shift ;;
    --transport) need_value "$@"; TRANSPORT="$2"; shift 2 ;;
    --networks) need_value "$@"; NETWORKS="$2"; shift 2 ;;
    --rates) [[ $# -ge 2 ]] || die "--rates needs a value"; RATES="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --per-cell) die "--per-cell must be the first argument (the rest go to bench/percell.py)" ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

case "$TRANSPORT" in
  shm) ;;
  tcp)
    given() { [[ "$GIVEN" == *" $1 "* ]]; }
    given --nranks || NRANKS="2 4"
    given --warmup || WARMUP=2
    given --timeout || TIMEOUT=300
    given -f || FACTOR=8
    [[ "$QUICK" -eq 1 ]] && ! given --ops && OPS="all_reduce"
    NETWORK_COLUMN=",network"
    KIND=tcp
    for net in $NETWORKS; do
      [[ "$net" == loopback || "$net" =~ ^2x[1-9][0-9]*$ ]] ||
        die "--networks: '$net' is neither loopback nor 2xK (two hosts of K ranks)"
    done ;;
  *) die "--transport: '$TRANSPORT' is neither shm nor tcp" ;;
esac
for p in $NRANKS; do [[ "$p" =~ ^[1-9][0-9]*$ ]] || die "--nranks: '$p' is not a positive integer"; done
for op in $OPS; do
  case "$op" in all_reduce|broadcast|all_gather|reduce_scatter|all_to_all|barrier) ;;
    *) die "--ops: unknown operation '$op'" ;; esac
done
for lib in $LIBS; do
  case "$lib" in meshcomm|openmpi|gloo|torch|torch-meshcomm) ;;
    *) die "--libs: unknown library '$lib'" ;; esac
done
has_lib() { [[ " $LIBS " == *" $1 "* ]]; }

# ---- packages ----

# What the chosen libraries and the report need, and no more.
wanted_packages() {
  has_lib openmpi && echo openmpi-bin libopenmpi-dev
  has_lib gloo && echo libgloo-dev
  has_lib torch && echo python3-torch
  [[ "$REPORT" -eq 1 || "$INSTALL_ONLY" -eq 1 ]] && echo python3-matplotlib
  return 0
}

ensure_packages() {
  local missing=() p
  for p in $(wanted_packages); do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  local sudo=()
  if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null || die "missing packages ${missing[*]}; run as root or install sudo"
    sudo=(sudo)
  fi
  say "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update >&2
  "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2
}

ensure_packages
[[ "$INSTALL_ONLY" -eq 1 ]] && exit 0
# The per-cell method needs no more than the report's plotting.
[[ "$PER_CELL" -eq 1 ]] && exec "$PY" "$ROOT/bench/percell.py" "${PER_CELL_ARGS[@]}"

MESHCOMM_BENCH="$BUILD_DIR/bin/meshcomm-bench"
if has_lib meshcomm && [[ ! -x "$MESHCOMM_BENCH" ]]; then
  die "$MESHCOMM_BENCH not found: build meshcomm first (make build), or pass --build-dir"
fi

VENV_PY="$BUILD_DIR/venv/bin/python"
if has_lib torch-meshcomm; then
  [[ -x "$VENV_PY" ]] || bash "$ROOT/scripts/make-venv.sh" "$PY" "$BUILD_DIR/venv" >&2
  [[ -d "$BUILD_DIR/python/meshcomm" ]] || die "$BUILD_DIR/python/meshcomm not found: make build first"
fi
TORCH2=(env PYTHONPATH="$BUILD_DIR/python" "$VENV_PY")

# ---- peer programs (rebuilt when their source or a header is newer) ----

SRC="$ROOT/bench/peers"
mkdir -p "$PEERS_DIR"
source "$SRC/stale.sh"
build_if_stale() {  # output source command...
  local out="$1" src="$2"
  shift 2
  if stale "$out" "$src"; then
    say "building $(basename "$out")"
    "$@"
  fi
}
build_if_stale "$PEERS_DIR/memcpy_bench" "$SRC/memcpy_bench.c" \
  gcc -O2 -std=c11 -Wall -Wextra -o "$PEERS_DIR/memcpy_bench" "$SRC/memcpy_bench.c"
if has_lib openmpi; then
  build_if_stale "$PEERS_DIR/mpi_bench" "$SRC/mpi_bench.c" \
    mpicc -O2 -std=c11 -Wall -Wextra -o "$PEERS_DIR/mpi_bench" "$SRC/mpi_bench.c"
fi
if has_lib gloo; then
  build_if_stale "$PEERS_DIR/gloo_bench" "$SRC/gloo_bench.cc" \
    g++ -O2 -std=c++20 -Wall -Wextra -o "$PEERS_DIR/gloo_bench" "$SRC/gloo_bench.cc" -lgloo -pthread
fi

# ---- the run ----

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$RESULTS_DIR"
CSV="$RESULTS_DIR/compare${KIND:+-$KIND}-$STAMP.csv"
LOGS="$RESULTS_DIR/compare${KIND:+-$KIND}-$STAMP.logs"
mkdir -p "$LOGS"
echo "lib,op,nranks,bytes,time_us,algbw_gbps,busbw_gbps,repeat${NETWORK_COLUMN:-}" > "$CSV"
FAILURES=()

SWEEP=(-b "$MINB" -e "$MAXB" -f "$FACTOR")
[[ -n "$ITERS" ]] && SWEEP+=(--iters "$ITERS")
[[ -n "$WARMUP" ]] && SWEEP+=(--warmup "$WARMUP")

# run_one LIB OP P command...: runs one sweep under `timeout`, appends its
# rows to the CSV with the library's name and the repeat (REP), and records
# a failure without stopping the run. The rows that finished before a
# failure are kept.
run_one() {
  local lib="$1" op="$2" p="$3"
  shift 3
  local log="$LOGS/$lib-$op-$p${RUN_TAG:+-$RUN_TAG}-$REP"
  say "[$REP/$REPEATS] $lib $op -n $p${NETWORK:+ ($NETWORK)}"
  local rc=0
  timeout -k 10 "$TIMEOUT" "$@" > "$log.csv" 2> "$log.err" < /dev/null || rc=$?
  # Peers' notes (skipped sizes, unsupported operations) are worth seeing.
  if [[ -s "$log.err" ]]; then sed "s/^/  [$lib] /" "$log.err" | head -n 20 >&2 || true; fi
  local rows
  rows=$(awk -F, -v lib="$lib" -v op="$op" -v rep="$REP" -v net="${NETWORK:-}" \
    'NR > 1 && $1 == op { print lib "," $1 "," $2 "," $3 "," $6 "," $7 "," $8 "," rep (net == "" ? "" : "," net) }' \
    "$log.csv" | tee -a "$CSV" | wc -l) || true
  if [[ "$rc" -ne 0 ]]; then
    local why="exit $rc"
    [[ "$rc" -eq 124 || "$rc" -eq 137 ]] && why="timed out after ${TIMEOUT}s"
    FAILURES+=("$lib $op -n $p${NETWORK:+ ($NETWORK)} (repeat $REP): $why, $rows row(s) kept; see $log.err")
    say "FAILED: ${FAILURES[-1]}"
  fi
}

# The end of a run, one host or over TCP: the rows kept as
# <NAME>-latest.csv, the failures listed, and the report REPORT_SCRIPT makes
# of them unless --no-report.
finish_run() {  # finish_run NAME REPORT_SCRIPT [REPORT_ARGS...]
  local name="$1" report="$2"
  shift 2
  cp "$CSV" "$RESULTS_DIR/$name-latest.csv"
  say "rows: $CSV ($(($(wc -l < "$CSV") - 1)) rows; logs in $LOGS)"
  if [[ ${#FAILURES[@]} -gt 0 ]]; then
    printf '%s\n' "${FAILURES[@]}" > "$LOGS/failures.txt"
    say "${#FAILURES[@]} benchmark(s) failed; their rows are missing:"
    printf '  %s\n' "${FAILURES[@]}" >&2
  fi
  if [[ "$REPORT" -eq 1 ]]; then
    "$PY" "$ROOT/bench/$report" "$CSV" --img-dir "$IMG_DIR" \
      --failures "$LOGS/failures.txt" "$@" | tee "$RESULTS_DIR/$name-$STAMP.md"
  fi
}

# Over TCP, on loopback and across network namespaces: bench/compare_tcp.sh.
[[ "$TRANSPORT" == tcp ]] && source "$ROOT/bench/compare_tcp.sh"

CORES="$(nproc)"
MPIRUN_BASE=(mpirun --bind-to none --mca pml ob1 --mca btl self,vader)
[[ "$(id -u)" -eq 0 ]] && MPIRUN_BASE+=(--allow-run-as-root)

for REP in $(seq "$REPEATS"); do
  say "memcpy reference"
  run_one memcpy memcpy 1 "$PEERS_DIR/memcpy_bench"

  for p in $NRANKS; do
    mpirun_cmd=("${MPIRUN_BASE[@]}" -np "$p")
    [[ "$p" -gt "$CORES" ]] && mpirun_cmd+=(--oversubscribe)
    for op in $OPS; do
      if has_lib meshcomm; then
        run_one meshcomm "$op" "$p" "$MESHCOMM_BENCH" "$op" -n "$p" "${SWEEP[@]}" --csv --time-limit "$TIMEOUT"
      fi
      if has_lib openmpi; then
        run_one openmpi "$op" "$p" "${mpirun_cmd[@]}" "$PEERS_DIR/mpi_bench" "$op" "${SWEEP[@]}"
      fi
      if has_lib gloo; then
        if [[ "$op" == all_reduce ]]; then
          run_one gloo-ring "$op" "$p" "$PEERS_DIR/gloo_bench" "$op" -n "$p" "${SWEEP[@]}" --algorithm ring --time-limit "$TIMEOUT"
          run_one gloo-hd "$op" "$p" "$PEERS_DIR/gloo_bench" "$op" -n "$p" "${SWEEP[@]}" --algorithm hd --time-limit "$TIMEOUT"
        else
          run_one gloo "$op" "$p" "$PEERS_DIR/gloo_bench" "$op" -n "$p" "${SWEEP[@]}" --time-limit "$TIMEOUT"
        fi
      fi
      if has_lib torch; then
        run_one torch-gloo "$op" "$p" "$PY" "$SRC/torch_bench.py" "$op" -n "$p" "${SWEEP[@]}" --time-limit "$TIMEOUT"
      fi
      if has_lib torch-meshcomm; then
        for backend in meshcomm:torch-meshcomm gloo:torch2-gloo meshcomm-api:meshcomm-py; do
          run_one "${backend#*:}" "$op" "$p" "${TORCH2[@]}" "$SRC/torch_bench.py" "$op" -n "$p" \
            "${SWEEP[@]}" --time-limit "$TIMEOUT" --backend "${backend%%:*}"
        done
      fi
    done
  done
done

if has_lib torch-meshcomm; then
  DDP_OUT="$RESULTS_DIR/compare-$STAMP-ddp.md"
  for p in $NRANKS; do
    say "DDP step time, $p ranks: meshcomm vs gloo"
    timeout -k 10 "$TIMEOUT" "${TORCH2[@]}" "$ROOT/bench/torch_ddp_bench.py" -n "$p" \
      | tee -a "$DDP_OUT" >&2 || FAILURES+=("torch_ddp_bench.py -n $p: failed; see $DDP_OUT")
  done
fi

finish_run compare compare_report.py

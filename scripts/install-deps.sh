#!/usr/bin/env bash
# Installs the Debian packages meshcomm needs to build and test, and nothing
# when they are all present (so `make deps` is cheap to run every time).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libgtest-dev libgmock-dev libssl-dev
  python3 python3-dev python3-venv python3-numpy python3-pytest pybind11-dev
  iproute2 procps
  # the launchers tests/launchers/ starts: a one-node Slurm cluster, Open
  # MPI's mpirun and MPICH's mpiexec (they coexist through alternatives)
  slurmctld slurmd slurm-client munge openmpi-bin mpich
)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "meshcomm: installing missing packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "meshcomm: these Debian packages are missing and this user cannot install them:" >&2
    echo "  ${missing[*]}" >&2
    echo "run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Creates (once) the virtual environment that holds what Debian lacks: torch
# 2.x from PyPI, for the torch.distributed backend and torchrun, and
# expecttest, for torch's own test modules. It is made
# from Debian's interpreter with --system-site-packages, so numpy, pytest and
# pybind11 stay Debian's. Usage: make-venv.sh PYTHON VENV_DIR
set -euo pipefail
python=${1:?interpreter}
venv=${2:?venv directory}
torch_version=2.13.0   # the CPU wheel pip finds on local disk; see docs/torch.md

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv --system-site-packages "$venv"
fi
have=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true)
# Debian's python3-torch (1.13) is visible through the system site; only a
# torch installed in the venv itself counts.
if [ "${have%%+*}" != "$torch_version" ] || [ ! -d "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch" ]; then
  echo "meshcomm: installing torch==$torch_version into $venv"
  # pip warns about every configured package index folder it finds empty:
  # noise here, so those lines are dropped (real errors still show).
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==$torch_version" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
fi
# expecttest: torch.testing._internal (torch's own distributed test suite,
# run against meshcomm by tests/torch/torch_suite) imports it; the wheel does
# not depend on it. Installed only when the venv lacks this exact version.
expecttest_version=0.3.0
have=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("expecttest"))' 2>/dev/null || true)
if [ "$have" != "$expecttest_version" ]; then
  echo "meshcomm: installing expecttest==$expecttest_version into $venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "expecttest==$expecttest_version" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
fi

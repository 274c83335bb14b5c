"""Fixtures of the packaging tests: meshcomm's wheel, built from this tree
(or, with MESHCOMM_PACKAGE_FROM=sdist, from an sdist of it) and installed
into a fresh virtual environment, once per run; a per-test deadline.

The venv is made from the pinned interpreter without Debian's site
packages, so nothing of the build tree (build/python) or of the system is
importable from it: torch 2.13.0 comes from the local wheel, numpy from the
package index, as a user's `pip install meshcomm[torch]` would get them.
"""

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("MESHCOMM_BUILD_DIR", ROOT / "build")).resolve()
WORK = BUILD / "packaging"
PYTHON = os.environ.get("MESHCOMM_PYTHON", "/usr/bin/python3")
TORCH = "torch==2.13.0"  # the CPU wheel on local disk (scripts/make-venv.sh)
# A full compile of the library takes minutes on 2 cores.
BUILD_TIMEOUT_S = 1800
INSTALL_TIMEOUT_S = 900
TEST_DEADLINE_S = 300.0
# Where the installed wheel compiles the torch backend's native part
# (python/meshcomm/torch/native_build.py): kept between runs, like the
# wheel's CMake build; its folder's name changes with the wheel's sources.
NATIVE_CACHE = BUILD / "packaging-native-cache"


sys.path.insert(0, str(ROOT / "tests" / "helpers"))  # what every suite shares (ports.py)
from deadline import per_test_deadline  # noqa: E402

_test_deadline = per_test_deadline(TEST_DEADLINE_S)


def run(cmd, timeout, env=None, cwd=None, check=True):
    """Runs cmd, echoing it; a failure shows its whole output."""
    print("+", " ".join(map(str, cmd)), flush=True)
    r = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n"
                             f"--- stdout\n{r.stdout[-20000:]}\n--- stderr\n{r.stderr[-20000:]}")
    return r


@dataclass
class Installed:
    """meshcomm installed from its wheel into a fresh venv."""
    wheel: Path
    venv: Path
    env: dict  # the venv's bin first on PATH, no PYTHONPATH, no job variables

    @property
    def python(self):
        return self.venv / "bin" / "python"

    def bin(self, name):
        return self.venv / "bin" / name

    def site_packages(self):
        out = run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                  60, env=self.env).stdout
        return Path(out.strip())


def clean_env(venv):
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                 "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "MESHCOMM_DUMP_DIR"):
        env.pop(name, None)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["MESHCOMM_TIMEOUT_MS"] = "60000"  # fail fast rather than hang a run
    env["MESHCOMM_CACHE_DIR"] = str(NATIVE_CACHE)
    return env


def _build_wheel(pip_python, env, dist):
    """pip builds the wheel through pyproject.toml (scikit-build-core and
    pybind11 come from the package index into pip's isolated build env)."""
    source = ROOT
    build_dir = []
    if os.environ.get("MESHCOMM_PACKAGE_FROM", "tree") == "sdist":
        run([pip_python, "-m", "pip", "install", "-q", "build"], INSTALL_TIMEOUT_S, env=env)
        run([pip_python, "-m", "build", "--sdist", "--outdir", dist, ROOT], BUILD_TIMEOUT_S, env=env)
        (source,) = dist.glob("meshcomm-*.tar.gz")
    else:
        # The tree's wheel keeps its CMake build between runs (incremental).
        build_dir = [f"--config-settings=build-dir={BUILD / 'wheel-build'}"]
    run([pip_python, "-m", "pip", "wheel", "--no-deps", "-w", dist, *build_dir, source],
        BUILD_TIMEOUT_S, env=env)
    (wheel,) = dist.glob("meshcomm-*.whl")
    return wheel


@pytest.fixture(scope="session")
def installed():
    if shutil.which(PYTHON) is None:
        pytest.fail(f"{PYTHON} not found (make deps installs Debian's python3)")
    shutil.rmtree(WORK, ignore_errors=True)
    dist = WORK / "dist"
    dist.mkdir(parents=True)
    venv = WORK / "venv"
    run([PYTHON, "-m", "venv", venv], 300)
    env = clean_env(venv)
    wheel = _build_wheel(venv / "bin" / "python", env, dist)
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q"]
    run([*pip, TORCH], INSTALL_TIMEOUT_S, env=env)
    run([*pip, f"{wheel}[torch]"], INSTALL_TIMEOUT_S, env=env)
    return Installed(wheel=wheel, venv=venv, env=env)


# The one-node Slurm cluster of the launcher tests (tests/launchers).
sys.path.insert(0, str(ROOT / "tests" / "launchers"))
from slurm_cluster import started_cluster  # noqa: E402

slurm = pytest.fixture(scope="session", name="slurm")(started_cluster)

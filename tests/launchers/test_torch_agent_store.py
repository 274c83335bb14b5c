"""Rendezvous through a torch store, as under torchrun's agent
(TORCHELASTIC_USE_AGENT_STORE=True), without torchrun: a torch TCPStore
hosted by each torch there is (torch 2 from build/venv, Debian's 1.13),
meshcomm ranks that do not import torch, and what they leave in it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import meshcomm

PACKAGE_DIR = Path(meshcomm.__file__).resolve().parents[1]
VENV_PYTHON = Path(PACKAGE_DIR).parent / "venv" / "bin" / "python"
TORCHES = {"torch 2": str(VENV_PYTHON), "torch 1.13": "/usr/bin/python3"}

# Hosts a torch TCPStore on a free port, prints the port, then on each line
# of input prints the value of that key.
STORE = """\
import sys
from datetime import timedelta
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, 1, True, timedelta(seconds=30))
print(store.port, flush=True)
for line in sys.stdin:
    key = line.strip()
    print(store.get(key).decode(), flush=True)
"""

JOB = """\
import meshcomm, numpy as np, sys
meshcomm.init_process_group()
x = np.ones(8)
meshcomm.all_reduce(x)
assert "torch" not in sys.modules
print("sum", int(x[0]))
meshcomm.destroy_process_group()
"""


def _has_torch(python):
    return os.path.exists(python) and subprocess.run(
        [python, "-c", "import torch.distributed"], capture_output=True,
        timeout=120).returncode == 0


@pytest.fixture(params=sorted(TORCHES))
def torch_store(request):
    python = TORCHES[request.param]
    if not _has_torch(python):
        pytest.skip(f"{request.param} is not installed")
    proc = subprocess.Popen([python, "-c", STORE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        yield proc, port
    finally:
        proc.kill()
        proc.wait()


def _env(rank, port, run_id, timeout_ms=30000):
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR), RANK=str(rank), WORLD_SIZE="3",
               LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RUN_ID=run_id,
               TORCHELASTIC_RESTART_COUNT="2", MESHCOMM_TIMEOUT_MS=str(timeout_ms))
    return env


def test_ranks_meet_through_the_torch_store(torch_store, tmp_path):
    store, port = torch_store
    procs = [subprocess.Popen(["/usr/bin/python3", "-c", JOB], env=_env(r, port, "run7"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert out.strip() == "sum 3", out
    # What rank 0 published: a key naming the run and the restart.
    store.stdin.write("meshcomm/store/run7/2\n")
    store.stdin.flush()
    host, _, published_port = store.stdout.readline().strip().rpartition(":")
    assert host == "127.0.0.1" and 0 < int(published_port) < 65536


def test_rank_0_missing_is_a_timeout_naming_the_key(torch_store):
    _, port = torch_store
    r = subprocess.run(["/usr/bin/python3", "-c", JOB], env=_env(1, port, "lonely", 1500),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "DistTimeoutError" in r.stderr or "Timeout" in r.stderr, r.stderr
    assert "rank 0 did not publish meshcomm's store address under meshcomm/store/lonely/2" \
        in r.stderr, r.stderr

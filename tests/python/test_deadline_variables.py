"""Every documented deadline variable bounds every path that has no explicit
timeout: MESHCOMM_TIMEOUT_MS for joining (test_groups.py,
test_join_errors.py), for operations on the world group and on a group made
without a timeout; MESHCOMM_SHUTDOWN_WAIT_MS for the store host leaving."""

import os
import subprocess
import sys
import time

import pytest

from mcutil import SHM_OFF
from ports import free_port

# Run once: deadlines do not depend on the transport.
pytestmark = pytest.mark.skipif(SHM_OFF, reason="deadlines do not depend on the transport; run once")

# Rank 1 joins, runs `rank1`, and then does nothing until rank 0 is done;
# rank 0 runs `body` and prints what happened, with the time it took.
_SCRIPT = """
import os, sys, time
import numpy as np
import meshcomm
rank = int(os.environ["RANK"])
meshcomm.init_process_group()
if rank == 1:
{rank1}
    done = os.environ["DONE_FILE"]
    while not os.path.exists(done):
        time.sleep(0.05)
    os._exit(0)
start = time.monotonic()
try:
{body}
    print("no error", flush=True)
except meshcomm.DistError as e:
    print(type(e).__name__ + ":", e, flush=True)
print("elapsed", time.monotonic() - start, flush=True)
open(os.environ["DONE_FILE"], "w").close()
os._exit(0)
"""


def _indent(code):
    return "\n".join("    " + line for line in code.splitlines())


def _run(body, tmp_path, rank1="pass", **env_vars):
    port = free_port()
    done = tmp_path / "done"
    script = _SCRIPT.format(body=_indent(body), rank1=_indent(rank1))
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), DONE_FILE=str(done), **env_vars)
        procs.append(subprocess.Popen([sys.executable, "-c", script], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outs = [p.communicate(timeout=90)[0] for p in procs]
    out = outs[0]
    elapsed = float(out.split("elapsed")[-1]) if "elapsed" in out else None
    return out, elapsed


def test_timeout_variable_bounds_operations_on_the_world_group(tmp_path):
    out, elapsed = _run("meshcomm.all_reduce(np.ones(4))", tmp_path, MESHCOMM_TIMEOUT_MS="2000")
    assert "DistTimeoutError:" in out, out
    assert elapsed is not None and 1.5 < elapsed < 15, out


def test_timeout_variable_bounds_operations_on_a_new_group(tmp_path):
    # Both create the group; only rank 0 calls the barrier on it.
    out, elapsed = _run("meshcomm.barrier(group=meshcomm.new_group([0, 1]))", tmp_path,
                        rank1="meshcomm.new_group([0, 1])", MESHCOMM_TIMEOUT_MS="2000")
    assert "DistTimeoutError:" in out, out
    assert elapsed is not None and 1.5 < elapsed < 15, out


def test_shutdown_wait_variable_bounds_the_store_host_leaving(tmp_path):
    # Rank 1 never leaves until rank 0 is gone: rank 0 keeps the store up
    # for MESHCOMM_SHUTDOWN_WAIT_MS, then goes.
    body = "meshcomm.destroy_process_group()"
    out, elapsed = _run(body, tmp_path, MESHCOMM_SHUTDOWN_WAIT_MS="1500", MESHCOMM_TIMEOUT_MS="60000")
    assert "no error" in out, out
    assert elapsed is not None and 1.2 < elapsed < 15, out

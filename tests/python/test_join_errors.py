"""Joining a job that cannot complete: every rank that came says why, not
only the rank hosting the store."""

import os
import signal
import subprocess
import sys
import time

import pytest

from mcutil import SHM_OFF
from ports import free_port

# Run once: joining does not depend on the transport.
pytestmark = pytest.mark.skipif(SHM_OFF, reason="joining does not depend on the transport; run once")

_JOIN = ("import meshcomm\n"
         "try:\n"
         "    meshcomm.init_process_group()\n"
         "except meshcomm.DistError as e:\n"
         "    print(type(e).__name__ + ':', e, flush=True)\n")


def _start(rank, size, port, timeout_ms):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), MESHCOMM_TIMEOUT_MS=str(timeout_ms))
    return subprocess.Popen([sys.executable, "-c", _JOIN], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_every_rank_names_the_rank_that_never_came():
    # Ranks 0 and 1 of 3 start; rank 2 never does. Rank 0 hosts the store and
    # gives up first; rank 1 must not report a lost store connection.
    port = free_port()
    start = time.monotonic()
    procs = [_start(r, 3, port, 3000) for r in (0, 1)]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    elapsed = time.monotonic() - start
    for rank, out in zip((0, 1), outs):
        assert "DistTimeoutError:" in out, f"rank {rank}: {out}"
        assert "1 of 3 ranks did not arrive" in out and "missing: 2" in out, f"rank {rank}: {out}"
        assert "lost the connection" not in out, f"rank {rank}: {out}"
    assert elapsed < 20, f"took {elapsed:.1f} s with MESHCOMM_TIMEOUT_MS=3000"


def test_a_rank_names_the_store_host_when_it_is_gone():
    # Ranks 0 and 1 of 3 wait for rank 2; rank 0, the store host, is killed.
    port = free_port()
    host = _start(0, 3, port, 60000)
    time.sleep(1.0)
    other = _start(1, 3, port, 60000)
    time.sleep(2.0)  # both are waiting for rank 2 now
    killed = time.monotonic()
    host.send_signal(signal.SIGKILL)
    host.wait(timeout=30)
    out = other.communicate(timeout=60)[0]
    elapsed = time.monotonic() - killed
    assert "DistStoreError:" in out and "the store host (rank 0) is gone" in out, out
    assert "2 of 3 ranks had arrived" in out, out
    assert elapsed < 10, f"rank 1 noticed after {elapsed:.1f} s"

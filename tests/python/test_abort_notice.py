"""One failure rule on every transport (docs/fault-tolerance.md): a call
issued after a group's abort notice has reached a rank raises
DistAbortedError there, over TCP as on shared memory.

Rank 0 aborts the world group while it and rank 1 are inside an all_reduce
of 4 floats; rank 2, which has not joined that call, waits until the notice
has observably reached it (group_error() is no longer None), then makes the
same call. Waiting matters: a call made before the notice arrives may find
every byte it needs already delivered over TCP and succeed, and then either
outcome is correct.
"""

import threading
import time

import numpy as np
import pytest

import meshcomm
import mcutil

LATE_RANK = 2
ABORT_AFTER_S = 0.3  # lets ranks 0 and 1 settle into the call first
NOTICE_BOUND_S = 20.0  # how long rank 2 waits for the notice at most


def _late_call_worker(rank, nprocs, port):
    mcutil.init(rank, nprocs, port)
    x = np.ones(4, dtype=np.float32)
    meshcomm.all_reduce(x)  # every connection the call needs is up
    result = {}
    if rank == LATE_RANK:
        until = time.monotonic() + NOTICE_BOUND_S
        while meshcomm.group_error() is None and time.monotonic() < until:
            time.sleep(0.005)
        result["notice"] = type(meshcomm.group_error()).__name__
    elif rank == 0:
        threading.Timer(ABORT_AFTER_S, meshcomm.abort).start()
    try:
        meshcomm.all_reduce(np.ones(4, dtype=np.float32))
        result["call"] = None
    except meshcomm.DistError as e:
        result["call"], result["message"] = type(e).__name__, str(e)
    meshcomm.destroy_process_group()
    return result


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_call_after_the_abort_notice_raises_aborted(transport, spawn_workers, free_port,
                                                       monkeypatch):
    if mcutil.SHM_OFF:
        pytest.skip("runs in the shared-memory pass, tcp included")
    monkeypatch.setenv("MESHCOMM_SHM", "0" if transport == "tcp" else "1")
    workers = spawn_workers(_late_call_worker, 3, (free_port,), timeout=60)
    outcomes = workers.join()
    assert all(o.ok for o in outcomes), [o.describe() for o in outcomes]
    assert outcomes[LATE_RANK].result["notice"] == "DistAbortedError", outcomes[LATE_RANK].result
    for o in outcomes:
        assert o.result["call"] == "DistAbortedError", (o.rank, o.result)
        assert "world rank 0 aborted group" in o.result["message"], (o.rank, o.result)

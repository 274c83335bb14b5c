"""Point-to-point: send/recv, isend/irecv with tags, both modes, dropped
handles, batch_isend_irecv rings on the world and on a sub-group with
global peer ranks.
"""

import gc

import numpy as np
import pytest

import meshcomm
from meshcomm import P2POp
from mcutil import NUMPY_DTYPES, as_float, expect, init, values


def _pairs(rank, n):
    if rank == 0:
        for i, dtype in enumerate(list(NUMPY_DTYPES) + ["bfloat16"]):
            meshcomm.send(values(dtype, (3, 2), i % 2 + 1), 1)
        # Tags: sent in one order, received in the other.
        h1 = meshcomm.isend(np.full(4, 1.0), 1, tag=1)
        h2 = meshcomm.isend(np.full(4, 2.0), 1, tag=2)
        assert h2.wait() and h1.wait()
        # A handle dropped before completion keeps its buffer alive.
        meshcomm.isend(np.arange(1000, dtype=np.int64), dst=1)
        gc.collect()
        meshcomm.send(np.full(2, 5.0), 1)
        meshcomm.send(np.full(2, 6.0), 1)
        x = np.zeros(3)
        assert meshcomm.recv(x, 1) == 0 and (x == 7.0).all()
    elif rank == 1:
        for i, dtype in enumerate(list(NUMPY_DTYPES) + ["bfloat16"]):
            got = values(dtype, (3, 2), 0)
            assert meshcomm.recv(got, src=0) == 0
            assert (as_float(got) == i % 2 + 1).all(), dtype
        b, a = np.zeros(4), np.zeros(4)
        hb = meshcomm.irecv(b, 0, tag=2)
        ha = meshcomm.irecv(a, 0, tag=1)
        assert ha.wait() and hb.wait()
        assert (a == 1.0).all() and (b == 2.0).all()
        big = np.zeros(1000, np.int64)
        meshcomm.recv(big, 0)
        assert (big == np.arange(1000)).all()
        meshcomm.set_comm_ops_inplace(False, ["recv", "irecv"])
        template = np.zeros(2)
        res = meshcomm.recv(template, 0)
        assert (res == 5.0).all() and (template == 0).all()
        res, h = meshcomm.irecv(template, 0)
        assert h.wait() and (res == 6.0).all()
        meshcomm.set_comm_ops_inplace(True)
        meshcomm.send(np.full(3, 7.0), 0)
    me = meshcomm.get_rank()
    expect(ValueError, meshcomm.send, np.ones(2), me)
    expect(ValueError, meshcomm.isend, np.ones(2), me)
    expect(ValueError, meshcomm.recv, np.ones(2), me)
    expect(ValueError, meshcomm.recv, np.ones(2), n + 1)


def _rings(rank, n):
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    for op_send, op_recv in (("isend", "irecv"), (meshcomm.isend, meshcomm.irecv)):
        got = np.array(0.0, np.float32)
        ops = [P2POp(op_send, np.array(rank + 1.0, np.float32), nxt),
               P2POp(op_recv, got, prv)]
        handles = meshcomm.batch_isend_irecv(ops)
        assert len(handles) == 1 and handles[0].wait()
        assert got == prv + 1.0
    # Receives listed before sends cannot deadlock.
    got = [np.zeros(2) for _ in range(2)]
    ops = [P2POp("irecv", got[0], prv), P2POp("irecv", got[1], nxt),
           P2POp("isend", np.full(2, rank * 1.0), nxt), P2POp("isend", np.full(2, rank * 1.0), prv)]
    meshcomm.batch_isend_irecv(ops)[0].wait()
    assert (got[0] == prv).all() and (got[1] == nxt).all()
    # A sub-group of the first and last ranks, peers given as world ranks.
    members = [0, n - 1]
    if rank in members:
        g = meshcomm.new_group(members)
        other = members[1 - members.index(rank)]
        got = np.zeros(3, np.int32)
        ops = [P2POp("isend", np.full(3, rank, np.int32), other, group=g),
               P2POp("irecv", got, other, group=g)]
        meshcomm.batch_isend_irecv(ops)[0].wait()
        assert (got == other).all()
        if rank == 0:
            meshcomm.send(np.full(2, 9.0), n - 1, group=g)
        else:
            x = np.zeros(2)
            meshcomm.recv(x, 0, group=g)
            assert (x == 9.0).all()


def _p2p_worker(rank, n, port):
    init(rank, n, port)
    if n >= 2:
        _pairs(rank, n)
        _rings(rank, n)
    meshcomm.destroy_process_group()
    return "ok"


@pytest.mark.parametrize("nprocs", [2, 3])
def test_p2p(run_workers, free_port, nprocs):
    assert run_workers(_p2p_worker, nprocs, (free_port,), timeout=90) == ["ok"] * nprocs

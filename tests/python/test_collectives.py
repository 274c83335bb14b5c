"""Every collective, run by 1 to 4 processes: every dtype, every op, sync and
async, in place and not, numpy and other buffer kinds (torch when it is
installed), sub-groups with global-rank roots; plus deadlines and Ctrl-C.

Each job runs many checks in one set of processes, since starting processes
dominates the cost; a failing assert reports its rank's traceback.
"""

import array
import os
import signal
import threading
import time
from datetime import timedelta

import numpy as np
import pytest

import meshcomm
from meshcomm import CommHandle, ReduceOp
from mcutil import (HAVE_TORCH, NUMPY_DTYPES, SHM_OFF, DLPackOnly, as_float, expect, init,
                    torch_or_none, values)


def _run(fn, *args, async_op, **kwargs):
    """Call a collective sync or async and wait; returns its non-handle result."""
    out = fn(*args, async_op=async_op, **kwargs)
    result = None
    if isinstance(out, tuple):
        result, out = out
    if async_op:
        assert isinstance(out, CommHandle)
        assert out.wait() is True and out.is_completed() and out.exception() is None
    else:
        assert out is None
    return result


def _all_reduce(rank, n):
    tri = n * (n + 1) // 2
    for dtype in list(NUMPY_DTYPES) + ["bfloat16"]:
        x = values(dtype, (2, 3), rank + 1)
        meshcomm.all_reduce(x)
        want = 1.0 if dtype == "bool" else tri
        assert (as_float(x) == want).all(), (dtype, x)
    for dtype in ("float64", "int32", "float16"):
        for op, want in (("prod", np.prod(np.arange(1, n + 1))), (ReduceOp.MIN, 1),
                         ("max", n), (ReduceOp.SUM, tri)):
            for async_op in (False, True):
                x = values(dtype, (5,), rank + 1)
                _run(meshcomm.all_reduce, x, op=op, async_op=async_op)
                assert (as_float(x) == want).all(), (dtype, op, x)
    c = np.full(3, rank + 1 + 1j, np.complex64)
    meshcomm.all_reduce(c)
    assert (c == tri + n * 1j).all()
    expect(ValueError, meshcomm.all_reduce, c, op="max")
    b = np.array([rank == 0, True, False])
    meshcomm.all_reduce(b, op="prod")
    assert list(b) == [n == 1, True, False]

    # Out of place: the input is left alone, the result is new.
    meshcomm.set_comm_ops_inplace(False, ["all_reduce"])
    for async_op in (False, True):
        x = np.full((2, 2), rank + 1, np.float32)
        res = _run(meshcomm.all_reduce, x, async_op=async_op)
        assert (x == rank + 1).all() and res.shape == (2, 2) and (res == tri).all()
    res = _run(meshcomm.all_reduce, DLPackOnly(np.full(3, rank + 1.0)), async_op=False)
    assert isinstance(res, np.ndarray) and (res == tri).all()
    bf = meshcomm.bfloat16.from_float32(np.full(3, rank + 1.0, np.float32))
    res = _run(meshcomm.all_reduce, bf, async_op=False)
    assert isinstance(res, meshcomm.bfloat16) and (res.to_float32() == tri).all()
    meshcomm.set_comm_ops_inplace(True)

    # Buffer-protocol objects work in place.
    ba = bytearray([rank + 1] * 4)
    meshcomm.all_reduce(ba)
    assert list(ba) == [tri] * 4
    arr = array.array("d", [rank + 1.0] * 3)
    meshcomm.all_reduce(memoryview(arr))
    assert list(arr) == [tri] * 3
    expect(ValueError, meshcomm.all_reduce, DLPackOnly(np.ones(3)))  # read-only export
    ro = np.ones(3)
    ro.flags.writeable = False
    expect(ValueError, meshcomm.all_reduce, ro)
    expect(ValueError, meshcomm.all_reduce, np.ones((4, 4))[:, ::2])
    expect(TypeError, meshcomm.all_reduce, np.ones(3, ">f8"))
    expect(TypeError, meshcomm.all_reduce, np.array(["a"]))


def _broadcast_reduce(rank, n):
    tri = n * (n + 1) // 2
    for root in range(n):
        for async_op in (False, True):
            x = np.arange(6, dtype=np.int64).reshape(2, 3) * (rank == root) + root
            _run(meshcomm.broadcast, x, root, async_op=async_op)
            assert (x.ravel() == np.arange(6) + root).all()
            y = np.full(4, rank + 1.0, np.float32)
            _run(meshcomm.reduce, y, root, async_op=async_op)
            assert (y == (tri if rank == root else rank + 1)).all(), (root, y)
    # Non-roots' reduce input may be read-only; the root's broadcast too.
    y = np.full(2, rank + 1.0)
    y.flags.writeable = rank == n - 1
    meshcomm.reduce(y, n - 1, op="max")
    assert (y == (n if rank == n - 1 else rank + 1)).all()
    z = np.full(3, 4.0) if rank == 0 else np.zeros(3)
    z.flags.writeable = rank != 0
    meshcomm.broadcast(z, 0)
    assert (z == 4.0).all()


def _gathers(rank, n):
    for async_op in (False, True):
        out = np.zeros((2 * n, 3), np.float32)
        _run(meshcomm.all_gather_into_tensor, out, np.full((2, 3), rank, np.float32),
             async_op=async_op)
        assert (out == np.repeat(np.arange(n), 2)[:, None]).all()
        outs = [np.zeros(3, np.int16) for _ in range(n)]
        _run(meshcomm.all_gather, outs, np.full(3, rank, np.int16), async_op=async_op)
        assert [int(o[0]) for o in outs] == list(range(n))
        rows = n * (n + 1) // 2
        out = np.zeros((rows, 2), np.float64)
        _run(meshcomm.all_gather_into_tensor_uneven, out, np.full((rank + 1, 2), rank, float),
             [r + 1 for r in range(n)], async_op=async_op)
        assert list(out[:, 0]) == [r for r in range(n) for _ in range(r + 1)]
    out = np.zeros((2 * n, 2))
    meshcomm.all_gather_into_tensor_uneven(out, np.full((2, 2), rank + 0.5))
    assert list(out[::2, 0]) == [r + 0.5 for r in range(n)]
    meshcomm.set_comm_ops_inplace(False, ["all_gather_into_tensor"])
    res = _run(meshcomm.all_gather_into_tensor, None, np.full((1, 2), rank), async_op=True)
    assert res.shape == (n, 2) and list(res[:, 1]) == list(range(n))
    res = _run(meshcomm.all_gather_into_tensor, None, np.array(rank * 1.0), async_op=False)
    assert res.shape == (n,) and list(res) == list(range(n))
    meshcomm.set_comm_ops_inplace(True)

    root = n - 1
    for async_op in (False, True):
        out = np.zeros((2 * n, 2), np.int32)
        _run(meshcomm.gather_into_tensor, out, np.full((2, 2), rank + 1, np.int32), root,
             async_op=async_op)
        want = np.repeat(np.arange(1, n + 1), 2)[:, None] if rank == root else 0
        assert (out == want).all()
        outs = [np.zeros(2) for _ in range(n)] if rank == root else []
        _run(meshcomm.gather, np.full(2, rank * 2.0), outs, root, async_op=async_op)
        if rank == root:
            assert [o[0] for o in outs] == [2.0 * r for r in range(n)]
        out = np.zeros((2, 3))
        src = np.arange(6 * n, dtype=float).reshape(2 * n, 3) if rank == 0 else np.zeros(1)
        _run(meshcomm.scatter_tensor, out, src, 0, async_op=async_op)
        assert (out.ravel() == np.arange(6) + 6 * rank).all()
        out = np.zeros(4, np.uint8)
        lst = [np.full(4, 10 + r, np.uint8) for r in range(n)] if rank == root else []
        _run(meshcomm.scatter, out, lst, root, async_op=async_op)
        assert (out == 10 + rank).all()


def _reduce_scatters(rank, n):
    tri = n * (n + 1) // 2
    ramp = np.arange(1, 2 * n + 1, dtype=np.float32)[:, None]
    for async_op in (False, True):
        out = np.zeros((2, 3), np.float32)
        inp = ((rank + 1) * ramp * np.ones((1, 3))).astype(np.float32)
        _run(meshcomm.reduce_scatter_tensor, out, inp, async_op=async_op)
        assert (out == tri * ramp[2 * rank:2 * rank + 2]).all()
        out = np.zeros(2, np.int64)
        ins = [np.full(2, (rank + 1) * (j + 1), np.int64) for j in range(n)]
        _run(meshcomm.reduce_scatter, out, ins, op="max", async_op=async_op)
        assert (out == n * (rank + 1)).all()
        splits = [r + 1 for r in range(n)]
        out = np.zeros((rank + 1, 2))
        inp = np.repeat(np.arange(1, n + 1, dtype=float), splits)[:, None] * np.ones((1, 2)) * (
            rank + 1)
        _run(meshcomm.reduce_scatter_tensor_uneven, out, inp, splits, op="min", async_op=async_op)
        assert (out == rank + 1).all()
    out = np.zeros(2)
    meshcomm.reduce_scatter_tensor_uneven(out, np.ones(2 * n))
    assert (out == n).all()
    meshcomm.set_comm_ops_inplace(False, ["reduce_scatter_tensor"])
    res = _run(meshcomm.reduce_scatter_tensor, None, np.ones((n, 4), np.float16), async_op=False)
    assert res.shape == (1, 4) and res.dtype == np.float16 and (res == n).all()
    meshcomm.set_comm_ops_inplace(True)
    if n > 1:
        expect(ValueError, meshcomm.reduce_scatter_tensor, np.zeros(1), np.ones(n + 1))


def _all_to_alls(rank, n):
    for async_op in (False, True):
        ins = [np.full(rank + 1 + j, 100.0 * rank + j, np.float32) for j in range(n)]
        outs = [np.zeros(j + 1 + rank, np.float32) for j in range(n)]
        _run(meshcomm.all_to_all, outs, ins, async_op=async_op)
        assert all((outs[j] == 100.0 * j + rank).all() for j in range(n))
        inp = np.repeat(10.0 * rank + np.arange(n), 2)[:, None] * np.ones((1, 3))
        out = np.zeros((2 * n, 3))
        _run(meshcomm.all_to_all_single, out, inp, async_op=async_op)
        assert (out[:, 0] == np.repeat(10.0 * np.arange(n) + rank, 2)).all()
        send = [rank + j + 1 for j in range(n)]
        inp = np.repeat(10.0 * rank + np.arange(n), send).astype(np.int64)
        out = np.zeros(sum(send), np.int64)
        _run(meshcomm.all_to_all_single, out, inp, send, send, async_op=async_op)
        assert (out == np.repeat(10 * np.arange(n) + rank, send)).all()
    meshcomm.set_comm_ops_inplace(False, ["all_to_all", "all_to_all_single"])
    ins = [np.full((2, j + 1), rank, np.int32) for j in range(n)]
    res = _run(meshcomm.all_to_all, [(2, rank + 1)] * n, ins, async_op=True)
    assert isinstance(res, tuple) and all((r == j).all() and r.shape == (2, rank + 1)
                                          for j, r in enumerate(res))
    send = [rank + j + 1 for j in range(n)]
    inp = np.repeat(10.0 * rank + np.arange(n), send)[:, None] * np.ones((1, 2))
    res = _run(meshcomm.all_to_all_single, (0, 2), inp, send, send, async_op=False)
    assert res.shape == (sum(send), 2) and (res[:, 1] == np.repeat(10.0 * np.arange(n) + rank,
                                                                   send)).all()
    meshcomm.set_comm_ops_inplace(True)
    # all_to_all_v_c: M[i*n+j] rows from i to j; spare rows stay untouched.
    m = [i + j + 1 for i in range(n) for j in range(n)]
    send = [rank + j + 1 for j in range(n)]
    inp = np.concatenate([np.repeat(10.0 * rank + np.arange(n), send), [-1.0]])
    out = np.full(sum(i + rank + 1 for i in range(n)) + 2, -5.0)
    meshcomm.all_to_all_v_c(out, inp, m)
    assert (out[:-2] == np.repeat(10.0 * np.arange(n) + rank,
                                  [i + rank + 1 for i in range(n)])).all()
    assert (out[-2:] == -5.0).all()


def _sub_group(rank, n):
    members = [0, n - 1]
    if n < 2 or rank not in members:
        return
    g = meshcomm.new_group(members)
    last = n - 1
    x = np.full(3, float(rank == last) * 7.0)
    meshcomm.broadcast(x, last, group=g)  # src is a world rank
    assert (x == 7.0).all()
    y = np.full(2, rank + 1.0)
    meshcomm.reduce(y, last, group=g)
    assert (y == (n + 1.0 if rank == last else 1.0)).all()
    outs = [np.zeros(1) for _ in range(2)] if rank == 0 else []
    meshcomm.gather(np.array([rank * 1.0]), outs, dst=0, group=g)
    if rank == 0:
        assert [o[0] for o in outs] == [0.0, last * 1.0]
    out = np.zeros(2)
    meshcomm.all_to_all_single(out, np.array([rank * 10.0, rank * 10.0 + 1]), group=g)
    me = members.index(rank)
    assert list(out) == [me, last * 10.0 + me]
    if n > 2:
        expect(ValueError, meshcomm.broadcast, x, 1, group=g)  # world rank 1 is not a member
    meshcomm.barrier(group=g)
    return g


def _torch_checks(rank, n):
    torch = torch_or_none()
    if torch is None:
        return "skipped"
    tri = n * (n + 1) // 2
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.float16):
        t = torch.full((2, 3), rank + 1, dtype=dtype)
        meshcomm.all_reduce(t)
        assert (t.float() == tri).all()
    meshcomm.set_comm_ops_inplace(False, ["all_reduce", "all_gather_into_tensor"])
    t = torch.full((3,), rank + 1.0)
    res, _ = meshcomm.all_reduce(t)
    assert isinstance(res, torch.Tensor) and (res == tri).all() and (t == rank + 1).all()
    res, _ = meshcomm.all_gather_into_tensor(None, torch.full((1, 2), float(rank)))
    assert isinstance(res, torch.Tensor) and tuple(res.shape) == (n, 2)
    meshcomm.set_comm_ops_inplace(True)
    t = torch.arange(4.0) * (rank == 0)
    meshcomm.broadcast(t, 0)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    expect(ValueError, meshcomm.all_reduce, torch.ones(4, 4)[:, ::2])
    return "ran"


def _collectives_worker(rank, n, port, with_torch=False):
    init(rank, n, port)
    for section in (_all_reduce, _broadcast_reduce, _gathers, _reduce_scatters, _all_to_alls):
        section(rank, n)
    g = _sub_group(rank, n)
    # Destroying a group is not collective: only once every member is done
    # with it (past this world barrier) may one of them destroy it.
    meshcomm.barrier()
    if g:
        meshcomm.destroy_process_group(g)
    # Importing torch takes seconds per process: one job is enough.
    torch_state = _torch_checks(rank, n) if with_torch else "skipped"
    h = meshcomm.barrier(async_op=True)
    assert h.wait(timedelta(seconds=30)) and "barrier" in repr(h)
    meshcomm.destroy_process_group()
    return torch_state


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_collectives(run_workers, free_port, nprocs):
    states = run_workers(_collectives_worker, nprocs, (free_port,), timeout=150)
    assert set(states) == {"skipped"}


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
def test_torch_was_exercised(run_workers, free_port):
    states = run_workers(_collectives_worker, 2, (free_port, True), timeout=150)
    assert states == ["ran"] * 2


def _timeout_worker(rank, n, port):
    init(rank, n, port, timeout=timedelta(seconds=3))
    if rank == 1:
        time.sleep(5)  # never joins the all_reduce
        return "slept"
    # Waiting releases the GIL: another thread keeps running meanwhile.
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.01)

    ticker = threading.Thread(target=tick)
    ticker.start()
    start = time.monotonic()
    h = meshcomm.all_reduce(np.ones(4), async_op=True)
    assert h.wait(timedelta(milliseconds=300)) is False and not h.is_completed()
    assert h.exception() is None
    err = expect(meshcomm.DistTimeoutError, h.wait)
    took = time.monotonic() - start
    stop.set()
    ticker.join()
    assert h.is_completed() and isinstance(h.exception(), meshcomm.DistTimeoutError)
    assert len(ticks) > 50, len(ticks)
    # The group is broken now; later calls fail at once.
    expect(meshcomm.DistError, meshcomm.barrier)
    return took, str(err)


def test_deadline_raises_timeout(run_workers, free_port):
    (took, message), slept = run_workers(_timeout_worker, 2, (free_port,), timeout=60)
    assert slept == "slept" and 2.0 < took < 15.0, (took, message)
    assert "all_reduce" in message


# The Ctrl-C tests below are made of steps that must happen in order even on
# a machine so loaded that any fixed sleep could be too short: rank 0 blocks
# in a call, the parent sees it asleep in the native core and sends SIGINT,
# rank 0 records the interruption, and only then does rank 1 join.
def _mark(path):
    with open(path, "w"):
        pass


def _await_mark(path, limit_s=60.0):
    deadline = time.monotonic() + limit_s
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def _catch_ctrl_c():
    # A test runner started in the background of a non-interactive shell
    # passes SIGINT on ignored, and Python then leaves it ignored; these
    # workers are about what happens when it is not.
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _main_thread_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _interrupt_once_asleep(workers, tmp_path):
    """SIGINT to rank 0 once it sleeps inside the call it marked as started.

    Between the "ready" mark and the call, rank 0 only runs Python code (state
    R); seeing its main thread asleep a few times in a row means the call has
    reached its native wait, so the signal cannot land in the Python wrapper.
    """
    _await_mark(tmp_path / "ready")
    pid = workers.pids[0]
    deadline = time.monotonic() + 60
    asleep = 0
    while asleep < 3:
        assert time.monotonic() < deadline, "rank 0 never blocked in its call"
        asleep = asleep + 1 if _main_thread_state(pid) == "S" else 0
        time.sleep(0.02)
    sent_at = time.time()
    os.kill(pid, signal.SIGINT)
    return sent_at


def _abandon_worker(rank, n, port, marks, op):
    _catch_ctrl_c()
    init(rank, n, port)
    if rank == 1:
        _await_mark(os.path.join(marks, "interrupted"))  # joins after rank 0 gave up
        err = expect(meshcomm.DistError, meshcomm.all_reduce, np.ones(8))
        return str(err)
    x = np.ones(8)
    _mark(os.path.join(marks, "ready"))
    try:
        if op == "all_reduce":
            meshcomm.all_reduce(x)  # runs on this thread: the group is idle
        else:
            meshcomm.recv(x, src=1)
    except KeyboardInterrupt:
        interrupted_at = time.time()
        _mark(os.path.join(marks, "interrupted"))
    else:
        raise AssertionError(f"{op} was not interrupted")
    # The operation was abandoned half-way, so the group cannot be used.
    err = expect(meshcomm.DistError, meshcomm.barrier)
    return interrupted_at, str(err)


# Over TCP, rank 0's data reaches rank 1 before its abort does, and rank 1's
# all_reduce can complete with it; the abort then fails rank 1's next call
# instead of this one. Shared memory fails this one.
_ABORT_BEHIND_DATA = pytest.mark.xfail(
    SHM_OFF, reason="TCP: an abort right behind the awaited data is seen only by the next call")


@pytest.mark.parametrize("op", [pytest.param("all_reduce", marks=_ABORT_BEHIND_DATA), "recv"])
def test_ctrl_c_abandons_a_synchronous_call(spawn_workers, free_port, tmp_path, op):
    workers = spawn_workers(_abandon_worker, 2, (free_port, str(tmp_path), op), timeout=90)
    sent_at = _interrupt_once_asleep(workers, tmp_path)
    outcomes = workers.join()
    assert all(o.ok for o in outcomes), [o.describe() for o in outcomes]
    interrupted_at, after = outcomes[0].result
    # A few polling intervals, plus scheduling delays on a loaded machine.
    assert 0 <= interrupted_at - sent_at < 1.0, interrupted_at - sent_at
    assert "interrupted on rank 0" in after, after
    # The other rank is told which rank gave up, instead of timing out.
    assert "interrupted on rank 0" in outcomes[1].result, outcomes[1].result


def _interrupt_worker(rank, n, port, marks):
    _catch_ctrl_c()
    init(rank, n, port)
    if rank == 1:
        _await_mark(os.path.join(marks, "interrupted"))  # rank 0's wait was interrupted
        first, x = np.ones(8), np.ones(8)
        meshcomm.all_reduce(first)
        meshcomm.all_reduce(x)
        meshcomm.barrier()
        meshcomm.destroy_process_group()
        return x.tolist()
    first, x = np.ones(8), np.ones(8)
    pending = meshcomm.all_reduce(first, async_op=True)
    try:
        _mark(os.path.join(marks, "ready"))
        meshcomm.all_reduce(x)  # queued behind `pending`: waited on in slices
    except KeyboardInterrupt:
        interrupted_at = time.time()
        _mark(os.path.join(marks, "interrupted"))
    else:
        raise AssertionError("all_reduce was not interrupted")
    # Both operations carry on, x parked, and complete once rank 1 joins.
    assert pending.wait() and first.tolist() == [2.0] * 8
    deadline = time.monotonic() + 30
    while meshcomm._state._parked and time.monotonic() < deadline:
        meshcomm._state.prune()
        time.sleep(0.05)
    assert not meshcomm._state._parked
    meshcomm.barrier()
    meshcomm.destroy_process_group()
    return interrupted_at, x.tolist()


def test_ctrl_c_interrupts_a_queued_wait(spawn_workers, free_port, tmp_path):
    workers = spawn_workers(_interrupt_worker, 2, (free_port, str(tmp_path)), timeout=90)
    sent_at = _interrupt_once_asleep(workers, tmp_path)
    outcomes = workers.join()
    assert all(o.ok for o in outcomes), [o.describe() for o in outcomes]
    interrupted_at, x0 = outcomes[0].result
    # One 50 ms slice, plus scheduling delays on a loaded machine.
    assert 0 <= interrupted_at - sent_at < 1.0, interrupted_at - sent_at
    assert x0 == [2.0] * 8 and outcomes[1].result == [2.0] * 8

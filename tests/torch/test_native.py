"""The torch backend's native part (meshcomm.torch._native): which calls it
takes, that it gives what the Python path gives, and that without it
(MESHCOMM_TORCH_NATIVE=0, or a build without it) the backend still works.

test_ops.py and test_faults.py check results and errors op by op; here,
the split between the two paths and the Work the native one returns."""

import os

import pytest

from conftest import init, run_ranks

NATIVE_OFF = os.environ.get("MESHCOMM_TORCH_NATIVE", "1") == "0"


def test_the_build_has_the_native_part():
    # make build compiles it against the venv's torch; a silent fallback to
    # the Python path would cost every call several microseconds.
    import meshcomm.torch.process_group as pg_module
    if NATIVE_OFF:
        assert pg_module._native is None
    else:
        assert pg_module._native is not None, "meshcomm.torch._native is missing from this build"


def _calls(rank, size, port):
    import torch
    import torch.distributed as dist
    init(rank, size, port)
    pg = dist.group.WORLD
    native = pg._native is not None
    out = {"native": native}

    def blocking(tensor, op=dist.ReduceOp.SUM):
        opts = dist.AllreduceOptions()
        opts.reduceOp = op
        opts.asyncOp = False
        return pg.allreduce([tensor], opts)

    # The hot path: blocking, one contiguous tensor, an op the core has.
    x = torch.full((5,), float(rank + 1))
    work = blocking(x)
    out["sum"] = x.tolist()
    out["work"] = (work.is_completed(), work.wait())
    fut = work.get_future()
    out["future"] = (fut.done(), fut.value()[0].tolist())
    out["result_is_input"] = fut.value()[0].data_ptr() == x.data_ptr()
    out["work_type"] = type(work).__name__
    y = torch.arange(4, dtype=torch.int64) * (rank + 1)
    blocking(y, dist.ReduceOp.MAX)
    out["max"] = y.tolist()
    # A Work the caller keeps stays its own: the next call's Work is another
    # one, each result() naming its own tensor (the native part hands a
    # Work out again only once nobody holds it).
    k1, k2 = torch.ones(3), torch.ones(3)
    w1 = blocking(k1)
    w2 = blocking(k2)
    out["kept_works"] = (w1 is not w2, w1.result()[0].data_ptr() == k1.data_ptr(),
                         w2.result()[0].data_ptr() == k2.data_ptr())
    del w1, w2
    # A Work of a large tensor is not kept once dropped (it would keep the
    # tensor alive): its tensor is freed when the caller lets go of it.
    import weakref
    big = torch.ones(1 << 16)
    gone = weakref.ref(big)
    blocking(big)
    del big
    out["large_freed"] = gone() is None
    # Off the hot path (handed to the Python path): AVG, a strided view,
    # a complex tensor, an asynchronous call.
    z = torch.full((4,), float(rank))
    blocking(z, dist.ReduceOp.AVG)
    out["avg"] = z.tolist()
    s = torch.full((6,), float(rank + 1))[::2]
    blocking(s)
    out["strided"] = s.tolist()
    c = torch.full((2,), complex(rank, 1))
    dist.all_reduce(c)
    out["complex"] = [(v.real, v.imag) for v in c.tolist()]
    a = torch.ones(3)
    dist.all_reduce(a, async_op=True).wait()
    out["async"] = a.tolist()
    # Through torch's own function, as users call it.
    u = torch.ones(2, dtype=torch.float16)
    assert dist.all_reduce(u) is None
    out["dist"] = u.tolist()
    # broadcast: the hot path, a strided view (general path), a bad root.
    b = torch.full((3,), float(rank + 10), dtype=torch.float64)
    bopts = dist.BroadcastOptions()
    bopts.rootRank = size - 1
    bopts.asyncOp = False
    out["bcast_work"] = type(pg.broadcast([b], bopts)).__name__
    out["bcast"] = b.tolist()
    v = torch.full((6,), float(rank))[1::2]
    dist.broadcast(v, src=0)
    out["bcast_strided"] = v.tolist()
    bopts.rootRank = size
    try:
        pg.broadcast([b], bopts)
        out["bad_root"] = None
    except ValueError as e:
        out["bad_root"] = (type(e).__name__, "root" in str(e) or "src" in str(e), str(e))
    dist.destroy_process_group()
    return out


@pytest.mark.parametrize("size", [1, 3])
def test_native_and_general_paths_agree(size):
    out = run_ranks(_calls, size)
    total = sum(range(1, size + 1))
    for rank in range(size):
        r = out.values[rank]
        assert r["native"] is not NATIVE_OFF
        assert r["sum"] == [float(total)] * 5
        assert r["work"] == (True, True)
        assert r["result_is_input"]
        assert r["future"] == (True, [float(total)] * 5)
        assert r["max"] == [i * size for i in range(4)]
        assert r["kept_works"] == (True, True, True)
        assert r["large_freed"]
        assert r["avg"] == [sum(range(size)) / size] * 4
        assert r["strided"] == [float(total)] * 3
        assert r["complex"] == [(float(sum(range(size))), float(size))] * 2
        assert r["async"] == [float(size)] * 3
        assert r["dist"] == [float(size)] * 2
        assert r["bcast"] == [float(size - 1 + 10)] * 3
        assert r["bcast_strided"] == [0.0] * 3
        assert r["bad_root"] is not None and r["bad_root"][:2] == ("InvalidArgumentError", True), \
            r["bad_root"]
        assert r["bcast_work"] == ("DoneWork" if NATIVE_OFF else "Work")
        if not NATIVE_OFF:
            # torch's own Work class: the native part made it, not DoneWork.
            assert r["work_type"] == "Work", r["work_type"]
        else:
            assert r["work_type"] == "DoneWork", r["work_type"]


def _timeout(rank, size, port):
    import time
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    init(rank, size, port)
    pg = dist.group.WORLD
    message, took = "", 0.0
    if rank == 0:
        opts = dist.AllreduceOptions()
        opts.asyncOp = False
        opts.timeout = timedelta(milliseconds=500)
        t0 = time.monotonic()
        try:
            pg.allreduce([torch.ones(2)], opts)
        except RuntimeError as e:
            message = f"{type(e).__name__}: {e}"
        took = time.monotonic() - t0
    else:
        time.sleep(3)  # never joins: rank 0's call times out
    try:
        dist.destroy_process_group()
    except RuntimeError:
        pass
    return message, took


def test_a_blocking_call_times_out_with_meshcomms_error_naming_the_torch_group():
    out = run_ranks(_timeout, 2, expect_errors=True)
    message, took = out.values[0]
    assert message.startswith("DistTimeoutError: "), message
    assert "all_reduce" in message and "torch.distributed group" in message, message
    assert " timed out " in message.lower() or "Timed out" in message, message
    assert took < 10, took

"""meshcomm's all_reduce as a torch operator (torch.ops.meshcomm) and as
meshcomm.torch.all_reduce_: results for every op and the dtypes torch
users reduce, the tensors it reduces in a copy (strided, lazily negated,
complex), errors before any communication, errors of a failed call on
every rank, a destroyed group's handle, and torch.compile tracing it."""

import os

import pytest

from conftest import init, run_ranks

NATIVE_OFF = os.environ.get("MESHCOMM_TORCH_NATIVE", "1") == "0"
needs_native = pytest.mark.skipif(NATIVE_OFF, reason="the operators are the native part's")


def _error(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the test compares the type
        return type(e).__name__, str(e)
    return None


def _results(rank, size, port):
    import torch
    import torch.distributed as dist
    import meshcomm.torch as mt
    init(rank, size, port)
    h = mt.group_handle()
    out = {"handle_is_int": type(h) is int, "same_handle": mt.group_handle(dist.group.WORLD) == h}
    v = float(rank + 1)
    for op in ("sum", "avg", "max", "min", "prod"):
        x = torch.full((5,), v, dtype=torch.float64)
        assert mt.all_reduce_(x, h, op) is x
        out[op] = x.tolist()
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
                  torch.int32, torch.int64, torch.bool):
        x = torch.ones(7, dtype=dtype) if dtype == torch.bool else torch.full((7,), rank + 1,
                                                                               dtype=dtype)
        mt.all_reduce_(x, h, "max" if dtype == torch.bool else "sum")
        out[str(dtype)] = x.tolist()
    # torch's names for the op and the group.
    x = torch.full((3,), v)
    mt.all_reduce_(x, dist.group.WORLD, dist.ReduceOp.MAX)
    out["torch_names"] = x.tolist()
    # Reduced in a copy that is written back: strided, negated view, complex.
    base = torch.full((4, 6), v)
    view = base[:, ::2]
    mt.all_reduce_(view, h)
    out["strided"] = (view.tolist(), base[:, 1::2].tolist())
    neg = torch.full((3,), v)._neg_view()
    mt.all_reduce_(neg, h)
    out["neg"] = neg.tolist()
    c = torch.full((2,), complex(rank, 1))
    mt.all_reduce_(c, h, "avg")
    out["complex"] = [(z.real, z.imag) for z in c.tolist()]
    e = torch.empty(0)
    mt.all_reduce_(e, h)
    out["empty"] = e.shape == (0,)
    # Through torch's dispatcher, in place and functional.
    x = torch.full((3,), v)
    torch.ops.meshcomm.all_reduce_(x, h, "sum")
    out["dispatch_inplace"] = x.tolist()
    y = torch.full((3,), v)
    z = torch.ops.meshcomm.all_reduce(y, h, "max")
    out["dispatch_functional"] = (y.tolist(), z.tolist())
    # A sub-group of ranks 0 and size-1, its own handle.
    sub = dist.new_group(sorted({0, size - 1}), backend="meshcomm")
    if rank in (0, size - 1):
        sh = mt.group_handle(sub)
        s = torch.full((2,), v)
        mt.all_reduce_(s, sh)
        out["sub"] = (sh != h, s.tolist())
    dist.destroy_process_group()
    # A destroyed group's handle names nothing.
    out["stale"] = _error(lambda: mt.all_reduce_(torch.ones(1), h))
    return out


@needs_native
@pytest.mark.parametrize("size", [1, 2, 3])
def test_results_for_every_op_and_dtype(size):
    out = run_ranks(_results, size)
    total = sum(range(1, size + 1))
    prod = 1
    for r in range(1, size + 1):
        prod *= r
    for rank in range(size):
        r = out.values[rank]
        assert r["handle_is_int"] and r["same_handle"]
        assert r["sum"] == [float(total)] * 5
        assert r["avg"] == [total / size] * 5
        assert r["max"] == [float(size)] * 5
        assert r["min"] == [1.0] * 5
        assert r["prod"] == [float(prod)] * 5
        for dtype in ("torch.float32", "torch.float16", "torch.bfloat16", "torch.int32",
                      "torch.int64", "torch.int8", "torch.uint8"):
            assert r[dtype] == [total] * 7, dtype
        assert r["torch.bool"] == [True] * 7
        assert r["torch_names"] == [float(size)] * 3
        view, untouched = r["strided"]
        assert view == [[float(total)] * 3] * 4
        assert untouched == [[float(rank + 1)] * 3] * 4
        assert r["neg"] == [-float(total)] * 3
        assert r["complex"] == [(sum(range(size)) / size, 1.0)] * 2
        assert r["empty"]
        assert r["dispatch_inplace"] == [float(total)] * 3
        assert r["dispatch_functional"] == ([float(rank + 1)] * 3, [float(size)] * 3)
        if rank in (0, size - 1):
            members = {1, size}
            assert r["sub"] == (True, [float(sum(members))] * 2)
        assert r["stale"][0] == "ValueError" and "handle" in r["stale"][1], r["stale"]


def _bad_arguments(rank, size, port):
    import torch
    import meshcomm.torch as mt
    init(rank, size, port)
    h = mt.group_handle()
    out = {
        "handle": _error(lambda: mt.all_reduce_(torch.ones(2), h + 1000)),
        "op": _error(lambda: mt.all_reduce_(torch.ones(2), h, "mean")),
        "torch_op": _error(lambda: mt.all_reduce_(torch.ones(2), h, torch.distributed.ReduceOp.BAND)),
        "int_avg": _error(lambda: mt.all_reduce_(torch.ones(2, dtype=torch.int32), h, "avg")),
        "complex_max": _error(lambda: mt.all_reduce_(torch.ones(2, dtype=torch.complex64), h, "max")),
        "dtype": _error(lambda: mt.all_reduce_(torch.ones(2).to(torch.float8_e4m3fn), h)),
        "sparse": _error(lambda: mt.all_reduce_(torch.ones(2).to_sparse(), h)),
        "not_a_tensor": _error(lambda: mt.all_reduce_([1.0], h)),
        "dispatch_op": _error(lambda: torch.ops.meshcomm.all_reduce_(torch.ones(2), h, "mean")),
        "not_meshcomm": _error(lambda: mt.group_handle(object())),
    }
    # Nothing was sent: the group still works, in step on every rank.
    x = torch.ones(3)
    mt.all_reduce_(x, h)
    out["after"] = x.tolist()
    torch.distributed.destroy_process_group()
    return out


@needs_native
def test_bad_arguments_raise_before_any_communication():
    out = run_ranks(_bad_arguments, 2)
    for rank in range(2):
        r = out.values[rank]
        for key in ("handle", "op", "torch_op", "int_avg", "complex_max", "sparse", "dispatch_op",
                    "not_meshcomm"):
            assert r[key] is not None and r[key][0] == "ValueError", (key, r[key])
        assert r["dtype"][0] == "TypeError" and "Float8" in r["dtype"][1], r["dtype"]
        assert r["not_a_tensor"][0] == "TypeError", r["not_a_tensor"]
        assert r["after"] == [2.0] * 3


def _mismatch(rank, size, port):
    import torch
    import meshcomm.torch as mt
    init(rank, size, port)
    h = mt.group_handle()
    x = torch.ones(4 + rank)  # the ranks disagree on the size
    return _error(lambda: mt.all_reduce_(x, h))


@needs_native
def test_ranks_that_disagree_get_meshcomms_error_on_every_rank():
    out = run_ranks(_mismatch, 2, expect_errors=True)
    for rank in range(2):
        name, message = out.values[rank]
        assert name == "DistMismatchError", (name, message)
        assert "all_reduce" in message, message


def _peer_gone(rank, size, port):
    import time
    import torch
    import meshcomm.torch as mt
    init(rank, size, port)
    h = mt.group_handle()
    if rank == 1:
        os._exit(0)  # never calls: rank 0's call must fail, not hang
    t0 = time.monotonic()
    error = _error(lambda: mt.all_reduce_(torch.ones(2), h))
    return error, time.monotonic() - t0


@needs_native
def test_a_lost_peer_fails_the_call_with_a_clear_error():
    out = run_ranks(_peer_gone, 2, expect_errors=True, timeout=90)
    (name, message), took = out.values[0]
    assert name in ("DistPeerLostError", "DistTimeoutError"), (name, message)
    assert "all_reduce" in message, message
    assert took < 60, took


def _compiled(rank, size, port):
    import torch
    import meshcomm.torch as mt
    init(rank, size, port)
    h = mt.group_handle()

    def in_place(x):
        y = x * 2
        mt.all_reduce_(y, h)
        return y + 1

    def functional(x):
        return torch.ops.meshcomm.all_reduce(x + 1, h, "max") * 3

    a = torch.compile(in_place, backend="aot_eager", fullgraph=True)(torch.full((4,), rank + 1.0))
    b = torch.compile(functional, backend="aot_eager", fullgraph=True)(torch.full((4,), rank + 1.0))
    torch.distributed.destroy_process_group()
    return a.tolist(), b.tolist()


@needs_native
def test_torch_compile_traces_the_operator_whole():
    out = run_ranks(_compiled, 2, timeout=240)
    for rank in range(2):
        a, b = out.values[rank]
        assert a == [2.0 * 3 + 1] * 4     # (1*2 + 2*2) + 1
        assert b == [(2.0 + 1) * 3] * 4   # max(2, 3) * 3


def _without_native(rank, size, port):
    import meshcomm.torch as mt
    init(rank, size, port)
    error = _error(mt.group_handle)
    import torch.distributed as dist
    dist.destroy_process_group()
    return error


@pytest.mark.skipif(not NATIVE_OFF, reason="checks the build without the native part")
def test_without_the_native_part_group_handle_says_what_to_build():
    out = run_ranks(_without_native, 1)
    name, message = out.values[0]
    assert name == "RuntimeError" and "MESHCOMM_TORCH_PYTHON" in message, message

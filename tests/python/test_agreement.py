"""Ranks that pass different roots, split sizes or reduction ops: every rank
raises DistMismatchError naming the argument and the values, within a
second, no output is written, and the group stays usable. At 2, 3 and 4
ranks, with small and 4 MiB messages, on shared memory (and on TCP in the
suite's MESHCOMM_SHM=0 pass)."""

import time

import numpy as np
import pytest

import meshcomm
from meshcomm import DistMismatchError
from mcutil import init

LARGE = 1 << 20  # float32 elements: 4 MiB


def _fails(fn, *want):
    """Runs fn, which must raise DistMismatchError saying every `want`
    within a second; returns nothing (failures raise AssertionError)."""
    start = time.monotonic()
    try:
        fn()
    except DistMismatchError as e:
        elapsed = time.monotonic() - start
        text = str(e)
        assert elapsed < 1.0, f"took {elapsed:.2f} s: {text}"
        assert "the group is still usable" in text, text
        for w in want:
            assert w in text, f"{w!r} not in: {text}"
        return
    raise AssertionError("no DistMismatchError")


def _still_usable(rank, n):
    x = np.full(4, rank, np.int64)
    meshcomm.all_reduce(x)
    assert (x == n * (n - 1) // 2).all()


def _agreement_worker(rank, n, port, count):
    init(rank, n, port)
    try:
        # Every rank names itself the source of a broadcast.
        x = np.full(count, rank, np.float32)
        _fails(lambda: meshcomm.broadcast(x, src=rank), "different src: rank 0 passes 0, rank 1 passes 1")
        assert (x == rank).all(), "broadcast wrote the output"
        _still_usable(rank, n)

        # The same, queued: the handle's wait raises, the group goes on.
        _fails(lambda: meshcomm.broadcast(x, src=rank, async_op=True).wait(), "different src")
        assert (x == rank).all(), "broadcast wrote the output"
        _still_usable(rank, n)

        # One rank names another destination of gather_into_tensor.
        out = np.full(count * n, -1, np.float32)
        dst = n - 1 if rank == 1 else 0
        _fails(lambda: meshcomm.gather_into_tensor(out, np.full(count, rank, np.float32), dst=dst),
               "different dst")
        assert (out == -1).all(), "gather wrote the output"
        _still_usable(rank, n)

        # Different reduction ops in reduce.
        y = np.full(count, rank + 1, np.float32)
        op = meshcomm.ReduceOp.MAX if rank == 1 else meshcomm.ReduceOp.SUM
        _fails(lambda: meshcomm.reduce(y, dst=0, op=op), "different op: rank 0 passes sum, rank 1 passes max")
        assert (y == rank + 1).all(), "reduce wrote the output"
        _still_usable(rank, n)

        # all_to_all_single: rank 1 expects one element more from rank 0.
        recv = [count] * n
        if rank == 1:
            recv[0] += 1
        out = np.full(sum(recv), -1, np.float32)
        _fails(lambda: meshcomm.all_to_all_single(out, np.full(count * n, rank, np.float32),
                                                  output_split_sizes=recv,
                                                  input_split_sizes=[count] * n),
               "rank 0 sends", "expects")
        assert (out == -1).all(), "all_to_all_single wrote the output"
        _still_usable(rank, n)

        # all_to_all_v_c: rank 1's matrix has rank 0 send it one row more.
        matrix = [count] * (n * n)
        if rank == 1:
            matrix[0 * n + 1] += 1
        out = np.full(count * n + 1, -1, np.float32)
        _fails(lambda: meshcomm.all_to_all_v_c(out, np.full(count * n, rank, np.float32), matrix),
               "rank 0 sends", "but rank 1 expects")
        assert (out == -1).all(), "all_to_all_v_c wrote the output"
        _still_usable(rank, n)

        # Object collectives are built on these: every rank its own source.
        objs = [f"from {rank}"]
        _fails(lambda: meshcomm.broadcast_object_list(objs, src=rank), "different src")
        assert objs == [f"from {rank}"]
        _still_usable(rank, n)

        # gather_object / scatter_object_list: rank 1 names another root.
        root = n - 1 if rank == 1 else 0
        gathered = [None] * n
        _fails(lambda: meshcomm.gather_object(rank, gathered, dst=root), "different dst")
        assert gathered == [None] * n
        _still_usable(rank, n)
        out = ["untouched"]
        _fails(lambda: meshcomm.scatter_object_list(out, list(range(n)), src=root), "different src")
        assert out == ["untouched"]
        _still_usable(rank, n)
    finally:
        meshcomm.destroy_process_group()
    return "ok"


@pytest.mark.parametrize("nprocs", [2, 3, 4])
@pytest.mark.parametrize("count", [4, LARGE], ids=["small", "large"])
def test_disagreeing_arguments(run_workers, free_port, nprocs, count):
    assert run_workers(_agreement_worker, nprocs, (free_port, count), timeout=90) == ["ok"] * nprocs

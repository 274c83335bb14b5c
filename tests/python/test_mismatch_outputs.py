"""A rank that passes a different reduction op or element count to
all_reduce or reduce_scatter_tensor (calls that skip the agreement step):
every rank raises DistMismatchError and no rank's tensors are written. With
4 MiB at 3 and 4 ranks, so TCP (the suite's MESHCOMM_SHM=0 pass) takes the
ring; on shared memory otherwise."""

import numpy as np
import pytest

import meshcomm
from meshcomm import DistMismatchError
from mcutil import init

LARGE = 1 << 20  # float32 elements: 4 MiB


def _pattern(rank, n):
    return ((np.arange(n) % 977) + 1000 * (rank + 1)).astype(np.float32)


def _worker(rank, nprocs, port, call, what):
    init(rank, nprocs, port)
    odd = rank == nprocs // 2
    n = LARGE + (1 if odd and what == "count" else 0)
    op = meshcomm.ReduceOp.MAX if odd and what == "op" else meshcomm.ReduceOp.SUM
    out = _pattern(rank, n)
    inp = _pattern(rank + 100, n * nprocs)
    try:
        if call == "all_reduce":
            meshcomm.all_reduce(out, op=op)
        else:
            meshcomm.reduce_scatter_tensor(out, inp, op=op)
    except DistMismatchError as e:
        assert "not running the same operation" in str(e), str(e)
    else:
        raise AssertionError("no DistMismatchError")
    finally:
        meshcomm.destroy_process_group()
    assert np.array_equal(out, _pattern(rank, n)), f"rank {rank}'s output was written"
    assert np.array_equal(inp, _pattern(rank + 100, n * nprocs)), f"rank {rank}'s input was written"
    return "ok"


@pytest.mark.parametrize("nprocs", [3, 4])
@pytest.mark.parametrize("call", ["all_reduce", "reduce_scatter_tensor"])
@pytest.mark.parametrize("what", ["op", "count"])
def test_disagreement_leaves_tensors(run_workers, free_port, nprocs, call, what):
    assert run_workers(_worker, nprocs, (free_port, call, what), timeout=90) == ["ok"] * nprocs

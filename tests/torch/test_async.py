"""async_op=True never waits for a peer, whatever the operation and size.

The pattern that deadlocks a backend whose async calls block: rank 0
issues an async collective and then sends to rank 1; rank 1 receives
first and joins the collective only after that. Rank 1 cannot have joined
when rank 0's async call returns, so that call's Work must be pending then,
and the send after it must go out. Ranks beyond 1 join the collective at
once. Every collective torch offers, at 8 B, 64 KiB and 4 MiB per rank.
"""

from datetime import timedelta

import pytest

from conftest import run_ranks

SIZES = {"8B": 2, "64KiB": 16 * 1024, "4MiB": 1024 * 1024}  # float32 elements


def _ops(torch, dist, rank, size, n):
    """name -> (issue(async_op) -> (work, result tensors), expected tensors)."""
    x = torch.full((n,), float(rank + 1))
    total = float(size * (size + 1) // 2)
    ops = {}

    def all_reduce(async_op):
        t = x.clone()
        return dist.all_reduce(t, async_op=async_op), [t]
    ops["all_reduce"] = (all_reduce, [torch.full((n,), total)])

    def all_reduce_avg(async_op):
        t = x.clone()
        return dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=async_op), [t]
    ops["all_reduce AVG"] = (all_reduce_avg, [torch.full((n,), total / size)])

    def broadcast(async_op):
        t = x.clone()
        return dist.broadcast(t, src=size - 1, async_op=async_op), [t]
    ops["broadcast"] = (broadcast, [torch.full((n,), float(size))])

    def reduce(async_op):
        t = x.clone()
        return dist.reduce(t, dst=0, async_op=async_op), [t] if rank == 0 else []
    ops["reduce"] = (reduce, [torch.full((n,), total)] if rank == 0 else [])

    every = [torch.full((n,), float(r + 1)) for r in range(size)]

    def all_gather(async_op):
        out = [torch.empty(n) for _ in range(size)]
        return dist.all_gather(out, x, async_op=async_op), out
    ops["all_gather"] = (all_gather, every)

    def all_gather_into_tensor(async_op):
        out = torch.empty(n * size)
        return dist.all_gather_into_tensor(out, x, async_op=async_op), [out]
    ops["all_gather_into_tensor"] = (all_gather_into_tensor, [torch.cat(every)])

    def all_gather_coalesced(async_op):
        out = [[torch.empty(n)] for _ in range(size)]
        return dist.all_gather_coalesced(out, [x], async_op=async_op), [o[0] for o in out]
    ops["all_gather_coalesced"] = (all_gather_coalesced, every)

    def reduce_scatter_tensor(async_op):
        out = torch.empty(n)
        return dist.reduce_scatter_tensor(out, x.repeat(size), async_op=async_op), [out]
    ops["reduce_scatter_tensor"] = (reduce_scatter_tensor, [torch.full((n,), total)])

    def reduce_scatter(async_op):
        out = torch.empty(n)
        return dist.reduce_scatter(out, [x.clone() for _ in range(size)],
                                   async_op=async_op), [out]
    ops["reduce_scatter"] = (reduce_scatter, [torch.full((n,), total)])

    def all_to_all_single(async_op):
        out = torch.empty(n * size)
        return dist.all_to_all_single(out, x.repeat(size), async_op=async_op), [out]
    ops["all_to_all_single"] = (all_to_all_single, [torch.cat(every)])

    def all_to_all(async_op):
        out = [torch.empty(n) for _ in range(size)]
        return dist.all_to_all(out, [x.clone() for _ in range(size)], async_op=async_op), out
    ops["all_to_all"] = (all_to_all, every)

    def gather(async_op):
        out = [torch.empty(n) for _ in range(size)] if rank == 0 else None
        return dist.gather(x, out, dst=0, async_op=async_op), out or []
    ops["gather"] = (gather, every if rank == 0 else [])

    def scatter(async_op):
        out = torch.empty(n)
        src = [torch.full((n,), float(r + 10)) for r in range(size)] if rank == 0 else None
        return dist.scatter(out, src, src=0, async_op=async_op), [out]
    ops["scatter"] = (scatter, [torch.full((n,), float(rank + 10))])

    def barrier(async_op):
        return dist.barrier(async_op=async_op), []
    ops["barrier"] = (barrier, [])

    def sparse_all_reduce(async_op):
        t = torch.sparse_coo_tensor(torch.tensor([[0, rank]]), torch.ones(2), (max(n, size),))
        return dist.all_reduce(t, async_op=async_op), [t]
    dense = torch.zeros(max(n, size))
    dense[0] = size
    dense[:size] += 1
    ops["sparse all_reduce"] = (sparse_all_reduce, [dense])
    return ops


def async_then_send(rank, size, port, sizes):
    import torch
    import torch.distributed as dist
    # A deadlock would end in the group's timeout: keep it short.
    dist.init_process_group("meshcomm", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=size, timeout=timedelta(seconds=20))
    failures, cases = [], 0
    for label in sizes:
        n = SIZES[label]
        for name, (issue, expect) in _ops(torch, dist, rank, size, n).items():
            where = f"{name} {label}"
            token = torch.zeros(1)
            if rank == 0:
                work, got = issue(True)
                # torch returns a Future for all_gather_coalesced, a Work otherwise.
                done = work.is_completed() if hasattr(work, "is_completed") else work.done()
                if done:
                    failures.append(f"{where}: the async call returned a completed Work, "
                                    "though rank 1 had not joined yet")
                dist.send(torch.ones(1), 1)
                work.wait()
            elif rank == 1:
                dist.recv(token, 0)
                _, got = issue(False)
            else:
                _, got = issue(False)
            got = [g.to_dense() if g.is_sparse else g for g in got]
            if len(got) != len(expect) or not all(torch.equal(a, b) for a, b in zip(got, expect)):
                failures.append(f"{where}: got {got} expected {expect}")
            cases += 1
    dist.destroy_process_group()
    return failures, cases


@pytest.mark.parametrize("size,sizes", [(2, ["8B", "64KiB", "4MiB"]), (3, ["8B", "64KiB"])])
def test_async_call_never_waits_for_peers(size, sizes):
    out = run_ranks(async_then_send, size, sizes, timeout=240)
    for rank in range(size):
        failures, cases = out.values[rank]
        assert not failures, f"rank {rank}:\n" + "\n".join(failures)
        assert cases == len(sizes) * 15


def async_overlaps_p2p(rank, size, port):
    """An irecv posted before a queued collective completes while the
    collective waits for its last rank, which first sends."""
    import torch
    import torch.distributed as dist
    dist.init_process_group("meshcomm", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=size, timeout=timedelta(seconds=20))
    x = torch.ones(4)
    if rank == 0:
        got = torch.zeros(2)
        r = dist.irecv(got, 1)
        w = dist.all_reduce(x, async_op=True)
        r.wait()
        w.wait()
        result = (got.tolist(), x.tolist())
    else:
        dist.send(torch.full((2,), 7.0), 0)
        dist.all_reduce(x)
        result = x.tolist()
    dist.destroy_process_group()
    return result


def test_receive_completes_while_collective_is_queued():
    out = run_ranks(async_overlaps_p2p, 2)
    assert out.values[0] == ([7.0, 7.0], [2.0] * 4)
    assert out.values[1] == [2.0] * 4

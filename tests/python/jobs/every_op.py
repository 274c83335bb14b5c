"""Runs every collective and point-to-point operation once and checks the
results; exits non-zero on the first wrong value. Launched by meshrun (the
multi-host test starts it on several network namespaces)."""

import sys

import numpy as np

import meshcomm as dist


def expect(cond, what):
    if not cond:
        print(f"rank {dist.get_rank()}: WRONG {what}", file=sys.stderr, flush=True)
        sys.exit(3)


def main():
    dist.init_process_group()
    rank = dist.get_rank()
    n = dist.get_world_size()
    # Emulated hosts of one machine share its cores; waits count them all.
    machine = dist._state.world().machine_size
    spin = dist._meshcomm.get_wait_spin_us()
    print(f"every_op: rank {rank} shares its machine with {machine} ranks, "
          f"waits spin {spin} us", flush=True)
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000

    t = np.full(count, rank + 1, dtype=np.float32)
    dist.all_reduce(t)
    expect(np.all(t == n * (n + 1) / 2), "all_reduce")

    t = np.full(count, rank + 1, dtype=np.int64)
    dist.all_reduce(t, op="max")
    expect(np.all(t == n), "all_reduce max")

    b = np.arange(count, dtype=np.float64) if rank == n - 1 else np.zeros(count)
    dist.broadcast(b, src=n - 1)
    expect(np.array_equal(b, np.arange(count, dtype=np.float64)), "broadcast")

    r = np.full(count, rank, dtype=np.int32)
    dist.reduce(r, dst=1 % n)
    if rank == 1 % n:
        expect(np.all(r == n * (n - 1) // 2), "reduce")

    out = np.zeros((n, 3), dtype=np.int32)
    dist.all_gather_into_tensor(out, np.full((1, 3), rank, dtype=np.int32))
    expect(np.array_equal(out[:, 0], np.arange(n)), "all_gather_into_tensor")

    outs = [np.zeros(4, dtype=np.float32) for _ in range(n)]
    dist.all_gather(outs, np.full(4, rank, dtype=np.float32))
    expect(all(np.all(o == i) for i, o in enumerate(outs)), "all_gather")

    rs = np.zeros(5, dtype=np.float32)
    dist.reduce_scatter_tensor(rs, np.ones(5 * n, dtype=np.float32))
    expect(np.all(rs == n), "reduce_scatter_tensor")

    g = np.zeros((n, 2), dtype=np.int64) if rank == 0 else np.zeros((n, 2), dtype=np.int64)
    dist.gather_into_tensor(g, np.full((1, 2), rank, dtype=np.int64), dst=0)
    if rank == 0:
        expect(np.array_equal(g[:, 0], np.arange(n)), "gather_into_tensor")

    s = np.zeros(3, dtype=np.float32)
    src = np.repeat(np.arange(n, dtype=np.float32), 3)
    dist.scatter_tensor(s, src, src=0)
    expect(np.all(s == rank), "scatter_tensor")

    a2a_in = np.arange(n * 2, dtype=np.int32) + 100 * rank
    a2a_out = np.zeros(n * 2, dtype=np.int32)
    dist.all_to_all_single(a2a_out, a2a_in)
    expected = np.concatenate([np.arange(2 * rank, 2 * rank + 2) + 100 * j for j in range(n)])
    expect(np.array_equal(a2a_out, expected), "all_to_all_single")

    if n > 1:
        right, left = (rank + 1) % n, (rank - 1) % n
        send_buf = np.full(count, rank, dtype=np.float32)
        recv_buf = np.zeros(count, dtype=np.float32)
        ops = [dist.P2POp(dist.isend, send_buf, right), dist.P2POp(dist.irecv, recv_buf, left)]
        for h in dist.batch_isend_irecv(ops):
            h.wait()
        expect(np.all(recv_buf == left), "batch_isend_irecv")
        if rank == 0:
            dist.send(np.full(7, 42, dtype=np.int16), dst=n - 1)
        elif rank == n - 1:
            got = np.zeros(7, dtype=np.int16)
            dist.recv(got, src=0)
            expect(np.all(got == 42), "send/recv")

    objs = [None] * n
    dist.all_gather_object(objs, {"rank": rank})
    expect([o["rank"] for o in objs] == list(range(n)), "all_gather_object")

    dist.barrier()
    if rank == 0:
        print(f"every_op: all {n} ranks passed", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

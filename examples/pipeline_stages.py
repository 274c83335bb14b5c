"""A pipeline of stages connected by send/recv: rank 0 produces
micro-batches, every middle rank transforms what it receives and passes it
on, and the last rank checks the result. Each stage works on micro-batch
k while its neighbour works on k+1, as in pipeline-parallel training.

    meshrun --nproc-per-node 4 examples/pipeline_stages.py
"""

import sys

import numpy as np

import meshcomm as dist

MICRO_BATCHES, WIDTH = 16, 4096


def stage(x, rank):
    """Stage `rank`'s transformation: scale and shift, easy to check."""
    return x * 2.0 + rank


def main():
    dist.init_process_group()
    rank, n = dist.get_rank(), dist.get_world_size()
    if n < 2:
        print("pipeline_stages needs at least 2 ranks", file=sys.stderr)
        return 2
    buf = np.empty(WIDTH, dtype=np.float64)
    ok = True
    pending = None
    for k in range(MICRO_BATCHES):
        if rank == 0:
            buf = np.full(WIDTH, float(k))
            out = stage(buf, rank)
        else:
            dist.recv(buf, src=rank - 1, tag=k)
            out = stage(buf, rank)
        if rank < n - 1:
            if pending is not None:
                pending.wait()          # the previous send's buffer is reusable
            send_buf = out.copy()
            pending = dist.isend(send_buf, dst=rank + 1, tag=k)
        else:
            expected = np.full(WIDTH, float(k))
            for r in range(n):
                expected = stage(expected, r)
            ok = ok and np.array_equal(out, expected)
    if pending is not None:
        pending.wait()
    verdict = np.array([int(ok)], dtype=np.int32)
    dist.broadcast(verdict, src=n - 1)
    if rank == n - 1:
        print(f"{MICRO_BATCHES} micro-batches through {n} stages: "
              f"{'all correct' if ok else 'WRONG'}", flush=True)
    dist.destroy_process_group()
    return 0 if verdict[0] else 1


if __name__ == "__main__":
    sys.exit(main())

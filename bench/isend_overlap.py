#!/usr/bin/python3
"""How fast an isend moves while its sender is busy elsewhere.

Rank 0 isends a buffer and then computes (sleeps) for half a second before it
waits on the handle; rank 1 posts the matching recv at once and reports how
long it took. Everything the recv gets arrives through the group's
background progress on rank 0.

    /usr/bin/python3 tools/meshrun --nproc-per-node 2 bench/isend_overlap.py [MiB] [repeats]

(PYTHONPATH=build/python from a build tree.) Defaults: 64 MiB, 3 repeats.
"""

import sys
import time

import numpy as np

import meshcomm as mc


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    mc.init_process_group()
    rank = mc.get_rank()
    if mc.get_world_size() != 2:
        raise SystemExit("isend_overlap.py runs on exactly 2 ranks")
    buf = np.full(mib * (1 << 20) // 4, rank + 1, dtype=np.float32)
    for _ in range(repeats):
        mc.barrier()
        if rank == 0:
            handle = mc.isend(buf, dst=1)
            time.sleep(0.5)
            handle.wait()
        else:
            start = time.perf_counter()
            mc.recv(buf, src=0)
            took = time.perf_counter() - start
            print(f"recv of {mib} MiB while the sender computes: {took * 1e3:.1f} ms", flush=True)
    mc.destroy_process_group()


if __name__ == "__main__":
    main()

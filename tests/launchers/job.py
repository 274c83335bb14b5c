"""The one script every launcher runs, unchanged: it joins the job from the
launcher's variables alone (a bare init_process_group()) and writes what it
saw to <out>/rank_<R>.json: rank, size, local rank, the launcher variable
that gave the local rank, pid, host, whether an all_reduce summed right, and
whether the ranks of this host share memory (the segment shows in this
process's mappings as /dev/shm/meshcomm-...).

Usage: job.py OUT [check|hold]. With `hold`, the ranks then all_reduce in a
loop (for at most HOLD_S) until one of them is killed; each survivor writes
the error it got to <out>/rank_<R>.error and exits 3. A SIGTERM (launchers
that stop the rest of a job when one process dies send it, some within
milliseconds) lets the all_reduce under way finish or fail first, so the
survivor still reports what meshcomm told it.
"""

import json
import os
import signal
import socket
import sys
import time

import numpy as np

import meshcomm

HOLD_S = 60.0
LOCAL_RANK_VARIABLES = ["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                        "SLURM_LOCALID"]


def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main():
    out = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else "check"
    meshcomm.init_process_group()
    rank, size = meshcomm.get_rank(), meshcomm.get_world_size()
    x = np.full(4096, rank + 1.0)
    meshcomm.all_reduce(x)
    with open("/proc/self/maps") as maps:
        shared_memory = "/dev/shm/meshcomm-" in maps.read()
    report = {
        "rank": rank,
        "size": size,
        "local_rank": meshcomm.get_local_rank(),
        "launcher_local_rank": {v: os.environ[v] for v in LOCAL_RANK_VARIABLES
                                if v in os.environ},
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "sum_ok": bool((x == size * (size + 1) / 2).all()),
        "shared_memory": shared_memory,
    }
    write(os.path.join(out, f"rank_{rank}.json"), json.dumps(report))
    print(f"rank {rank} of {size}, local rank {report['local_rank']}", flush=True)
    if mode == "hold":
        stopping = []
        signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
        end = time.monotonic() + HOLD_S
        try:
            while time.monotonic() < end and not stopping:
                meshcomm.all_reduce(x)
                time.sleep(0.001)
        except meshcomm.DistError as e:
            write(os.path.join(out, f"rank_{rank}.error"), f"{type(e).__name__}: {e}")
            sys.exit(3)
        if stopping:
            sys.exit(128 + signal.SIGTERM)
    meshcomm.destroy_process_group()


if __name__ == "__main__":
    main()

"""One rank of the fault-tolerance scenarios of test_fault_tolerance.py.

    survive_loss.py <scenario> <out dir> [<port>]

Rank and world size come from the arguments' environment (RANK,
WORLD_SIZE) when run under meshrun, or from MC_RANK/MC_WORLD with a
tcp://127.0.0.1:<port> store otherwise. Each rank writes what it saw to
<out dir>/rank<R>.json; a rank that kills itself first writes the time of
its death to <out dir>/killed<R>.

Scenarios:
  kill      all_reduce in a loop; world rank 2 kills itself (SIGKILL) half
            way; the survivors shrink and run verified all_reduce, broadcast
            and all_gather calls; then world rank 3 dies the same way, the
            survivors shrink again and the last two finish.
  kill0     as kill with world rank 0 as the only victim (under meshrun,
            whose launcher hosts the store).
"""

import json
import os
import signal
import sys
import time

import numpy as np

import meshcomm

SIZES = (1, 1000, 40000)  # elements of float64: 8 B, 8 KB, 320 KB


def counts():
    return {"fds": len(os.listdir("/proc/self/fd")),
            "threads": len(os.listdir("/proc/self/task"))}


def verified_ops(calls):
    """calls collectives of every kind and size on the default group,
    checking every result; the wall time of the first one's end."""
    n = meshcomm.get_world_size()
    r = meshcomm.get_rank()
    first = None
    for i in range(calls):
        size = SIZES[i % len(SIZES)]
        kind = (i // len(SIZES)) % 3
        if kind == 0:
            x = np.full(size, float(r + 1 + i))
            meshcomm.all_reduce(x)
            expected = sum(k + 1 + i for k in range(n))
            assert np.all(x == expected), f"all_reduce #{i}: {x[:3]} != {expected}"
        elif kind == 1:
            root = i % n
            x = np.full(size, float(r * 100 + i))
            meshcomm.broadcast(x, src=meshcomm.get_global_rank(None, root))
            assert np.all(x == root * 100 + i), f"broadcast #{i}: {x[:3]}"
        else:
            x = np.full(size, float(r * 7 + i))
            out = [np.empty(size) for _ in range(n)]
            meshcomm.all_gather(out, x)
            for k in range(n):
                assert np.all(out[k] == k * 7 + i), f"all_gather #{i} from {k}: {out[k][:3]}"
        if first is None:
            first = time.time()
    return first


def loop_until_loss(victim, die_at, out_dir):
    """all_reduce in a loop until a peer is lost; `victim` dies at `die_at`."""
    world_rank = meshcomm.get_global_rank(None, meshcomm.get_rank())
    x = np.ones(1000)
    for i in range(100000):
        if world_rank == victim and i == die_at:
            with open(os.path.join(out_dir, f"killed{world_rank}"), "w") as f:
                f.write(repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            meshcomm.all_reduce(x)
        except meshcomm.DistError as e:
            return i, e
    raise AssertionError("no peer was lost")


def main():
    scenario, out_dir = sys.argv[1], sys.argv[2]
    timeout = 40.0
    if "RANK" in os.environ and os.environ.get("MESHCOMM_LAUNCHER") == "meshrun":
        meshcomm.init_process_group(timeout=__import__("datetime").timedelta(seconds=timeout))
    else:
        port = int(sys.argv[3])
        meshcomm.init_process_group(init_method=f"tcp://127.0.0.1:{port}",
                                    rank=int(os.environ["MC_RANK"]),
                                    world_size=int(os.environ["MC_WORLD"]),
                                    timeout=__import__("datetime").timedelta(seconds=timeout))
    world_rank = meshcomm.get_rank()
    report = {"rank": world_rank, "phases": [], "job_id": os.environ.get("MESHCOMM_JOB_ID")}
    victims = [0] if scenario == "kill0" else [2, 3]
    verified_ops(6)  # every path set up before the counts are taken
    report["before"] = counts()
    for victim in victims:
        step, error = loop_until_loss(victim, 20, out_dir)
        caught = time.time()
        assert meshcomm.group_error() is not None, "a broken group reports its error"
        # An errored group fails at once, with the same error.
        t = time.monotonic()
        try:
            meshcomm.all_reduce(np.ones(4))
            raise AssertionError("an op on a broken group succeeded")
        except meshcomm.DistError as again:
            refail = time.monotonic() - t
            same = type(again) is type(error) and str(again) == str(error)
        # An exception's traceback holds the frames that used the old group,
        # and with them the group itself: drop it before counting.
        error_type, error_message = type(error).__name__, str(error)
        del error
        meshcomm.shrink_group()
        shrunk = time.time()
        first = verified_ops(int(os.environ.get("MC_CALLS", "99")))
        report["phases"].append({
            "victim": victim, "step": step, "error": error_type,
            "message": error_message, "caught": caught, "shrunk": shrunk, "first_ok": first,
            "refail_s": refail, "same_error": same,
            "size": meshcomm.get_world_size(), "new_rank": meshcomm.get_rank(),
            "group_error_after": meshcomm.group_error() is not None,
        })
    report["after"] = counts()
    with open(os.path.join(out_dir, f"rank{world_rank}.json"), "w") as f:
        json.dump(report, f)
    meshcomm.destroy_process_group()


if __name__ == "__main__":
    main()

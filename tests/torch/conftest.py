"""Running one function in several fresh processes, one per rank.

Each rank is a forked child of the test process, which imports torch once
beforehand (importing it takes seconds; a fork takes milliseconds). The
test process itself never initializes torch.distributed or runs a torch
operation, so the children inherit no threads and no thread pools. A rank
gets (rank, size, port) and whatever extra arguments the test
passes, and sends back what the function returned or the traceback it
raised. Every run has a hard deadline: past it the ranks still running are
killed and the test fails saying which ones hung.
"""

import faulthandler
import multiprocessing
import os
import queue
import signal
import sys
import time
import traceback

import pytest
import torch  # noqa: F401 - imported once, before the ranks are forked
import torch._dynamo  # noqa: F401 - DDP's constructor imports it (seconds)
import torch.distributed  # noqa: F401
import torch.distributed.fsdp  # noqa: F401
import torch.distributed.optim  # noqa: F401
import torch.nn.parallel  # noqa: F401
import meshcomm.torch  # noqa: F401 - registers the backend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# tests/helpers: what every suite shares (ports.py). Not tests/ itself,
# whose folders (torch, python) would shadow the packages of those names.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "helpers"))
from ports import free_port  # noqa: E402,F401 - the suite's tests take it from here


def _entry(fn, rank, size, port, results, args):
    # On a hang the test asks every rank still running for its Python
    # stacks (SIGUSR2), then for its flight recorder (SIGUSR1, meshcomm's
    # handler while a group exists), before it kills them.
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    try:
        # The ranks share a few cores; torch's intra-op pool would make
        # every rank's threads compete with every other rank's.
        torch.set_num_threads(1)
        value = fn(rank, size, port, *args)
        results.put((rank, True, value))
    except BaseException:  # noqa: B036 - everything goes back to the test
        results.put((rank, False, traceback.format_exc()))


class Outcome:
    def __init__(self, values, errors, exitcodes):
        self.values = values        # rank -> returned value
        self.errors = errors        # rank -> traceback text
        self.exitcodes = exitcodes  # rank -> exit code (negative: killed by that signal)


def run_ranks(fn, size, *args, timeout=150, expect_errors=False):
    """Runs fn(rank, size, port, *args) in `size` processes. Returns an
    Outcome; unless expect_errors, fails the test on any error or hang."""
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_entry, args=(fn, r, size, port, results, args), daemon=True)
             for r in range(size)]
    for p in procs:
        p.start()
    values, errors = {}, {}
    deadline = time.monotonic() + timeout
    pending = size
    while pending and time.monotonic() < deadline:
        try:
            rank, ok, value = results.get(timeout=0.2)
        except queue.Empty:
            if all(not p.is_alive() for p in procs) and results.empty():
                break
            continue
        pending -= 1
        (values if ok else errors)[rank] = value
    for p in procs:
        p.join(max(0.0, min(10.0, deadline - time.monotonic())))
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    if hung:
        for sig in (signal.SIGUSR2, signal.SIGUSR1):
            for r in hung:
                os.kill(procs[r].pid, sig)
            time.sleep(1.0)
    for r in hung:
        procs[r].kill()
        procs[r].join()
    exitcodes = {r: p.exitcode for r, p in enumerate(procs)}
    if hung:
        pytest.fail(f"ranks {hung} of {size} did not finish within {timeout} s; "
                    f"errors so far: {errors}")
    if errors and not expect_errors:
        pytest.fail("\n".join(f"--- rank {r} ---\n{tb}" for r, tb in sorted(errors.items())))
    return Outcome(values, errors, exitcodes)


def init(rank, size, port, backend="meshcomm"):
    """init_process_group over tcp:// with the given default backend."""
    import warnings
    import torch.distributed as dist
    import meshcomm.torch  # noqa: F401 - registers the backend
    # torch 2.13 renames *_tensor collectives (*_single); the tests use the
    # spelling every 2.x has.
    warnings.filterwarnings("ignore", category=FutureWarning)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=size)

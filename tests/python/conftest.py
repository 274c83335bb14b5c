"""Shared fixtures for the Python tests: free ports, a per-test deadline, and
a helper that runs a function in several fresh processes with a hard time
limit.

Child processes are started with multiprocessing's "spawn" method, so each
one is a fresh interpreter (no state forked from pytest, no inherited locks)
that imports the test module and calls a module-level function in it.
"""

import faulthandler
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Any, Optional

import pytest

# tests/helpers: what every suite shares (ports.py). Not tests/ itself,
# whose folders (torch, python) would shadow the packages of those names.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "helpers"))
import ports  # noqa: E402
from deadline import per_test_deadline  # noqa: E402

# No test may run longer than this (deadline.py).
TEST_DEADLINE_S = 180.0

# After one worker fails, the others get this long to finish on their own
# (they are usually blocked on a key the failed worker never set) before they
# are killed.
FAILURE_GRACE_S = 3.0


_test_deadline = per_test_deadline(TEST_DEADLINE_S)


@pytest.fixture
def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago, outside the
    kernel's ephemeral range (tests/ports.py says why). Prefer port 0 and
    the store's ``port`` property when the test creates the server itself.
    """
    return ports.free_port()


@dataclass
class Outcome:
    """How one worker process ended."""

    rank: int
    exitcode: Optional[int]  # None: still running when killed; < 0: signal
    result: Any = None  # the target's return value when it succeeded
    error: Optional[str] = None  # the traceback when it raised
    killed: bool = False  # killed by the runner after the deadline

    @property
    def ok(self):
        return self.exitcode == 0 and self.error is None and not self.killed

    def describe(self):
        if self.killed:
            return (f"rank {self.rank}: still running at the deadline "
                    "(or after a peer failed), killed")
        if self.error is not None:
            return f"rank {self.rank}: raised\n{self.error}"
        return f"rank {self.rank}: exited with code {self.exitcode} and no result"


def _child_main(target, rank, nprocs, args, result_path, deadline_s):
    # Exit by itself even if the parent dies and nobody kills it.
    faulthandler.dump_traceback_later(deadline_s + 10.0, exit=True)
    try:
        payload = ("ok", target(rank, nprocs, *args))
        code = 0
    except BaseException:  # report everything, including SystemExit
        payload = ("error", traceback.format_exc())
        code = 1
    tmp = result_path + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(payload, f)
    os.replace(tmp, result_path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class Workers:
    """``nprocs`` spawned processes running ``target(rank, nprocs, *args)``.

    Use as a context manager: leaving the block kills (SIGKILL, by pid) any
    worker still running and reaps them all. ``join`` waits for them and
    returns one :class:`Outcome` per rank.
    """

    def __init__(self, target, nprocs, args=(), timeout=60.0):
        self.timeout = timeout
        self._dir = tempfile.TemporaryDirectory(prefix="meshcomm-test-")
        self._paths = [os.path.join(self._dir.name, f"rank{r}.pkl") for r in range(nprocs)]
        ctx = multiprocessing.get_context("spawn")
        self._procs = [
            ctx.Process(target=_child_main, name=f"meshcomm-test-rank{r}",
                        args=(target, r, nprocs, tuple(args), self._paths[r], timeout),
                        daemon=True)
            for r in range(nprocs)
        ]
        self._deadline = time.monotonic() + timeout
        self._killed = set()
        for p in self._procs:
            p.start()

    @property
    def pids(self):
        return [p.pid for p in self._procs]

    def kill(self, rank):
        """SIGKILL one worker now."""
        self._kill(self._procs[rank])

    def _kill(self, proc):
        if proc.exitcode is None:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.join(10.0)

    def join(self):
        """Wait until every worker exits, the deadline passes, or one fails
        and the rest do not follow within FAILURE_GRACE_S; kill whoever is
        left. Returns the outcomes by rank."""
        first_failure = None
        while True:
            running = [p for p in self._procs if p.exitcode is None]
            if not running:
                break
            now = time.monotonic()
            if first_failure is None and any(p.exitcode not in (None, 0) for p in self._procs):
                first_failure = now
            limit = self._deadline
            if first_failure is not None:
                limit = min(limit, first_failure + FAILURE_GRACE_S)
            if now >= limit:
                break
            multiprocessing.connection.wait([p.sentinel for p in running],
                                            timeout=min(0.2, limit - now))
        for r, p in enumerate(self._procs):
            if p.exitcode is None:
                self._killed.add(r)
                self._kill(p)
        return [self._outcome(r) for r in range(len(self._procs))]

    def _outcome(self, rank):
        out = Outcome(rank, self._procs[rank].exitcode, killed=rank in self._killed)
        try:
            with open(self._paths[rank], "rb") as f:
                status, value = pickle.load(f)
        except FileNotFoundError:
            return out
        if status == "ok":
            out.result = value
        else:
            out.error = value
        return out

    def close(self):
        for p in self._procs:
            self._kill(p)
        self._dir.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run_processes(target, nprocs, args=(), timeout=60.0):
    """Run ``target(rank, nprocs, *args)`` in ``nprocs`` fresh processes and
    return their results by rank. Fails the test, with every failing rank's
    traceback, if any worker raises, crashes or outlives ``timeout`` seconds.

    ``target`` must be a module-level function (it is pickled by name).
    """
    with Workers(target, nprocs, args, timeout) as workers:
        outcomes = workers.join()
    bad = [o.describe() for o in outcomes if not o.ok]
    if bad:
        pytest.fail("worker processes failed:\n" + "\n".join(bad), pytrace=False)
    return [o.result for o in outcomes]


@pytest.fixture
def spawn_workers():
    """Factory fixture: ``spawn_workers(target, nprocs, args=(), timeout=60)``
    starts a :class:`Workers`; every worker still alive at teardown is killed."""
    started = []

    def spawn(target, nprocs, args=(), timeout=60.0):
        workers = Workers(target, nprocs, args, timeout)
        started.append(workers)
        return workers

    yield spawn
    for workers in started:
        workers.close()


@pytest.fixture
def run_workers():
    """The :func:`run_processes` helper, as a fixture."""
    return run_processes

"""meshcomm's Python core (meshcomm._core) on its own, without a job: the
checks both fronts share, and Pending, what CommHandle and the torch
backend's Works wrap."""

import ast
import sys
from pathlib import Path

import pytest

import meshcomm
from meshcomm._core import checks
from meshcomm._core.waiting import Pending, wait_sync


class Bad(Exception):
    """Stands for a front's exception class."""


def test_split_counts_in_rows_give_element_counts():
    assert checks.split_counts([1, 3], (4, 2, 3), 2, "f", "sizes", "'x'", Bad) == [6, 18]
    assert checks.split_counts(None, (4, 5), 2, "f", "sizes", "'x'", Bad) == [10, 10]
    assert checks.split_counts([], (4,), 4, "f", "sizes", "'x'", Bad) == [1, 1, 1, 1]
    # A result not made yet takes its rows from the sizes.
    assert checks.split_counts([5, 0], (1, 2), 2, "f", "sizes", "'x'", Bad, whole=False) == [10, 0]


@pytest.mark.parametrize("sizes, shape, words", [
    ([1, 2, 1], (4,), "one entry per rank"),
    ([5, -1], (4,), "negative"),
    ([1, 2], (4,), "add up to 3 rows but 'x' has 4"),
    ([1, 2], (4, 0), "add up to 3 rows"),     # rows of no elements are still counted
    (None, (3, 2), "divisible by the group size"),
])
def test_split_counts_raise_the_fronts_class(sizes, shape, words):
    with pytest.raises(Bad, match=words):
        checks.split_counts(sizes, shape, 2, "f", "sizes", "'x'", Bad)


def test_per_rank():
    checks.per_rank(3, 3, "f", "l", Bad)
    for count, n in ((0, 0), (2, 3), (4, 3)):
        with pytest.raises(Bad, match="one entry per rank of the group"):
            checks.per_rank(count, n, "f", "l", Bad)


class FakeWork:
    """A native Work as the core uses it."""

    def __init__(self, done=True, error=None):
        self.done, self.error, self.waits = done, error, 0
        self.description = "fake"

    def wait(self, timeout_ms=None, run_here=False):
        self.waits += 1
        if self.error is not None and self.done:
            raise self.error
        return self.done

    def is_completed(self):
        return self.done


def test_pending_runs_finish_once_and_releases_memory():
    runs = []
    p = Pending((FakeWork(), FakeWork()), keep=["buffer"], finish=lambda: runs.append(1))
    assert p.settle() and p.settle(0)
    assert runs == [1] and p.keep is None and p.ended() and p.exception() is None


def test_pending_times_out_then_completes():
    work = FakeWork(done=False)
    p = Pending((work,), keep=["buffer"])
    assert not p.settle(5) and not p.ended() and p.keep == ["buffer"]
    work.done = True
    assert p.settle(5) and p.keep is None


def test_pending_raises_the_same_mapped_error_every_time():
    failed = []

    def name_it(e):
        failed.append(e)
        return RuntimeError(f"{e} (named)")

    p = Pending((FakeWork(error=RuntimeError("lost")),), keep=[1], finish=lambda: 1 / 0,
                failed=name_it)
    with pytest.raises(RuntimeError, match="lost .named.") as first:
        p.settle()
    with pytest.raises(RuntimeError) as again:
        p.settle()
    assert again.value is first.value and len(failed) == 1 and p.keep is None
    assert p.exception() is first.value


def test_wait_sync_parks_memory_of_an_interrupted_wait():
    class Interrupted(FakeWork):
        def wait(self, timeout_ms=None, run_here=False):
            raise KeyboardInterrupt

    work, keep = Interrupted(done=False), ["buffer"]
    parked = meshcomm._state._parked
    with pytest.raises(KeyboardInterrupt):
        wait_sync(work, keep)
    try:
        assert (work, keep) in parked
    finally:
        parked[:] = [e for e in parked if e[0] is not work]


def test_diagnose_needs_only_the_standard_library():
    """meshcomm-diagnose reads dumps on any machine: it imports nothing of
    meshcomm (and so nothing private of it)."""
    source = Path(meshcomm.__file__).with_name("diagnose.py").read_text()
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add("." if node.level else node.module.split(".")[0])
    assert names <= set(sys.stdlib_module_names), names

"""Work objects the meshcomm backend returns to torch.distributed.

torch waits on what a ProcessGroup returns through ``Work.wait`` and, in
DDP's communication hooks, through ``Work.get_future``. Two kinds exist:

* :class:`DoneWork` for an operation that finished before the call
  returned: a call torch waits on at once (``async_op=False``) runs on the
  calling thread (see ``process_group.py``), so this is the common case and
  costs one object.
* :class:`PendingWork` for every call issued with ``async_op=True`` and
  every point-to-point operation: queued on meshcomm's executor, so the
  caller never waits for a peer (an isend followed by an irecv, or an async
  all_reduce followed by a send, would deadlock otherwise). It holds
  meshcomm's native Works (a call may take several, run in order) and
  every tensor they read or write, so the memory stays valid until they
  complete even if the caller drops the Work: the process group keeps its
  pending Works in a list until they complete.

Both subclass torch's ``Work``, so torch's C++ side (DDP's reducer) sees
them through its Python trampoline, which keeps the Python object alive for
as long as C++ holds it (torch >= 2.0's PyWorkHolder).

A failed operation's Work raises the error from ``wait()`` and
``get_future().wait()`` as the RuntimeError subclass meshcomm raised,
message unchanged.

Waiting, running the finisher once and holding the memory are
:class:`meshcomm._core.waiting.Pending`'s, as under the MindSpore-style
CommHandle; these classes add what torch asks of a Work.
"""

import threading
from datetime import timedelta

import torch
from torch._C._distributed_c10d import Work as _TorchWork

from .._core.waiting import Pending
from .tensors import ms

__all__ = ["DoneWork", "PendingWork"]


def _timeout_ms(timeout):
    """None (no limit of its own) for torch's default timeout of zero."""
    if timeout is None:
        return None
    return (ms(timeout) if isinstance(timeout, timedelta) else max(int(timeout), 0)) or None


def _unwrap(fut):
    return fut.wait()


class DoneWork(_TorchWork):
    """An operation that completed before the call that issued it returned."""

    def __init__(self, result):
        _TorchWork.__init__(self)
        self._result = result

    def wait(self, timeout=timedelta(0)):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def exception(self):
        return None

    def result(self):
        return self._result

    def get_future(self):
        fut = torch.futures.Future()
        fut.set_result(self._result)
        return fut

    def synchronize(self):
        pass


class PendingWork(_TorchWork):
    """An operation still running on meshcomm's executor.

    ``natives`` are meshcomm's Works of the call, in issue order; ``keep``
    every object whose memory they use; ``finish`` (may be None) runs once
    after all succeeded, before waiters return (it copies staged outputs
    back and finishes the reductions built in Python); ``complete_later(work,
    future)`` has the group's future thread complete ``future`` once the
    operation ends (get_future); ``failed(error)`` returns the error to
    raise for a failed operation (the group names itself in it and learns
    that it is broken).
    """

    def __init__(self, natives, result, keep, finish=None, complete_later=None, failed=None):
        super().__init__()
        self._op = Pending(natives, keep, finish, failed)
        self._complete_later = complete_later
        self._native = natives[-1]  # ends last: the group runs them in order
        self._result = result
        self._lock = threading.Lock()
        self._future = None
        if finish is not None and complete_later is not None:
            # Staged outputs are copied back even if nobody waits.
            self.get_future()

    def wait(self, timeout=timedelta(0)):
        ms = _timeout_ms(timeout)
        # Unbounded, the wait runs a still-queued operation on this thread
        # (as torch's own backends block in wait()).
        if not self._op.settle(ms, run_here=True):
            raise RuntimeError(f"meshcomm: {self._native.description}: Timed out waiting {ms} ms "
                               "for it to complete (the operation keeps running; wait again or "
                               "destroy the process group)")
        return True

    def is_completed(self):
        return self._op.ended()

    def is_success(self):
        return self._op.ended() and self._op.error is None

    def exception(self):
        return self._op.exception()

    def result(self):
        self.wait()
        return self._result

    def get_future(self):
        with self._lock:
            if self._future is None:
                done = torch.futures.Future()
                # Future.set_exception from Python stores the exception as the
                # future's value, which torch's C++ side (DDP's reducer) would
                # take for a result; an exception raised in a then() callback
                # becomes the future's error, which C++ sees as one.
                self._future = done.then(_unwrap)
                self._complete_later(self, done)
            return self._future

    def complete_future(self, fut):
        """Waits for the operation, then completes fut with its result or
        error (on the group's future thread)."""
        try:
            self._op.settle(None, run_here=True)
        except Exception as e:  # noqa: BLE001 - every error goes to the future's waiters
            fut.set_exception(e)
        else:
            fut.set_result(self._result)

    def synchronize(self):
        pass

    def _source_rank(self):
        """For a completed receive, the group rank that sent its message
        (what ``torch.distributed.recv`` without ``src`` returns)."""
        if not self.is_completed() or self._op.error is not None:
            raise RuntimeError(f"meshcomm: {self._native.description} has not completed "
                               "successfully, so it has no source rank")
        rank = self._native.source_rank
        if rank < 0:
            raise RuntimeError(f"meshcomm: {self._native.description} is not a receive, so it "
                               "has no source rank")
        return rank

    source_rank = _source_rank

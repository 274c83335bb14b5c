"""CommHandle: what an asynchronous call returns, and how synchronous calls
wait.

A handle owns the native Work of its operation and every object whose
memory the operation reads or writes. Those stay alive until the operation
completes, even if the handle is dropped without ``wait()``: the objects
are then parked in :mod:`meshcomm._state` until the core is done with them.

A synchronous call on an idle group runs on the calling thread, GIL
released. Ctrl-C still interrupts it within a few milliseconds: the native
waits run Python's signal handlers periodically, and when one raises
(KeyboardInterrupt) the operation is abandoned, its group aborted on every
rank, and the exception propagates. A synchronous call queued behind
asynchronous ones is waited on here instead, in 50 ms slices with a signal
check in between; Ctrl-C then ends only the wait, and the operation keeps
running (its buffers parked) until it completes or fails on its own.

The waiting and the parking are meshcomm._core.waiting's, shared with the
torch backend's Works; this module adds MindSpore's handle and its types.
"""

from datetime import timedelta

from . import _state
from ._core.waiting import Pending, wait_sync
from ._core.waiting import configure_wait  # noqa: F401 - still importable from here

_parked = _state._parked

__all__ = ["CommHandle"]

_MS = timedelta(milliseconds=1)


class CommHandle:
    """Handle of an asynchronous communication operation.

    Returned by calls made with ``async_op=True`` (and by ``isend``,
    ``irecv`` and ``batch_isend_irecv``). Output tensors hold their final
    values only after :meth:`wait` returns.

    Example:
        >>> x = np.ones([2, 8], np.float32)
        >>> handle = meshcomm.all_reduce(x, async_op=True)
        >>> handle.wait()
        True
        >>> x[0, 0]            # with 2 processes
        2.0
    """

    __slots__ = ("_op", "__weakref__")

    def __init__(self, work=None, keep=None):
        # meshcomm._core.waiting.Pending: the operation and its memory.
        self._op = None if work is None else Pending((work,), keep)

    def wait(self, timeout=None):
        """Wait until the operation completes on this rank.

        Args:
            timeout (datetime.timedelta, optional): give up waiting after
                this long (the operation continues). ``None`` (default)
                waits until the operation ends; it cannot outlive its own
                deadline, the group's timeout.

        Returns:
            bool: ``True`` once completed, ``False`` if `timeout` passed first.

        Raises:
            DistTimeoutError, DistPeerLostError, DistMismatchError, DistError:
                the operation failed (raised by every wait on it).
            KeyboardInterrupt: Ctrl-C while waiting.
        """
        timeout_ms = None
        if timeout is not None:
            if not isinstance(timeout, timedelta):
                raise TypeError("CommHandle.wait: 'timeout' must be a datetime.timedelta or "
                                f"None, got {type(timeout).__name__}")
            timeout_ms = max(0, -(-timeout // _MS))
        return self._op is None or self._op.settle(timeout_ms)

    def is_completed(self):
        """bool: whether the operation has finished (successfully or not)."""
        return self._op is None or self._op.ended()

    def exception(self):
        """The error that ended the operation, or ``None`` (also while it runs)."""
        return None if self._op is None else self._op.exception()

    def __repr__(self):
        if self._op is None:
            return "CommHandle(completed)"
        state = "completed" if self._op.ended() else "running"
        return f"CommHandle({self._op.natives[0].description}, {state})"

    def __del__(self):
        try:
            if self._op is not None:
                self._op.park()
        except Exception:  # interpreter shutdown: modules may be gone already
            pass


def finish(work, async_op, keep):
    """The return value of an in-place call: a handle, or None after waiting.
    Memory parked for operations that have ended since is released here."""
    if _parked:
        _state.prune()
    if async_op:
        return CommHandle(work, keep)
    wait_sync(work, keep)
    return None

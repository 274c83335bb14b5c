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
"""

import os
from datetime import timedelta

from . import _meshcomm, _state

__all__ = ["CommHandle"]

_MS = timedelta(milliseconds=1)

def configure_wait(machine_size):
    """Choose how long waits busy-poll before sleeping, as the native core
    does for its own waits: ``MESHCOMM_SPIN_US`` when set, else 50 us when
    each of the job's ``machine_size`` processes on this machine (the
    ``World``'s count, emulated hosts of one machine included) has two
    cores to itself (its waiting thread and its group's executor), else 0.
    Polling on a shared core only delays the thread that would complete the
    operation.
    """
    spin = os.environ.get("MESHCOMM_SPIN_US")
    if spin is not None and spin.strip().lstrip("-").isdigit():
        us = max(0, int(spin))
    else:
        us = 50 if 2 * machine_size <= (os.cpu_count() or 1) else 0
    _meshcomm.set_wait_spin_us(us)


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

    __slots__ = ("_work", "_keep", "__weakref__")

    def __init__(self, work=None, keep=None):
        self._work = work
        self._keep = keep

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
        work = self._work
        if work is None:
            return True
        try:
            done = work.wait(timeout_ms)
        except BaseException:
            if work.is_completed():
                self._keep = None
            raise
        if done:
            self._keep = None
        return done

    def is_completed(self):
        """bool: whether the operation has finished (successfully or not)."""
        return self._work is None or self._work.is_completed()

    def exception(self):
        """The error that ended the operation, or ``None`` (also while it runs)."""
        if self._work is None or not self._work.is_completed():
            return None
        try:
            self._work.rethrow()
        except Exception as e:  # returned, not raised
            return e
        return None

    def __repr__(self):
        if self._work is None:
            return "CommHandle(completed)"
        state = "completed" if self._work.is_completed() else "running"
        return f"CommHandle({self._work.description}, {state})"

    def __del__(self):
        work, keep = self._work, self._keep
        try:
            if work is not None and keep is not None and not work.is_completed():
                _state.park(work, keep)
        except Exception:  # interpreter shutdown: modules may be gone already
            pass


def finish(work, async_op, keep):
    """The return value of an in-place call: a handle, or None after waiting."""
    if async_op:
        return CommHandle(work, keep)
    wait_sync(work, keep)
    return None


def wait_sync(work, keep):
    """Wait for a synchronous call's operation, parking `keep` if interrupted."""
    try:
        work.wait()
    except BaseException:
        if not work.is_completed():
            _state.park(work, keep)
        raise

"""Waiting for native operations, and the memory they use meanwhile.

The native core holds raw pointers into the caller's tensors, so every
object whose memory an operation reads or writes stays alive until it
ends, whatever happens to the caller: a blocking call interrupted by Ctrl-C
(:func:`wait_sync`) or a handle dropped before its operation ended
(:meth:`Pending.park`) hands them to :mod:`meshcomm._state`, which keeps
them until the operation completes.

:class:`Pending` is one call's native Works (an operation built of several
runs them in order), the objects they use, and what runs once they all
succeeded (copying staged results back, finishing a reduction built in
Python). MindSpore-style CommHandles and the torch backend's PendingWorks
are each a thin wrapper of one.
"""

import os
import threading

from .. import _meshcomm, _state

__all__ = ["configure_wait", "wait_sync", "Pending"]


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


def wait_sync(work, keep):
    """Wait for a blocking submission's operation (it ran on this thread
    unless queued behind others); raises its error. Parks `keep` if the
    wait is interrupted (Ctrl-C) while the operation still runs."""
    try:
        work.wait()
    except BaseException:
        if not work.is_completed():
            _state.park(work, keep)
        raise


class Pending:
    """The native Works of one call, in issue order (the group runs them in
    that order, so the last ends last); `keep`, every object whose memory
    they use, released once they ended; `finish` (may be None), run once
    after all succeeded, before any waiter returns; `failed(error)`, the
    error to raise for a failed operation (None: the native error as is).
    An error is raised by every wait, the same object each time."""

    __slots__ = ("natives", "keep", "finish", "failed", "error", "done", "lock")

    def __init__(self, natives, keep, finish=None, failed=None):
        self.natives = natives
        self.keep = keep
        self.finish = finish
        self.failed = failed
        self.error = None
        self.done = False
        self.lock = threading.Lock()

    def settle(self, timeout_ms=None, run_here=False):
        """Waits up to `timeout_ms` per Work (None: the operations' own
        deadlines; with `run_here`, a still-queued operation then runs on
        this thread, as a blocking call's would). Returns whether the call
        ended; raises its error."""
        if not self.done:
            try:
                for native in self.natives:
                    if not (native.wait(None, run_here) if timeout_ms is None else
                            native.wait(timeout_ms)):
                        return False
            except Exception as e:  # noqa: BLE001 - the operation's error, for every waiter
                with self.lock:
                    if not self.done:
                        failed, self.failed = self.failed, None
                        self.error = failed(e) if failed is not None else e
                        self.done, self.keep = True, None
            else:
                with self.lock:
                    if not self.done:
                        finish, self.finish = self.finish, None
                        try:
                            if finish is not None:
                                finish()
                        except Exception as e:  # noqa: BLE001 - raised by every wait
                            self.error = e
                        self.done, self.keep = True, None
        if self.error is not None:
            raise self.error
        return True

    def ended(self):
        """Whether the call ended (settling it when its Works all did)."""
        if not self.done and all(n.is_completed() for n in self.natives):
            try:
                self.settle(0)
            except Exception:  # noqa: BLE001 - kept in self.error
                pass
        return self.done

    def exception(self):
        """The error that ended the call, or None (also while it runs)."""
        self.ended()
        return self.error

    def park(self):
        """The caller drops the call: `keep` waits in _state until it ends."""
        keep, last = self.keep, self.natives[-1]
        if keep is not None and not self.done and not last.is_completed():
            _state.park(last, keep)

"""How the meshcomm backend issues torch calls: the collective lane, the
point-to-point lane, and the Works that stand for queued operations.

Each torch group holds two meshcomm groups over the same ranks: the
collective lane runs collectives in issue order, and the point-to-point
lane runs sends and receives in theirs, so a receive never waits behind a
queued collective (rank 0 may issue an async all_reduce and then a send
that rank 1 receives before it joins the all_reduce, as on torch's gloo).
A call with ``asyncOp`` set is queued and returns a PendingWork at once; a
blocking call runs on the calling thread (meshcomm's blocking submission
runs an operation there when its group is idle) and returns a DoneWork.
Each lane has a thread that completes the futures of its Works
(``get_future``) as its operations end.
"""

import queue
import threading

from .._core.waiting import wait_sync
from .tensors import InvalidArgumentError, InvalidTypeError
from .work import DoneWork, PendingWork

__all__ = ["Issuing"]


class Issuing:
    """The issuing half of ProcessGroupMeshcomm (a mixin): it uses the
    group's ``_pg``/``_p2p`` meshcomm groups, ``_pending`` list and lock,
    ``_futures`` threads, ``_gate`` and torch group names, which the
    process group sets up."""

    def _track(self, work):
        with self._pending_lock:
            self._pending = [w for w in self._pending if not w._op.done and
                             not w._native.is_completed()]
            self._pending.append(work)
        return work

    def _completer(self, lane):
        """complete_later for the Works of one lane ("coll" or "p2p"): that
        lane's future thread completes a future when its work ends. A
        lane's operations end in issue order, so one thread waiting on them
        in turn completes each future as soon as it can be; the lanes have
        a thread each, so a receive waiting for its sender never holds
        back the future of a collective."""
        def complete_later(work, future):
            with self._pending_lock:
                entry = self._futures.get(lane)
                if entry is None:
                    q = queue.SimpleQueue()
                    thread = threading.Thread(target=_complete_futures, args=(q,),
                                              name=f"meshcomm-futures-{lane}", daemon=True)
                    thread.start()
                    entry = self._futures[lane] = (q, thread)
                entry[0].put((work, future))
        return complete_later

    def _start(self, opts, result, calls, finish=None, keep=()):
        """Issues one torch call: `calls`, (method, args) pairs of the
        collective lane run in order, then `finish` (copies staged outputs
        back, completes AVG and the bitwise reductions) once all succeeded.

        With ``opts.asyncOp`` every call is queued and a pending Work holding
        `keep` (every buffer the calls use) returns at once; otherwise they
        run on this thread and a completed Work returns."""
        if opts.asyncOp:
            natives = tuple(self._submit(method, args) for method, args in calls)
            return self._track(PendingWork(natives, result, keep, finish,
                                           self._completer("coll"), self._failed))
        for method, args in calls:
            self._run(method, args, keep)
        if finish is not None:
            finish()
        return DoneWork(result)

    def _start_p2p(self, result, method, args, keep, finish=None):
        """Queues one send or receive on the p2p lane; returns its pending Work."""
        native = self._issue(method, args)
        return self._track(PendingWork((native,), result, keep, finish, self._completer("p2p"),
                                       self._failed))

    def _run(self, method, args, keep):
        """Runs one blocking submission; returns once the operation is done.
        `keep`, the memory it uses, outlives an interrupted wait."""
        if self._gate is not None:
            self._gate.wait()
        try:
            work = method(*args, True)
        except (TypeError, ValueError) as e:
            raise _bad_input(e) from None
        except RuntimeError as e:
            raise self._failed(e) from None
        try:
            wait_sync(work, keep)  # raises the operation's error; waits only if it was queued
        except RuntimeError as e:
            raise self._failed(e) from None
        return work

    def _failed(self, error):
        """The error of a failed operation, naming the torch group too
        (meshcomm's own name for it is the same in every group: each torch
        group is a meshcomm job of its own). The group is broken now."""
        self._broken = True
        if self._torch_group_name and type(error).__module__.startswith("meshcomm"):
            where = f"torch.distributed group '{self._torch_group_name}'"
            if self._global_ranks:
                where += (f", whose ranks 0-{self._size - 1} are global ranks "
                          f"{', '.join(map(str, self._global_ranks))}")
            try:
                return type(error)(f"{error} ({where})")
            except TypeError:
                pass
        return error

    def _submit(self, method, args):
        """Queues one call of the collective lane; returns its native Work."""
        if self._gate is not None:
            self._gate.wait()
        return self._issue(method, args)

    def _issue(self, method, args):
        """Queues one call at once (the p2p lane, or a step of an operation
        issued in steps)."""
        try:
            return method(*args, False)
        except (TypeError, ValueError) as e:
            raise _bad_input(e) from None


def _bad_input(error):
    """What a submission's bad input raises here: the native core's (or
    the binding's) TypeError or ValueError as this backend's class."""
    if isinstance(error, RuntimeError):  # already one of ours
        return error
    cls = InvalidTypeError if isinstance(error, TypeError) else InvalidArgumentError
    return cls(str(error))


def _complete_futures(q):
    while True:
        item = q.get()
        if item is None:
            return
        work, future = item
        work.complete_future(future)

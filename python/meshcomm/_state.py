"""Process-wide state: the World this process joined, the names its groups
answer to, and the operations still using memory nobody else holds.

The world group answers to two names, ``"hccl_world_group"`` (what code
written for MindSpore on Ascend expects, and :data:`WORLD_COMM_GROUP`) and
``"mccl_world_group"`` (the native core's own name). Every function taking
a ``group`` accepts either, or ``None``.

Thread-safety: lookups are plain dict reads under the GIL; joining and
leaving the job take ``_lock``.
"""

import atexit
import os
import threading

from ._errors import DistError

__all__ = ["WORLD_COMM_GROUP", "WORLD_NAMES"]

#: The name ``new_group()`` returns for the world group.
WORLD_COMM_GROUP = "hccl_world_group"
#: Every name of the world group.
WORLD_NAMES = frozenset({"hccl_world_group", "mccl_world_group"})

_lock = threading.Lock()
_world = None     # _meshcomm.World once init_process_group has run
_backend = None   # the backend init_process_group was given
# group name -> native ProcessGroup, for the groups this rank belongs to.
_groups = {}
# (work, objects) of operations whose caller stopped waiting (an async
# handle dropped early, a wait interrupted by Ctrl-C): the objects stay
# here until the operation completes, so the core never writes into freed
# memory.
_parked = []


def is_initialized():
    return _world is not None


def world():
    """The native World; DistError before init_process_group."""
    w = _world
    if w is None:
        raise DistError("the default process group is not initialized; call "
                        "init_process_group() first")
    return w


def backend():
    return _backend


def lookup(name):
    """The native group called `name` (a str); DistError when there is none
    on this rank."""
    pg = _groups.get(name)
    if pg is not None:
        return pg
    w = world()
    pg = w.find_group(name)
    if pg is None:
        raise DistError(f"group '{name}' does not exist on this rank (world rank {w.rank}): "
                        "create it with new_group() on every member first")
    _groups[name] = pg
    return pg


def joined(world_handle, backend_name):
    """Record the World created by init_process_group."""
    global _world, _backend
    with _lock:
        _world = world_handle
        _backend = backend_name
        pg = world_handle.world_group()
        for name in WORLD_NAMES:
            _groups[name] = pg


def add_group(name, pg):
    _groups[name] = pg


def forget_group(name):
    """Drop Python's reference to a sub-group, so the native destroy frees it."""
    _groups.pop(name, None)


def leave():
    """Destroy every group and leave the job (no-op when not joined)."""
    global _world, _backend
    with _lock:
        w = _world
        _world = None
        _backend = None
        _groups.clear()
        if w is not None:
            try:
                _exit_barrier(w)
            finally:
                # Waits for queued operations, so parked memory is free after it.
                w.close()
        del _parked[:]


# How long leaving waits for the other ranks to leave too, unless
# MESHCOMM_SHUTDOWN_WAIT_MS says otherwise (it bounds the store host's wait
# in the C++ core as well).
_EXIT_BARRIER_MS = 30000


def _exit_barrier_ms():
    value = os.environ.get("MESHCOMM_SHUTDOWN_WAIT_MS", "").strip()
    try:
        return max(int(value), 1) if value else _EXIT_BARRIER_MS
    except ValueError:  # leaving is no place to fail: keep the default
        return _EXIT_BARRIER_MS


def _exit_barrier(w):
    """Best effort: wait until every rank is leaving before closing.

    A rank that closes its connections while a peer is still finishing
    the last operation with it can make that peer's operation fail (some
    transports report the closed connection as a lost peer even after the
    data arrived). Closing only once everyone has reached this barrier
    means no operation is in flight anymore. A failure here (a peer that
    died, left already, or is more than _exit_barrier_ms() late) is of no
    consequence to a rank on its way out.
    """
    try:
        if not w.closed:
            pg = w.world_group()
            pg.barrier(min(pg.timeout_ms, _exit_barrier_ms()), False).wait()
    except Exception:  # leaving anyway
        pass


def park(work, objects):
    """Keep `objects` alive until `work` completes."""
    prune()
    _parked.append((work, objects))


def prune():
    if _parked:
        _parked[:] = [entry for entry in _parked if not entry[0].is_completed()]


atexit.register(leave)

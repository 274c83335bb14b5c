"""Process-wide state: the World this process joined, the names its groups
answer to, and the operations still using memory nobody else holds.

The world group answers to two names, ``"hccl_world_group"`` (what code
written for MindSpore on Ascend expects, and :data:`WORLD_COMM_GROUP`) and
``"mccl_world_group"`` (MindSpore's name on CPU, which this API gives the
core's world group: its messages and flight-recorder records use it). Every
function taking a ``group`` accepts either, or ``None``. These names are
this API's alone: the C++ core and the torch backend call it ``"world"``.

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
#: The name the core's world group carries (the others are its aliases).
CORE_WORLD_NAME = "mccl_world_group"

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


def replace_world_group(pg):
    """Make `pg` (the world group shrunk to its survivors) the default group."""
    with _lock:
        for name in WORLD_NAMES:
            _groups[name] = pg


def add_group(name, pg):
    _groups[name] = pg


def forget_group(name):
    """Drop Python's reference to a sub-group, so the native destroy frees it."""
    _groups.pop(name, None)


def leave():
    """Destroy every group and leave the job (no-op when not joined).

    Local and prompt: it waits for nobody. The native core records in the
    store that this rank left on purpose before closing its connections,
    which end with an orderly close between messages, so data a peer
    already received stays valid and a peer that later needs this rank
    fails at once with an error saying it left the job.
    """
    global _world, _backend
    with _lock:
        w = _world
        _world = None
        _backend = None
        _groups.clear()
        if w is not None:
            # Waits for this rank's queued operations, so parked memory is
            # free after it.
            w.close()
        del _parked[:]


def park(work, objects):
    """Keep `objects` alive until `work` completes."""
    prune()
    _parked.append((work, objects))


def prune():
    if _parked:
        _parked[:] = [entry for entry in _parked if not entry[0].is_completed()]


atexit.register(leave)

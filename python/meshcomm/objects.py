"""Collectives on picklable Python objects: all_gather_object,
broadcast_object_list, gather_object, scatter_object_list.

Objects travel as pickles: the sender pickles with the standard pickler;
receivers unpickle with a restricted unpickler that resolves no global
except a few harmless builtins (``range``, ``complex``, ``set``,
``frozenset``, ``slice``, ``bytearray``). Plain data (None, bools, numbers,
str, bytes, lists, tuples, dicts and the sets) round-trips; anything that
names a class or function (numpy arrays, dataclasses, ``os.system``) is
refused with ``pickle.UnpicklingError`` before any of it runs, so a
malicious peer cannot execute code here. A refused object leaves the
caller's list unchanged.

Each call runs two native collectives (sizes, then the padded bytes) and
waits for both; these functions are synchronous and in place only.
"""

import builtins
import io
import pickle

import numpy as np

from . import _checks, _state
from ._checks import group_name, integer, type_name
from ._core.waiting import wait_sync
from .inplace import require_inplace

__all__ = ["all_gather_object", "broadcast_object_list", "gather_object",
           "scatter_object_list", "restricted_loads"]

SAFE_BUILTINS = frozenset({"range", "complex", "set", "frozenset", "slice", "bytearray"})


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module == "builtins" and name in SAFE_BUILTINS:
            return getattr(builtins, name)
        raise pickle.UnpicklingError(f"refusing to load global '{module}.{name}': object "
                                     "collectives only carry plain data")


def restricted_loads(data):
    """pickle.loads that resolves only :data:`SAFE_BUILTINS`."""
    return _RestrictedUnpickler(io.BytesIO(data)).load()


def _desc(array):
    return _checks.tensor(array, "object collective", "buffer", True)[0]


def _run(work, *keep):
    wait_sync(work, keep)


def _rooted(name, rank, fn, arg):
    """(native group, root's group rank, whether this rank is the root)."""
    pg = _state.lookup(name)
    root = _checks.group_rank(pg, rank, fn, arg)
    return pg, root, pg.rank == root


def _check_per_rank(value, pg, fn, arg):
    """TypeError unless `value` is a list with one entry per rank of `pg`."""
    if not isinstance(value, list) or len(value) != pg.size:
        raise TypeError(f"{fn}: '{arg}' must be a list with one entry per rank of the group "
                        f"({pg.size}), got {_describe_list(value)}")


def _gather_sizes(pg, nbytes):
    """Every rank's payload size, by group rank."""
    mine = np.array([nbytes], dtype=np.int64)
    sizes = np.zeros(pg.size, dtype=np.int64)
    _run(pg.all_gather_into_tensor(_desc(sizes), _desc(mine), 0, False), mine, sizes)
    return sizes


def _padded(data, length):
    buf = np.zeros(max(int(length), 1), dtype=np.uint8)
    buf[:len(data)] = np.frombuffer(data, dtype=np.uint8)
    return buf


def _unpickle_all(buf, sizes, stride=None):
    """Objects from consecutive (or `stride`-spaced) slices of buf."""
    out, offset = [], 0
    raw = buf.tobytes()
    for i, size in enumerate(sizes):
        start = i * stride if stride is not None else offset
        out.append(restricted_loads(raw[start:start + int(size)]))
        offset += int(size)
    return out


def all_gather_object(object_list, obj, group=None):
    """Every rank receives every rank's `obj`: ``object_list[r]`` becomes
    rank r's.

    Args:
        object_list (list): output, one entry per rank of `group`.
        obj: this rank's picklable object.
        group (str, optional): the group; ``None`` (default) is the world.

    Raises:
        ValueError: in non-in-place mode.
        TypeError: `group` is not a str; `object_list` is not a list of the
            group's size.
        pickle.UnpicklingError: some rank's object names a global other than
            the safe builtins.

    Example (2 processes):
        >>> objs = [None, None]
        >>> meshcomm.all_gather_object(objs, ["test", {1: 2}][meshcomm.get_rank()])
        >>> objs
        ['test', {1: 2}]
    """
    fn = "all_gather_object"
    require_inplace(fn)
    name = group_name(group, fn)
    pg = _state.lookup(name)
    _check_per_rank(object_list, pg, fn, "object_list")
    data = pickle.dumps(obj)
    sizes = _gather_sizes(pg, len(data))
    stride = max(int(sizes.max()), 1)
    mine = _padded(data, stride)
    everyone = np.zeros(stride * pg.size, dtype=np.uint8)
    _run(pg.all_gather_into_tensor(_desc(everyone), _desc(mine), 0, False), everyone, mine)
    object_list[:] = _unpickle_all(everyone, sizes, stride)


def broadcast_object_list(object_list, src=0, group=None, device=None):
    """Replace `object_list`'s entries on every rank by rank `src`'s.

    Args:
        object_list (list): at `src`, the objects; elsewhere a list of the
            same length, overwritten.
        src (int, optional): world rank that sends. Default 0.
        group (str, optional): the group; ``None`` (default) is the world.
        device: accepted and ignored.

    Raises:
        ValueError: in non-in-place mode; `src` not in `group`.
        TypeError: `group` is not a str; `src` is not an int; `object_list`
            is not a non-empty list.
        pickle.UnpicklingError: an object names a global other than the
            safe builtins (on the receivers).

    Example (2 processes):
        >>> objs = ["test", 12, {1: 2}] if meshcomm.get_rank() == 0 else [None] * 3
        >>> meshcomm.broadcast_object_list(objs)
        >>> objs
        ['test', 12, {1: 2}]
    """
    fn = "broadcast_object_list"
    require_inplace(fn)
    name = group_name(group, fn)
    integer(src, fn, "src")
    if not isinstance(object_list, list) or not object_list:
        raise TypeError(f"{fn}: 'object_list' must be a non-empty list, got "
                        f"{_describe_list(object_list)}")
    pg, root, is_root = _rooted(name, src, fn, "src")
    pickles = [pickle.dumps(o) for o in object_list] if is_root else []
    sizes = np.array([len(p) for p in pickles] if is_root else [0] * len(object_list),
                     dtype=np.int64)
    _run(pg.broadcast(_desc(sizes), root, 0, False), sizes)
    total = int(sizes.sum())
    payload = _padded(b"".join(pickles), total) if is_root else np.zeros(max(total, 1), np.uint8)
    _run(pg.broadcast(_desc(payload), root, 0, False), payload)
    if not is_root:
        object_list[:] = _unpickle_all(payload, sizes)


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    """Rank `dst` receives every rank's `obj`: ``object_gather_list[r]``
    becomes rank r's.

    Args:
        obj: this rank's picklable object.
        object_gather_list (list, optional): at `dst`, one entry per rank of
            `group`; ignored elsewhere. Default None.
        dst (int, optional): world rank that receives. Default 0.
        group (str, optional): the group; ``None`` (default) is the world.

    Raises:
        ValueError: in non-in-place mode; `dst` not in `group`.
        TypeError: `group` is not a str; `dst` is not an int; at `dst`,
            `object_gather_list` is not a list of the group's size.
        pickle.UnpicklingError: at `dst`, an object names a global other than
            the safe builtins.

    Example (2 processes):
        >>> objs = [None, None]
        >>> meshcomm.gather_object(["test", {1: 2}][meshcomm.get_rank()], objs)
        >>> objs                   # on rank 0
        ['test', {1: 2}]
    """
    fn = "gather_object"
    require_inplace(fn)
    name = group_name(group, fn)
    integer(dst, fn, "dst")
    pg, root, is_root = _rooted(name, dst, fn, "dst")
    if is_root:
        _check_per_rank(object_gather_list, pg, fn, "object_gather_list")
    data = pickle.dumps(obj)
    sizes = _gather_sizes(pg, len(data))
    stride = max(int(sizes.max()), 1)
    mine = _padded(data, stride)
    everyone = np.zeros(stride * pg.size if is_root else 1, dtype=np.uint8)
    _run(pg.gather_into_tensor(_desc(everyone), _desc(mine), root, 0, False), everyone, mine)
    if is_root:
        object_gather_list[:] = _unpickle_all(everyone, sizes, stride)


def scatter_object_list(scatter_object_output_list, scatter_object_input_list, src=0,
                        group=None):
    """Rank r receives rank `src`'s ``scatter_object_input_list[r]`` as
    ``scatter_object_output_list[0]``.

    Args:
        scatter_object_output_list (list): non-empty; its first entry is
            replaced.
        scatter_object_input_list (list): at `src`, one object per rank of
            `group`; ignored elsewhere.
        src (int, optional): world rank that sends. Default 0.
        group (str, optional): the group; ``None`` (default) is the world.

    Raises:
        ValueError: in non-in-place mode; `src` not in `group`.
        TypeError: `group` is not a str; the output list is empty or not a
            list; `src` is not an int; at `src`, the input list is not a list
            of the group's size.
        pickle.UnpicklingError: this rank's object names a global other than
            the safe builtins.

    Example (2 processes):
        >>> out = [None]
        >>> meshcomm.scatter_object_list(out, ["test", {1: 2}])
        >>> out                    # rank 0: ['test'], rank 1: [{1: 2}]
    """
    fn = "scatter_object_list"
    require_inplace(fn)
    name = group_name(group, fn)
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise TypeError(f"{fn}: 'scatter_object_output_list' must be a non-empty list, got "
                        f"{_describe_list(scatter_object_output_list)}")
    integer(src, fn, "src")
    pg, root, is_root = _rooted(name, src, fn, "src")
    if is_root:
        _check_per_rank(scatter_object_input_list, pg, fn, "scatter_object_input_list")
    pickles = [pickle.dumps(o) for o in scatter_object_input_list] if is_root else []
    sizes = np.array([len(p) for p in pickles] if is_root else [0] * pg.size, dtype=np.int64)
    _run(pg.broadcast(_desc(sizes), root, 0, False), sizes)
    stride = max(int(sizes.max()), 1)
    if is_root:
        payload = np.concatenate([_padded(p, stride) for p in pickles])
    else:
        payload = np.zeros(1, dtype=np.uint8)
    mine = np.zeros(stride, dtype=np.uint8)
    _run(pg.scatter_tensor(_desc(mine), _desc(payload), root, 0, False), mine, payload)
    scatter_object_output_list[0] = restricted_loads(mine.tobytes()[:int(sizes[pg.rank])])


def _describe_list(value):
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return type_name(value)

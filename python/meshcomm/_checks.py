"""Argument checks shared by the communication functions.

Every check runs before any communication. Messages name the function and
the argument; the exception types are MindSpore's (TypeError for a wrong
type and, as MindSpore does, for a bad ``op`` value or list length;
ValueError for values the core cannot use). The checks the torch backend
makes too are :mod:`meshcomm._core.checks`'s, given these types.
"""

import numpy as np

from . import _meshcomm, _state
from ._core import descriptors as _tensor
from ._core.checks import equal_rows as _equal_rows, per_rank, row_elements, rows, split_counts
from .reduce_op import CODES as _OP_CODES

_ndarray = np.ndarray
_describe = _meshcomm.describe_buffer

ALL_OPS = ("sum", "prod", "min", "max")
#: The native operations: name -> what each takes beyond its tensors
#: (``reduces``, ``root`` as "src"/"dst"/None, ``split_sizes``, ``tagged``).
OPERATIONS = _meshcomm.OPERATIONS


def type_name(value):
    return type(value).__name__


def group_name(group, fn):
    """The group's name: None means the world group."""
    if group is None:
        return _state.WORLD_COMM_GROUP
    if not isinstance(group, str):
        raise TypeError(f"{fn}: 'group' must be a str or None, got {type_name(group)}")
    return group


def async_flag(async_op, fn):
    if not isinstance(async_op, bool):
        raise TypeError(f"{fn}: 'async_op' must be a bool, got {type_name(async_op)}")


def group_of(group, async_op, fn):
    """The native group a call runs on, once `group` and `async_op` passed
    their checks; DistError when the group does not exist on this rank."""
    name = group_name(group, fn)
    async_flag(async_op, fn)
    return _state.lookup(name)


def rooted_group(group, async_op, rank, fn):
    """(native group, root's group rank) of a rooted operation: checks the
    root argument (named as the operation table names it, src or dst),
    `group` and `async_op`, then that the root is a member of the group."""
    arg = OPERATIONS[fn]["root"]
    integer(rank, fn, arg)
    pg = group_of(group, async_op, fn)
    return pg, group_rank(pg, rank, fn, arg)


def reduce_op(op, fn, allowed=ALL_OPS):
    """The native code of a reduction name (or ReduceOp member)."""
    if type(op) is str and allowed is ALL_OPS:
        code = _OP_CODES.get(op)
        if code is not None:
            return code
    if not isinstance(op, str):
        raise TypeError(f"{fn}: 'op' must be a str such as ReduceOp.SUM, got {type_name(op)}")
    if op not in allowed:
        raise TypeError(f"{fn}: 'op' must be one of {', '.join(allowed)}, got {op!r}")
    return _OP_CODES[op]


def integer(value, fn, name):
    # bool is an int subclass, but rank=True is a mistake, not rank 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{fn}: '{name}' must be an int, got {type_name(value)}")


def tensor(obj, fn, name, writable=False):
    """(descriptor, keep) of a tensor argument."""
    if type(obj) is _ndarray:
        # The common case; any problem is reported by the general path.
        try:
            return _describe(obj, writable), obj
        except (TypeError, ValueError):
            pass
    try:
        return _tensor.ref(obj, writable)
    except TypeError as e:
        raise TypeError(f"{fn}: '{name}': {e}") from None
    except ValueError as e:
        raise ValueError(f"{fn}: '{name}': {e}") from None


def is_tensor(obj, fn, name):
    if not _tensor.is_tensor(obj):
        raise TypeError(f"{fn}: '{name}' must be a tensor (numpy array, torch CPU tensor, "
                        f"meshcomm.bfloat16, DLPack or buffer object), got {type_name(obj)}")


def tensor_list(objs, fn, name, same_shape=False):
    """Checks a list/tuple of tensors: type, and equal dtypes (and shapes)."""
    if not isinstance(objs, (list, tuple)):
        raise TypeError(f"{fn}: '{name}' must be a list or tuple of tensors, got "
                        f"{type_name(objs)}")
    first_dtype = first_shape = None
    for i, t in enumerate(objs):
        is_tensor(t, fn, f"{name}[{i}]")
        dtype = _tensor.dtype_of(t)
        if i == 0:
            first_dtype, first_shape = dtype, _tensor.shape_of(t) if same_shape else None
            continue
        if dtype != first_dtype:
            raise TypeError(f"{fn}: the tensors in '{name}' must share one dtype, got "
                            f"{first_dtype} and {dtype}")
        if same_shape and _tensor.shape_of(t) != first_shape:
            raise TypeError(f"{fn}: the tensors in '{name}' must share one shape, got "
                            f"{first_shape} and {_tensor.shape_of(t)}")


def list_length(objs, size, fn, name):
    per_rank(len(objs), size, fn, name, TypeError)


def same_as(t, ref, fn, name, ref_name):
    """TypeError unless tensor t has ref's dtype and shape."""
    if _tensor.dtype_of(t) != _tensor.dtype_of(ref):
        raise TypeError(f"{fn}: '{name}' and '{ref_name}' must have the same dtype, got "
                        f"{_tensor.dtype_of(t)} and {_tensor.dtype_of(ref)}")
    if _tensor.shape_of(t) != _tensor.shape_of(ref):
        raise TypeError(f"{fn}: '{name}' and '{ref_name}' must have the same shape, got "
                        f"{_tensor.shape_of(t)} and {_tensor.shape_of(ref)}")


def group_rank(pg, global_rank, fn, name):
    """The group rank of a world rank; ValueError for non-members."""
    r = pg.to_group_rank(global_rank)
    if r < 0:
        raise ValueError(f"{fn}: {name}={global_rank} is not a member of group '{pg.name}' "
                         f"(world ranks {list(pg.world_ranks)})")
    return r


def equal_rows(total, n, fn, what, condition=""):
    return _equal_rows(total, n, fn, what, ValueError, condition)


def root_list(objs, like, pg, fn, name, writable):
    """(descriptor, keep) of each tensor of `objs`, the per-rank list (named
    `name`) that gather and scatter use at their root: one tensor per rank
    of `pg`, each of the dtype and shape of `like` (named "tensor")."""
    list_length(objs, pg.size, fn, name)
    same_as(like, objs[0], fn, "tensor", f"{name}[0]")
    return [tensor(t, fn, f"{name}[{i}]", writable) for i, t in enumerate(objs)]


def split_sizes(sizes, fn, name):
    """The types of an optional list of per-rank row counts (their values
    are :func:`meshcomm._core.checks.split_counts`'s); returns a list or None."""
    if sizes is None:
        return None
    if not isinstance(sizes, (list, tuple)):
        raise TypeError(f"{fn}: '{name}' must be a list or tuple of ints, got {type_name(sizes)}")
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, int):
            raise TypeError(f"{fn}: '{name}' must hold ints, got {type_name(s)}")
    return list(sizes) or None

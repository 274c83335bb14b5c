"""In-place versus non-in-place mode of the communication functions.

In place (the default for every function), results are written into the
tensors the caller passes, and a call returns a :class:`CommHandle` when
``async_op=True`` and ``None`` otherwise. Out of place, the functions that
support it (``all_reduce``, ``all_gather_into_tensor``,
``reduce_scatter_tensor``, ``all_to_all``, ``all_to_all_single``, ``recv``
and ``irecv``) leave their tensor arguments alone and return new tensors,
as ``(result, handle)``; the others raise ``ValueError`` in that mode.
``send``, ``isend``, ``barrier`` and ``all_to_all_v_c`` behave the same in
both modes.

The mode is process-wide, kept per function name.
"""

from . import _meshcomm

__all__ = ["set_comm_ops_inplace", "COMM_FUNCS"]

#: Names whose mode set_comm_ops_inplace can change: every communication
#: function, that is the native operations (the operation table, in its
#: order) and those composed of them in Python.
COMM_FUNCS = tuple(_meshcomm.OPERATIONS) + (
    "isend", "irecv", "all_to_all_v_c", "all_gather_object", "broadcast_object_list",
    "gather_object", "scatter_object_list",
)

_enabled = dict.fromkeys(COMM_FUNCS, True)


def set_comm_ops_inplace(is_enable, func_list=None):
    """Switch communication functions between in-place and non-in-place mode.

    Args:
        is_enable (bool): ``True`` for in place (the default of every
            function), ``False`` for non-in-place.
        func_list (Union[list[str], tuple[str]], optional): the function
            names to switch; ``None`` (default) switches all of them.

    Raises:
        TypeError: `is_enable` is not a bool, or `func_list` is neither None
            nor a list/tuple.
        ValueError: a name in `func_list` is not a communication function
            (nothing is changed then).

    Example:
        >>> meshcomm.set_comm_ops_inplace(False, ["all_reduce"])
        >>> out, handle = meshcomm.all_reduce(x)   # x is left unchanged
        >>> meshcomm.set_comm_ops_inplace(True)
    """
    if not isinstance(is_enable, bool):
        raise TypeError("set_comm_ops_inplace: 'is_enable' must be a bool, got "
                        f"{type(is_enable).__name__}")
    if func_list is None:
        for name in _enabled:
            _enabled[name] = is_enable
        return
    if not isinstance(func_list, (list, tuple)):
        raise TypeError("set_comm_ops_inplace: 'func_list' must be a list or tuple of "
                        f"function names, got {type(func_list).__name__}")
    for name in func_list:
        if not isinstance(name, str) or name not in _enabled:
            raise ValueError(f"set_comm_ops_inplace: {name!r} is not a communication function; "
                             f"valid names: {', '.join(COMM_FUNCS)}")
    for name in func_list:
        _enabled[name] = is_enable


def is_inplace(name):
    """Whether function `name` runs in place."""
    return _enabled[name]


def require_inplace(name):
    """Raise the ValueError of functions that only run in place."""
    if not _enabled[name]:
        raise ValueError(f"{name} only runs in place; non-in-place mode (set_comm_ops_inplace"
                         f"(False)) is not supported for it")

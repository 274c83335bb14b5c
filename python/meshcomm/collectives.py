"""Reductions, broadcast and barrier.

Conventions shared by every communication function:

* ``group`` is a group name (None: the world group); ``src``/``dst`` are
  world ranks, translated to ranks within ``group``;
* synchronous calls (``async_op=False``, the default) return once the
  operation has completed on this rank; asynchronous ones return a
  :class:`~meshcomm.CommHandle` whose ``wait()`` does that;
* in place (the default, see :func:`~meshcomm.set_comm_ops_inplace`) a call
  returns the handle or ``None``; out of place, ``(result, handle)``;
* every argument is checked before any communication: TypeError for wrong
  types (and, as in MindSpore, for a bad ``op`` or list length),
  ValueError for values that cannot work (sizes, ranks), DistError when
  the process group or the named group does not exist on this rank.
  Failures while communicating raise DistTimeoutError, DistPeerLostError or
  DistMismatchError.
"""

import warnings

import numpy as np

from . import _checks, _state
from ._core import descriptors as _tensor
from ._checks import async_flag, group_name, group_of, integer, reduce_op, rooted_group
from ._core.waiting import wait_sync
from .handle import CommHandle, finish
from .inplace import _enabled, require_inplace
from .reduce_op import CODES as _OP_CODES, ReduceOp

__all__ = ["all_reduce", "reduce", "broadcast", "barrier", "reduce_scatter_tensor",
           "reduce_scatter_tensor_uneven", "reduce_scatter"]

_lookup = _state.lookup
_ref = _checks.tensor
_rows = _checks.rows
_parked = _state._parked
_WORLD = _state.WORLD_COMM_GROUP
_ndarray = np.ndarray
_groups_get = _state._groups.get
_op_codes_get = _OP_CODES.get


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `tensor` over every rank of `group`; every rank gets the result.

    Args:
        tensor (Tensor): input; in place, also the output.
        op (str, optional): ``"sum"`` (default), ``"prod"``, ``"min"`` or
            ``"max"`` (or the ReduceOp member).
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        In place: CommHandle when `async_op`, else None. Out of place:
        ``(result, handle)``, `result` a new tensor of `tensor`'s shape.

    Raises:
        TypeError: `tensor` is not a tensor; `op` is not one of the four;
            `group` is not a str; `async_op` is not a bool.
        ValueError: the tensor is not contiguous or (in place) read-only;
            min/max of a complex dtype.

    Example (2 processes):
        >>> x = np.ones([2, 8], np.float32)
        >>> meshcomm.all_reduce(x)
        >>> x[0]
        array([2., 2., 2., 2., 2., 2., 2., 2.], dtype=float32)
    """
    # The most frequent call: kept to the minimum of Python work.
    fn = "all_reduce"
    inplace = _enabled[fn]
    # A numpy array goes to the native core as it is (it reads the buffer).
    fast = inplace and type(tensor) is _ndarray
    if not fast:
        if inplace:
            desc, keep = _ref(tensor, fn, "tensor", True)
        else:
            _checks.is_tensor(tensor, fn, "tensor")
    code = _op_codes_get(op) if type(op) is str else None
    if code is None:
        code = reduce_op(op, fn)
    name = _WORLD if group is None else group_name(group, fn)
    if async_op is not False and async_op is not True:
        async_flag(async_op, fn)
    pg = _groups_get(name) or _lookup(name)
    if _parked:
        _state.prune()
    if inplace:
        blocking = not async_op
        if fast:
            keep = tensor
            try:
                work = pg.all_reduce(tensor, code, 0, blocking)
            except (TypeError, ValueError):
                # Either a tensor the general path explains (or handles,
                # like ml_dtypes' bfloat16), or an error it raises again.
                desc, keep = _ref(tensor, fn, "tensor", True)
                work = pg.all_reduce(desc, code, 0, blocking)
        else:
            work = pg.all_reduce(desc, code, 0, blocking)
        if async_op:
            return CommHandle(work, keep)
        wait_sync(work, keep)
        return None
    out = _tensor.copy_of(tensor)
    desc, keep = _ref(out, fn, "tensor", True)
    return out, finish(pg.all_reduce(desc, code, 0, not async_op), async_op, keep)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `tensor` over `group` into rank `dst`'s `tensor`; the other
    ranks' tensors are left unchanged. In place only.

    Args:
        tensor (Tensor): input, and output at `dst`.
        dst (int): world rank that receives the result.
        op (str, optional): reduction, default ``"sum"``.
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        CommHandle when `async_op`, else None.

    Raises:
        ValueError: in non-in-place mode; `dst` not in `group`; bad tensor.
        TypeError: bad `tensor`, `dst`, `op`, `group` or `async_op`.

    Example (2 processes):
        >>> x = np.ones([2, 8], np.float32)
        >>> meshcomm.reduce(x, dst=1)
        >>> x[0, 0]                # 1.0 on rank 0, 2.0 on rank 1
    """
    fn = "reduce"
    require_inplace(fn)
    _checks.is_tensor(tensor, fn, "tensor")
    integer(dst, fn, "dst")
    code = reduce_op(op, fn)
    pg = group_of(group, async_op, fn)
    root = _checks.group_rank(pg, dst, fn, "dst")
    desc, keep = _ref(tensor, fn, "tensor", pg.rank == root)
    return finish(pg.reduce(desc, code, root, 0, not async_op), async_op, keep)


def broadcast(tensor, src, group=None, async_op=False):
    """Copy rank `src`'s `tensor` into `tensor` on every rank of `group`.
    In place only.

    Args:
        tensor (Tensor): the data at `src`, the output elsewhere; same
            shape and dtype on every rank.
        src (int): world rank that sends.
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        CommHandle when `async_op`, else None.

    Raises:
        ValueError: in non-in-place mode; `src` not in `group`; bad tensor.
        TypeError: bad `tensor`, `src`, `group` or `async_op`.

    Example (2 processes):
        >>> x = np.arange(8, dtype=np.float32).reshape(2, 4) * (meshcomm.get_rank() == 0)
        >>> meshcomm.broadcast(x, src=0)
        >>> x
        array([[0., 1., 2., 3.],
               [4., 5., 6., 7.]], dtype=float32)
    """
    fn = "broadcast"
    require_inplace(fn)
    _checks.is_tensor(tensor, fn, "tensor")
    pg, root = rooted_group(group, async_op, src, fn)
    desc, keep = _ref(tensor, fn, "tensor", pg.rank != root)
    return finish(pg.broadcast(desc, root, 0, not async_op), async_op, keep)


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of `group` has called barrier.

    Args:
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.
        device_ids: accepted and ignored (with a warning when set).

    Returns:
        CommHandle when `async_op`, else None.

    Raises:
        TypeError: `group` is not a str or `async_op` not a bool.

    Example:
        >>> meshcomm.barrier()
        >>> print("barrier finish!")
        barrier finish!
    """
    fn = "barrier"
    pg = group_of(group, async_op, fn)
    if device_ids is not None:
        warnings.warn(f"{fn}: 'device_ids' is ignored (meshcomm runs on CPUs)", UserWarning,
                      stacklevel=2)
    return finish(pg.barrier(0, not async_op), async_op, None)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `input` over `group`, then give rank r the r-th of ``size``
    equal first-dimension blocks of the result.

    Args:
        output (Tensor): in place, receives this rank's block, shape
            ``(N / size, *)``; ignored out of place.
        input (Tensor): shape ``(N, *)``, N divisible by the group size.
        op (str, optional): reduction, default ``"sum"``.
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        In place: CommHandle or None. Out of place: ``(result, handle)``.

    Raises:
        TypeError: a tensor argument is not a tensor; bad `op`, `group` or
            `async_op`.
        ValueError: N is not divisible by the group size; `output` does not
            hold one block.

    Example (2 processes):
        >>> out = np.ones([4, 8], np.float32)
        >>> meshcomm.reduce_scatter_tensor(out, np.ones([8, 8], np.float32))
        >>> out[0, 0]
        2.0
    """
    fn = "reduce_scatter_tensor"
    inplace = _enabled[fn]
    _checks.is_tensor(input, fn, "input")
    if inplace:
        _checks.is_tensor(output, fn, "output")
    code = reduce_op(op, fn)
    pg = group_of(group, async_op, fn)
    shape = _tensor.shape_of(input)
    block = _checks.equal_rows(_rows(shape), pg.size, fn, "'input'")
    in_desc, in_keep = _ref(input, fn, "input")
    if inplace:
        result = None
        out_desc, out_keep = _ref(output, fn, "output", True)
    else:
        result = _tensor.empty_like(input, (block,) + tuple(shape[1:]))
        out_desc, out_keep = _ref(result, fn, "output", True)
    work = pg.reduce_scatter_tensor(out_desc, in_desc, code, 0, not async_op)
    h = finish(work, async_op, (out_keep, in_keep))
    return h if inplace else (result, h)


def reduce_scatter_tensor_uneven(output, input, input_split_sizes=None, op=ReduceOp.SUM,
                                 group=None, async_op=False):
    """Like :func:`reduce_scatter_tensor` with blocks of
    ``input_split_sizes[r]`` first-dimension rows for rank r. In place only.

    Args:
        output (Tensor): receives this rank's block, shape
            ``(input_split_sizes[rank], *)``.
        input (Tensor): shape ``(sum(input_split_sizes), *)``, the same on
            every rank.
        input_split_sizes (list[int], optional): rows per rank; ``None``
            (default) or empty splits evenly.
        op (str, optional): ``"sum"`` (default), ``"min"`` or ``"max"``
            (``"prod"`` is refused, as in MindSpore).
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        CommHandle when `async_op`, else None.

    Raises:
        ValueError: in non-in-place mode; sizes that do not match `input`
            or `output`.
        TypeError: bad tensors, sizes, `op`, `group` or `async_op`.

    Example (2 processes):
        >>> out = np.ones([2, 8] if meshcomm.get_rank() == 0 else [3, 8], np.float32)
        >>> meshcomm.reduce_scatter_tensor_uneven(out, np.ones([5, 8], np.float32), [2, 3])
        >>> out[0, 0]
        2.0
    """
    fn = "reduce_scatter_tensor_uneven"
    require_inplace(fn)
    code = reduce_op(op, fn, ("sum", "min", "max"))
    _checks.is_tensor(output, fn, "output")
    _checks.is_tensor(input, fn, "input")
    pg = group_of(group, async_op, fn)
    sizes = _checks.split_sizes(input_split_sizes, fn, "input_split_sizes")
    counts = _checks.split_counts(sizes, _tensor.shape_of(input), pg.size, fn,
                                  "input_split_sizes", "'input'", ValueError)
    out_desc, out_keep = _ref(output, fn, "output", True)
    in_desc, in_keep = _ref(input, fn, "input")
    work = pg.reduce_scatter_tensor_uneven(out_desc, in_desc, counts, code, 0, not async_op)
    return finish(work, async_op, (out_keep, in_keep))


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Rank r receives the reduction over ranks of their ``input_list[r]``.
    In place only.

    Args:
        output (Tensor): receives the result; shape and dtype of the inputs.
        input_list (list[Tensor]): one tensor per rank of `group`, all of
            one dtype and shape.
        op (str, optional): reduction, default ``"sum"``.
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        CommHandle when `async_op`, else None.

    Raises:
        ValueError: in non-in-place mode.
        TypeError: `input_list` is not a list of tensors of one dtype or has
            the wrong length; `output`'s shape or dtype differs from the
            inputs'; bad `op`, `group` or `async_op`.

    Example (2 processes):
        >>> out = np.zeros([4, 8], np.float32)
        >>> meshcomm.reduce_scatter(out, [np.ones([4, 8], np.float32)] * 2)
        >>> out[0, 0]
        2.0
    """
    fn = "reduce_scatter"
    require_inplace(fn)
    _checks.tensor_list(input_list, fn, "input_list")
    _checks.is_tensor(output, fn, "output")
    pg = group_of(group, async_op, fn)
    code = reduce_op(op, fn)
    _checks.list_length(input_list, pg.size, fn, "input_list")
    _checks.same_as(output, input_list[pg.rank], fn, "output", f"input_list[{pg.rank}]")
    out_desc, out_keep = _ref(output, fn, "output", True)
    refs = [_ref(t, fn, f"input_list[{i}]") for i, t in enumerate(input_list)]
    work = pg.reduce_scatter(out_desc, [d for d, _ in refs], code, 0, not async_op)
    return finish(work, async_op, (out_keep, [k for _, k in refs]))

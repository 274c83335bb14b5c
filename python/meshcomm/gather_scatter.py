"""Gathers and scatters: all_gather*, gather*, scatter*.

See :mod:`meshcomm.collectives` for the conventions every communication
function follows (groups, world ranks, sync/async, in-place mode, errors).
"""

from . import _checks
from ._core import descriptors as _tensor
from ._checks import group_of, rooted_group
from .handle import finish
from .inplace import _enabled, require_inplace

__all__ = ["all_gather_into_tensor", "all_gather_into_tensor_uneven", "all_gather",
           "gather_into_tensor", "gather", "scatter_tensor", "scatter"]

_ref = _checks.tensor
_rows = _checks.rows


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Concatenate every rank's `input_tensor` along the first dimension,
    in rank order, on every rank.

    Args:
        output_tensor (Tensor): in place, receives the result, shape
            ``(size * x_1, x_2, ...)``; ignored out of place.
        input_tensor (Tensor): shape ``(x_1, x_2, ...)``, the same on every rank.
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        In place: CommHandle or None. Out of place: ``(result, handle)``,
        `result` of shape ``(size * x_1, x_2, ...)``.

    Raises:
        TypeError: a tensor argument is not a tensor; bad `group` or `async_op`.
        ValueError: `output_tensor` does not hold ``size`` inputs.

    Example (2 processes):
        >>> out = np.zeros([4, 8], np.float32)
        >>> meshcomm.all_gather_into_tensor(out, np.ones([2, 8], np.float32))
        >>> out.sum()
        32.0
    """
    fn = "all_gather_into_tensor"
    inplace = _enabled[fn]
    _checks.is_tensor(input_tensor, fn, "input_tensor")
    if inplace:
        _checks.is_tensor(output_tensor, fn, "output_tensor")
    pg = group_of(group, async_op, fn)
    in_desc, in_keep = _ref(input_tensor, fn, "input_tensor")
    if inplace:
        result = None
        out_desc, out_keep = _ref(output_tensor, fn, "output_tensor", True)
    else:
        shape = _tensor.shape_of(input_tensor)
        result = _tensor.empty_like(input_tensor, (pg.size * _rows(shape),) + tuple(shape[1:]))
        out_desc, out_keep = _ref(result, fn, "output_tensor", True)
    work = pg.all_gather_into_tensor(out_desc, in_desc, 0, not async_op)
    h = finish(work, async_op, (out_keep, in_keep))
    return h if inplace else (result, h)


def all_gather_into_tensor_uneven(output, input, output_split_sizes=None, group=None,
                                  async_op=False):
    """Like :func:`all_gather_into_tensor` with ``output_split_sizes[r]``
    first-dimension rows from rank r. In place only.

    Args:
        output (Tensor): shape ``(sum(output_split_sizes), x_2, ...)``.
        input (Tensor): shape ``(output_split_sizes[rank], x_2, ...)``.
        output_split_sizes (list[int], optional): rows from each rank;
            ``None`` (default) or empty means equal sizes.
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        CommHandle when `async_op`, else None.

    Raises:
        ValueError: in non-in-place mode; `input` or `output` does not match
            `output_split_sizes`.
        TypeError: bad tensors, sizes, `group` or `async_op`.

    Example (2 processes):
        >>> x = np.ones([3, 4] if meshcomm.get_rank() == 0 else [2, 4], np.float32)
        >>> out = np.zeros([5, 4], np.float32)
        >>> meshcomm.all_gather_into_tensor_uneven(out, x, [3, 2])
        >>> out.sum()
        20.0
    """
    fn = "all_gather_into_tensor_uneven"
    require_inplace(fn)
    _checks.is_tensor(output, fn, "output")
    _checks.is_tensor(input, fn, "input")
    pg = group_of(group, async_op, fn)
    sizes = _checks.split_sizes(output_split_sizes, fn, "output_split_sizes")
    out_desc, out_keep = _ref(output, fn, "output", True)
    in_desc, in_keep = _ref(input, fn, "input")
    if sizes is None:
        work = pg.all_gather_into_tensor(out_desc, in_desc, 0, not async_op)
        return finish(work, async_op, (out_keep, in_keep))
    counts = _checks.split_counts(sizes, _tensor.shape_of(output), pg.size, fn,
                                  "output_split_sizes", "'output'", ValueError)
    in_rows = _rows(_tensor.shape_of(input))
    if sizes[pg.rank] != in_rows:
        raise ValueError(f"{fn}: 'output_split_sizes[{pg.rank}]' is {sizes[pg.rank]} but this "
                         f"rank's input has {in_rows} rows")
    work = pg.all_gather_into_tensor_uneven(out_desc, in_desc, counts, 0, not async_op)
    return finish(work, async_op, (out_keep, in_keep))


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Every rank receives every rank's `tensor`: ``tensor_list[r]`` gets
    rank r's. In place only.

    Args:
        tensor_list (list[Tensor]): one output per rank of `group`, each of
            `tensor`'s shape and dtype.
        tensor (Tensor): this rank's input.
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        CommHandle when `async_op`, else None.

    Raises:
        ValueError: in non-in-place mode.
        TypeError: `tensor_list` is not a list of tensors of one dtype, has
            the wrong length, or its entries differ from `tensor` in shape or
            dtype; bad `tensor`, `group` or `async_op`.

    Example (2 processes):
        >>> outs = [np.zeros([2, 8], np.float32) for _ in range(2)]
        >>> meshcomm.all_gather(outs, np.ones([2, 8], np.float32))
        >>> outs[1][0, 0]
        1.0
    """
    fn = "all_gather"
    require_inplace(fn)
    _checks.tensor_list(tensor_list, fn, "tensor_list")
    _checks.is_tensor(tensor, fn, "tensor")
    pg = group_of(group, async_op, fn)
    _checks.list_length(tensor_list, pg.size, fn, "tensor_list")
    _checks.same_as(tensor, tensor_list[pg.rank], fn, "tensor", f"tensor_list[{pg.rank}]")
    in_desc, in_keep = _ref(tensor, fn, "tensor")
    refs = [_ref(t, fn, f"tensor_list[{i}]", True) for i, t in enumerate(tensor_list)]
    work = pg.all_gather([d for d, _ in refs], in_desc, 0, not async_op)
    return finish(work, async_op, (in_keep, [k for _, k in refs]))


def gather_into_tensor(output_tensor, input_tensor, dst=0, group=None, async_op=False):
    """Concatenate every rank's `input_tensor` along the first dimension into
    `output_tensor` on rank `dst`; other ranks' outputs are left alone.
    In place only.

    Args:
        output_tensor (Tensor): at `dst`, shape ``(size * x_1, x_2, ...)``.
        input_tensor (Tensor): shape ``(x_1, x_2, ...)``, the same everywhere.
        dst (int, optional): world rank that receives. Default 0.
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        CommHandle when `async_op`, else None.

    Raises:
        ValueError: in non-in-place mode; `dst` not in `group`; at `dst`,
            an output of the wrong size.
        TypeError: bad tensors, `dst`, `group` or `async_op`.

    Example (2 processes):
        >>> out = np.zeros([4, 2], np.float32)
        >>> meshcomm.gather_into_tensor(out, np.arange(4, dtype=np.float32).reshape(2, 2))
        >>> out[2]                 # on rank 0; rank 1's out stays zero
        array([0., 1.], dtype=float32)
    """
    fn = "gather_into_tensor"
    require_inplace(fn)
    _checks.is_tensor(input_tensor, fn, "input_tensor")
    _checks.is_tensor(output_tensor, fn, "output_tensor")
    pg, root = rooted_group(group, async_op, dst, fn)
    in_desc, in_keep = _ref(input_tensor, fn, "input_tensor")
    out_desc, out_keep = _ref(output_tensor, fn, "output_tensor", pg.rank == root)
    work = pg.gather_into_tensor(out_desc, in_desc, root, 0, not async_op)
    return finish(work, async_op, (out_keep, in_keep))


# gather and scatter mirror each other, and so do their docstrings: the
# sections between summary and example are this text in each one's words.
_ROOT_LIST_SECTIONS = """\
    Args:
        tensor (Tensor): {tensor}
        {name} (list[Tensor]): at `{root}`, one {each} per rank, each of
            `tensor`'s shape and dtype; elsewhere any list of tensors of one
            dtype and shape (``[]`` will do), {elsewhere}.
        {root} (int, optional): world rank that {verb}. Default 0.
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        CommHandle when `async_op`, else None.

    Raises:
        ValueError: in non-in-place mode; `{root}` not in `group`.
        TypeError: `{name}` is not a list of tensors of one dtype and
            shape; at `{root}`, its length or its tensors' shape/dtype is wrong;
            bad `tensor`, `{root}`, `group` or `async_op`."""


def _root_list_doc(**words):
    """Puts _ROOT_LIST_SECTIONS, in `words`, at the ``{sections}`` line of
    the decorated function's docstring."""
    sections = _ROOT_LIST_SECTIONS.format(**words).lstrip()

    def fill(func):
        if func.__doc__ is not None:  # None under python -OO
            func.__doc__ = func.__doc__.replace("{sections}", sections)
        return func
    return fill


@_root_list_doc(tensor="this rank's input.", name="gather_list", root="dst", each="output",
                elsewhere="left alone", verb="receives")
def gather(tensor, gather_list, dst=0, group=None, async_op=False):
    """Rank `dst` receives every rank's `tensor`: ``gather_list[r]`` gets
    rank r's. In place only.

    {sections}

    Example (2 processes):
        >>> outs = [np.zeros([2, 2], np.float32) for _ in range(2)]
        >>> meshcomm.gather(np.arange(4, dtype=np.float32).reshape(2, 2), outs, dst=0)
        >>> outs[1][1]             # on rank 0
        array([2., 3.], dtype=float32)
    """
    fn = "gather"
    require_inplace(fn)
    _checks.is_tensor(tensor, fn, "tensor")
    _checks.tensor_list(gather_list, fn, "gather_list", same_shape=True)
    pg, root = rooted_group(group, async_op, dst, fn)
    refs = []
    if pg.rank == root:
        refs = _checks.root_list(gather_list, tensor, pg, fn, "gather_list", True)
    in_desc, in_keep = _ref(tensor, fn, "tensor")
    work = pg.gather([d for d, _ in refs], in_desc, root, 0, not async_op)
    return finish(work, async_op, (in_keep, [k for _, k in refs]))


def scatter_tensor(output_tensor, input_tensor, src=0, group=None, async_op=False):
    """Split rank `src`'s `input_tensor` into ``size`` equal first-dimension
    blocks; rank r receives block r in `output_tensor`. In place only.

    Args:
        output_tensor (Tensor): receives this rank's block, the same size on
            every rank.
        input_tensor (Tensor): at `src`, shape ``(size * x_1, x_2, ...)``;
            read nowhere else.
        src (int, optional): world rank that sends. Default 0.
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        CommHandle when `async_op`, else None.

    Raises:
        ValueError: in non-in-place mode; `src` not in `group`; at `src`, an
            input of the wrong size.
        TypeError: bad tensors, `src`, `group` or `async_op`.

    Example (2 processes):
        >>> out = np.zeros([2, 2], np.float32)
        >>> meshcomm.scatter_tensor(out, np.arange(8, dtype=np.float32).reshape(4, 2), src=0)
        >>> out                    # on rank 1
        array([[4., 5.],
               [6., 7.]], dtype=float32)
    """
    fn = "scatter_tensor"
    require_inplace(fn)
    _checks.is_tensor(input_tensor, fn, "input_tensor")
    _checks.is_tensor(output_tensor, fn, "output_tensor")
    pg, root = rooted_group(group, async_op, src, fn)
    out_desc, out_keep = _ref(output_tensor, fn, "output_tensor", True)
    in_desc, in_keep = _ref(input_tensor, fn, "input_tensor")
    work = pg.scatter_tensor(out_desc, in_desc, root, 0, not async_op)
    return finish(work, async_op, (out_keep, in_keep))


@_root_list_doc(tensor="receives this rank's part.", name="scatter_list", root="src",
                each="tensor", elsewhere="not read", verb="sends")
def scatter(tensor, scatter_list, src=0, group=None, async_op=False):
    """Rank r receives rank `src`'s ``scatter_list[r]`` in `tensor`.
    In place only.

    {sections}

    Example (2 processes):
        >>> out = np.zeros([2, 2], np.float32)
        >>> meshcomm.scatter(out, [np.ones([2, 2], np.float32)] * 2, src=0)
        >>> out
        array([[1., 1.],
               [1., 1.]], dtype=float32)
    """
    fn = "scatter"
    require_inplace(fn)
    _checks.tensor_list(scatter_list, fn, "scatter_list", same_shape=True)
    _checks.is_tensor(tensor, fn, "tensor")
    pg, root = rooted_group(group, async_op, src, fn)
    refs = []
    if pg.rank == root:
        refs = _checks.root_list(scatter_list, tensor, pg, fn, "scatter_list", False)
    out_desc, out_keep = _ref(tensor, fn, "tensor", True)
    work = pg.scatter(out_desc, [d for d, _ in refs], root, 0, not async_op)
    return finish(work, async_op, (out_keep, [k for _, k in refs]))

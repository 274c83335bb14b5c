"""All-to-all exchanges: all_to_all, all_to_all_single, all_to_all_v_c.

Split sizes are counted in first-dimension rows, as in MindSpore; the
native core counts elements (rows times the size of one row).

See :mod:`meshcomm.collectives` for the conventions every communication
function follows (groups, world ranks, sync/async, in-place mode, errors).
"""

from . import _checks, _state
from ._core import descriptors as _tensor
from ._checks import async_flag, group_name, group_of, type_name
from .handle import finish
from .inplace import _enabled

__all__ = ["all_to_all", "all_to_all_single", "all_to_all_v_c"]

_lookup = _state.lookup
_ref = _checks.tensor
_rows = _checks.rows


def _is_shape(value):
    return isinstance(value, (tuple, list)) and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """Rank r sends ``input_tensor_list[j]`` to rank j, and receives rank j's
    ``input_tensor_list[r]`` in ``output_tensor_list[j]``. Sizes may differ
    from pair to pair, but must agree between sender and receiver.

    Args:
        output_tensor_list (list): in place, one tensor per rank receiving
            that rank's data (the inputs' dtype); out of place, tensors or
            shapes (tuples of ints) saying what each rank sends here.
        input_tensor_list (list[Tensor]): one tensor per rank, of one dtype.
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        In place: CommHandle or None. Out of place: ``(results, handle)``,
        `results` a tuple of new tensors.

    Raises:
        TypeError: a list is not a list of tensors (or, out of place, of
            tensors and shapes) of one dtype; bad `group` or `async_op`.
        ValueError: a list's length is not the group size; output and input
            dtypes differ.

    Example (2 processes, rank 0):
        >>> sends = [np.array(1., np.float32), np.array([[2, 3], [4, 5]], np.float32)]
        >>> recvs = [np.array(0., np.float32), np.zeros(2, np.float32)]
        >>> meshcomm.all_to_all(recvs, sends)   # rank 1 sends [2., 2.] here
        >>> recvs[1]
        array([2., 2.], dtype=float32)
    """
    fn = "all_to_all"
    name = group_name(group, fn)
    async_flag(async_op, fn)
    _checks.tensor_list(input_tensor_list, fn, "input_tensor_list")
    inplace = _enabled[fn]
    results = None
    if inplace:
        _checks.tensor_list(output_tensor_list, fn, "output_tensor_list")
        outputs = output_tensor_list
    else:
        if not isinstance(output_tensor_list, (list, tuple)):
            raise TypeError(f"{fn}: 'output_tensor_list' must be a list or tuple of tensors or "
                            f"shapes, got {type_name(output_tensor_list)}")
        if not input_tensor_list:
            raise ValueError(f"{fn}: 'input_tensor_list' is empty")
        template = input_tensor_list[0]
        results = []
        for i, item in enumerate(output_tensor_list):
            if _tensor.is_tensor(item):
                shape = _tensor.shape_of(item)
            elif _is_shape(item):
                shape = tuple(item)
            else:
                raise TypeError(f"{fn}: 'output_tensor_list[{i}]' must be a tensor or a shape, "
                                f"got {type_name(item)}")
            results.append(_tensor.empty_like(template, shape))
        outputs = results
    pg = _lookup(name)
    ins = [_ref(t, fn, f"input_tensor_list[{i}]") for i, t in enumerate(input_tensor_list)]
    outs = [_ref(t, fn, f"output_tensor_list[{i}]", True) for i, t in enumerate(outputs)]
    work = pg.all_to_all([d for d, _ in outs], [d for d, _ in ins], 0, not async_op)
    h = finish(work, async_op, ([k for _, k in outs], [k for _, k in ins]))
    return h if inplace else (tuple(results), h)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    """Rank r sends the j-th first-dimension block of `input`
    (``input_split_sizes[j]`` rows) to rank j, and receives rank j's block
    for it as the j-th block of `output` (``output_split_sizes[j]`` rows).

    Args:
        output (Tensor): in place, receives the blocks; out of place, a
            tensor or a shape (tuple of ints) whose trailing dimensions, and
            first dimension when `output_split_sizes` is not given, describe
            the result.
        input (Tensor): the blocks to send.
        output_split_sizes (list[int], optional): rows received from each
            rank; ``None`` (default) or empty: equal blocks.
        input_split_sizes (list[int], optional): rows sent to each rank;
            ``None`` (default) or empty: equal blocks.
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        In place: CommHandle or None. Out of place: ``(result, handle)``,
        `result` of shape ``(sum(output_split_sizes), *output.shape[1:])``.

    Raises:
        TypeError: `input` (or, in place, `output`) is not a tensor; split
            sizes are not lists of ints; bad `group` or `async_op`.
        ValueError: without split sizes, a first dimension is not divisible by
            the group size; split sizes that do not add up to the tensors.

    Example (2 processes, rank 1):
        >>> out = np.zeros([2, 3], np.float32)
        >>> x = np.array([[9, 10, 11], [12, 13, 14]], np.float32)
        >>> meshcomm.all_to_all_single(out, x, [1, 1], [1, 1])
        >>> out                    # rank 0 sent its third row here
        array([[ 6.,  7.,  8.],
               [12., 13., 14.]], dtype=float32)
    """
    fn = "all_to_all_single"
    inplace = _enabled[fn]
    _checks.is_tensor(input, fn, "input")
    if inplace or not _is_shape(output):
        _checks.is_tensor(output, fn, "output")
    pg = group_of(group, async_op, fn)
    out_sizes = _checks.split_sizes(output_split_sizes, fn, "output_split_sizes")
    in_sizes = _checks.split_sizes(input_split_sizes, fn, "input_split_sizes")
    out_shape = tuple(output) if _is_shape(output) else _tensor.shape_of(output)
    recv = _checks.split_counts(out_sizes, out_shape, pg.size, fn, "output_split_sizes",
                                "'output'", ValueError, whole=inplace)
    send = _checks.split_counts(in_sizes, _tensor.shape_of(input), pg.size, fn,
                                "input_split_sizes", "'input'", ValueError)
    result = None
    if inplace:
        target = output
    else:
        out_rows = sum(out_sizes) if out_sizes else _rows(out_shape)
        result = _tensor.empty_like(input, (out_rows,) + tuple(out_shape[1:]))
        target = result
    in_desc, in_keep = _ref(input, fn, "input")
    out_desc, out_keep = _ref(target, fn, "output", True)
    work = pg.all_to_all_single(out_desc, in_desc, recv, send, 0, not async_op)
    h = finish(work, async_op, (out_keep, in_keep))
    return h if inplace else (result, h)


def all_to_all_v_c(output, input, send_count_matrix, group=None, async_op=False):
    """An all-to-all whose sizes come from one matrix every rank passes:
    ``send_count_matrix[i * size + j]`` first-dimension rows go from rank i
    to rank j. Rank r's `input` holds its rows for ranks 0, 1, ... in order;
    its `output` receives the rows from ranks 0, 1, ... in order. Always in
    place.

    Args:
        output (Tensor): receives at least ``sum_i M[i * size + r]`` rows.
        input (Tensor): holds at least ``sum_j M[r * size + j]`` rows.
        send_count_matrix (list[int]): the ``size * size`` row counts.
        group (str, optional): the group; ``None`` (default) is the world.
        async_op (bool, optional): return a handle at once. Default False.

    Returns:
        CommHandle when `async_op`, else None.

    Raises:
        TypeError: `input` or `output` is not a tensor; the matrix is not a
            list of ``size * size`` ints; bad `group` or `async_op`.
        ValueError: negative counts, or more rows than a tensor holds.

    Example (2 processes):
        >>> out = np.zeros(3, np.float32)
        >>> x = np.array([0, 1, 2], np.float32) * meshcomm.get_rank()
        >>> meshcomm.all_to_all_v_c(out, x, [0, 3, 3, 0])
        >>> out                    # rank 0: [0. 1. 2.], rank 1: [0. 0. 0.]
    """
    fn = "all_to_all_v_c"
    _checks.is_tensor(input, fn, "input")
    _checks.is_tensor(output, fn, "output")
    name = group_name(group, fn)
    async_flag(async_op, fn)
    if not isinstance(send_count_matrix, list):
        raise TypeError(f"{fn}: 'send_count_matrix' must be a list of ints, got "
                        f"{type_name(send_count_matrix)}")
    for c in send_count_matrix:
        if isinstance(c, bool) or not isinstance(c, int):
            raise TypeError(f"{fn}: 'send_count_matrix' must hold ints, got {type_name(c)}")
    pg = _lookup(name)
    n, me = pg.size, pg.rank
    if len(send_count_matrix) != n * n:
        raise TypeError(f"{fn}: 'send_count_matrix' must hold size * size = {n * n} counts, "
                        f"got {len(send_count_matrix)}")
    if any(c < 0 for c in send_count_matrix):
        raise ValueError(f"{fn}: 'send_count_matrix' must not hold negative counts")
    in_shape, out_shape = _tensor.shape_of(input), _tensor.shape_of(output)
    send_rows = send_count_matrix[me * n:(me + 1) * n]
    recv_rows = send_count_matrix[me::n]
    for rows, shape, what in ((send_rows, in_shape, "input"), (recv_rows, out_shape, "output")):
        if sum(rows) > _rows(shape):
            raise ValueError(f"{fn}: the matrix puts {sum(rows)} rows in '{what}', which has "
                             f"{_rows(shape)}")
    send = [r * _checks.row_elements(in_shape) for r in send_rows]
    recv = [r * _checks.row_elements(out_shape) for r in recv_rows]
    (in_addr, _, in_dtype), in_keep = _ref(input, fn, "input")
    (out_addr, _, out_dtype), out_keep = _ref(output, fn, "output", True)
    # Only the leading rows the matrix names take part.
    work = pg.all_to_all_single((out_addr, sum(recv), out_dtype), (in_addr, sum(send), in_dtype),
                                recv, send, 0, not async_op)
    return finish(work, async_op, (out_keep, in_keep))

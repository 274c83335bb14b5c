"""Point-to-point communication: send, recv, isend, irecv, and batches of
them (P2POp, batch_isend_irecv).

Peers are world ranks, translated to ranks within `group`. A receive
matches the send from the same peer with the same tag, in the order both
were issued; shapes and dtypes must agree.
"""

from . import _checks, _state
from ._checks import group_name, integer, type_name
from ._core import descriptors as _tensor
from ._core.waiting import wait_sync
from .handle import CommHandle, finish
from .inplace import _enabled, require_inplace

__all__ = ["send", "recv", "isend", "irecv", "P2POp", "batch_isend_irecv"]

_ref = _checks.tensor


def _peer(pg, rank, fn, name):
    return _checks.group_rank(pg, rank, fn, name)


def _send(fn, tensor, dst, group, tag, async_op):
    _checks.is_tensor(tensor, fn, "tensor")
    integer(dst, fn, "dst")
    name = group_name(group, fn)
    integer(tag, fn, "tag")
    pg = _state.lookup(name)  # the native core refuses dst = this rank (ValueError)
    peer = _peer(pg, dst, fn, "dst")
    desc, keep = _ref(tensor, fn, "tensor")
    return finish(pg.send(desc, peer, tag, 0, not async_op), async_op, keep)


def _recv(fn, tensor, src, group, tag, async_op):
    _checks.is_tensor(tensor, fn, "tensor")
    integer(src, fn, "src")
    name = group_name(group, fn)
    integer(tag, fn, "tag")
    pg = _state.lookup(name)
    peer = _peer(pg, src, fn, "src")
    inplace = _enabled[fn]
    target = tensor if inplace else _tensor.empty_like(tensor, _tensor.shape_of(tensor))
    desc, keep = _ref(target, fn, "tensor", True)
    _state.prune()
    work = pg.recv(desc, peer, tag, 0, not async_op)
    if async_op:
        h = CommHandle(work, keep)
        return h if inplace else (target, h)
    wait_sync(work, keep)
    return 0 if inplace else target


def send(tensor, dst=0, group=None, tag=0):
    """Send `tensor` to rank `dst`; returns once it has been handed over.

    Args:
        tensor (Tensor): the data.
        dst (int, optional): world rank of the receiver. Default 0.
        group (str, optional): the group; ``None`` (default) is the world.
        tag (int, optional): matches the receive with the same tag. Default 0.

    Raises:
        TypeError: bad `tensor`, `dst`, `group` or `tag`.
        ValueError: `dst` is this process's rank or not a member of `group`.

    Example (2 processes):
        >>> if meshcomm.get_rank() == 0:
        ...     meshcomm.send(np.ones([2, 8], np.float32), 1)
        ... else:
        ...     x = np.zeros([2, 8], np.float32)
        ...     meshcomm.recv(x, src=0)
    """
    _send("send", tensor, dst, group, tag, False)


def isend(tensor, dst=0, group=None, tag=0):
    """Like :func:`send`, but returns a CommHandle at once; `tensor` must not
    change until its ``wait()`` returns.

    Example (2 processes):
        >>> handle = meshcomm.isend(np.ones([2, 8], np.float32), 1)   # on rank 0
        >>> handle.wait()
        True
    """
    return _send("isend", tensor, dst, group, tag, True)


def recv(tensor, src=0, group=None, tag=0):
    """Receive from rank `src` into `tensor` (in place) or into a new tensor
    of `tensor`'s shape and dtype (out of place).

    Args:
        tensor (Tensor): the destination, or a template out of place.
        src (int, optional): world rank of the sender. Default 0.
        group (str, optional): the group; ``None`` (default) is the world.
        tag (int, optional): matches the send with the same tag. Default 0.

    Returns:
        In place: 0. Out of place: the received tensor.

    Raises:
        TypeError: bad `tensor`, `src`, `group` or `tag`.
        ValueError: `src` is this process's rank or not a member of `group`;
            the tensor is read-only.

    Example (2 processes, rank 1):
        >>> x = np.zeros([2, 8], np.float32)
        >>> meshcomm.recv(x, src=0)
        0
    """
    return _recv("recv", tensor, src, group, tag, False)


def irecv(tensor, src=0, group=None, tag=0):
    """Like :func:`recv`, but returns at once: a CommHandle in place,
    ``(tensor, handle)`` out of place; the data is there after ``wait()``.

    Example (2 processes, rank 1):
        >>> x = np.zeros([2, 8], np.float32)
        >>> handle = meshcomm.irecv(x, src=0)
        >>> handle.wait()
        True
    """
    return _recv("irecv", tensor, src, group, tag, True)


class P2POp:
    """One send or receive of a :func:`batch_isend_irecv` batch.

    Args:
        op (Union[str, function]): ``"isend"``/``"irecv"`` or the functions
            :func:`isend`/:func:`irecv`.
        tensor (Tensor): data to send, or the destination of a receive
            (written in place).
        peer (int): world rank of the other side.
        group (str, optional): the group; ``None`` (default) is the world.
        tag (int, optional): must be 0 (tags in batches are not supported).

    Raises:
        TypeError: `op` is none of those; `tensor` is not a tensor; `peer` is
            not an int.
        NotImplementedError: `tag` is not 0.

    Example:
        >>> send_op = meshcomm.P2POp("isend", np.ones(2, np.float32), 1)
        >>> recv_op = meshcomm.P2POp(meshcomm.irecv, np.zeros(2, np.float32), 1)
    """

    def __new__(cls, op, tensor, peer, group=None, tag=0):
        if isinstance(op, str):
            if op not in ("isend", "irecv"):
                raise TypeError(f"P2POp: 'op' must be 'isend' or 'irecv', got {op!r}")
        elif op is not isend and op is not irecv:
            raise TypeError(f"P2POp: 'op' must be 'isend', 'irecv' or those functions, got {op!r}")
        if not _tensor.is_tensor(tensor):
            raise TypeError(f"P2POp: 'tensor' must be a tensor, got {type_name(tensor)}")
        if isinstance(peer, bool) or not isinstance(peer, int):
            raise TypeError(f"P2POp: 'peer' must be an int, got {type_name(peer)}")
        if tag != 0:
            raise NotImplementedError("P2POp: tags other than 0 are not supported")
        return object.__new__(cls)

    def __init__(self, op, tensor, peer, group=None, tag=0):
        self.op = op
        self.tensor = tensor
        self.peer = peer
        self.group = group
        self.tag = tag

    @property
    def is_send(self):
        name = self.op if isinstance(self.op, str) else self.op.__name__
        return name == "isend"

    def __repr__(self):
        kind = "isend" if self.is_send else "irecv"
        return f"P2POp({kind!r}, peer={self.peer}, group={self.group!r})"


def batch_isend_irecv(p2p_op_list):
    """Start every send and receive of the list; they progress together, so
    their order cannot deadlock. In place only.

    Args:
        p2p_op_list (list[P2POp]): the operations, all on one group.

    Returns:
        list[CommHandle]: one handle for the whole batch.

    Raises:
        ValueError: in non-in-place mode; a peer that is this process or not
            a member of the group.
        TypeError: the list is empty or holds something other than P2POp;
            the operations name different groups.

    Example (2 processes):
        >>> me, n = meshcomm.get_rank(), meshcomm.get_world_size()
        >>> recv = np.array(0., np.float32)
        >>> ops = [meshcomm.P2POp("isend", np.array(me + 1., np.float32), (me + 1) % n),
        ...        meshcomm.P2POp("irecv", recv, (me - 1) % n)]
        >>> for h in meshcomm.batch_isend_irecv(ops): h.wait()
        >>> recv                   # rank 0: 2.0, rank 1: 1.0
    """
    fn = "batch_isend_irecv"
    require_inplace(fn)
    if not isinstance(p2p_op_list, (list, tuple)) or not p2p_op_list:
        raise TypeError(f"{fn}: 'p2p_op_list' must be a non-empty list of P2POp")
    for p in p2p_op_list:
        if not isinstance(p, P2POp):
            raise TypeError(f"{fn}: 'p2p_op_list' must hold P2POp objects, got {type_name(p)}")
    group = p2p_op_list[0].group
    for p in p2p_op_list:
        if p.group != group:
            raise TypeError(f"{fn}: every P2POp must use one group, got {group!r} and "
                            f"{p.group!r}")
    pg = _state.lookup(group_name(group, fn))
    ops, keep = [], []
    for i, p in enumerate(p2p_op_list):
        peer = _peer(pg, p.peer, fn, f"p2p_op_list[{i}].peer")
        desc, k = _ref(p.tensor, fn, f"p2p_op_list[{i}].tensor", not p.is_send)
        ops.append((p.is_send, desc, peer, p.tag))
        keep.append(k)
    _state.prune()
    return [CommHandle(pg.batch_isend_irecv(ops, 0, False), keep)]

"""Surviving the loss of a rank: aborting a group, asking why it broke,
and shrinking it to the ranks that are left.

A rank that dies (``kill -9``, a crash, a lost host) makes every operation
of its groups fail on the other members within a fraction of a second,
with :class:`DistPeerLostError`. The group is then broken: every later
operation on it raises that same error at once (:func:`group_error` returns
it). The survivors continue by calling :func:`shrink_group`, which agrees
through the store on who is left and builds a new group of them::

    while step < steps:
        try:
            train_step(group)
            step += 1
        except meshcomm.DistError:
            group = meshcomm.shrink_group(group)   # every survivor calls it
            rescale_for(meshcomm.get_world_size(group))

docs/fault-tolerance.md has a complete training loop, what is and is not
guaranteed, and how this compares with ULFM, NCCL and torch.
"""

from datetime import timedelta

from . import _state
from ._checks import group_name, type_name

__all__ = ["abort", "group_error", "shrink_group"]


def _resolve(group, fn):
    name = group_name(group, fn)
    return name, _state.lookup(name)


def abort(group=None):
    """Abort a group on this rank, or (``None``, the default, or the world
    group) every group of this rank.

    Callable from any thread, also while another thread is blocked in an
    operation on the group: that operation raises :class:`DistAbortedError`
    within milliseconds, every later operation on the group raises it at
    once, and the members blocked with this rank fail within a second with
    an error saying this rank aborted the group; so does every call a member
    makes on it once the abort has reached it (:func:`group_error` then
    returns the error). Safe to call twice. The
    group's resources are freed by :func:`destroy_process_group` (or by
    :func:`shrink_group`, which replaces it).

    Args:
        group (str, optional): the group; ``None`` (default) aborts all.

    Raises:
        TypeError: `group` is not a str or None.
        DistError: before init_process_group, or no such group on this rank.

    Example:
        >>> threading.Timer(60, meshcomm.abort).start()   # a watchdog
        >>> meshcomm.all_reduce(x)    # raises DistAbortedError if still blocked at 60 s
    """
    if group is None or group in _state.WORLD_NAMES:
        _state.world().abort()
        return
    _resolve(group, "abort")[1].abort()


def group_error(group=None):
    """Why a group is broken, or None while it is healthy.

    After a peer loss, a timeout, a mismatch or an abort, the group keeps the
    error that broke it, and every later operation on it raises that error
    at once. This returns it (a new instance of the same class with the same
    message) without communicating.

    Args:
        group (str, optional): the group; ``None`` (default) is the world.

    Raises:
        TypeError: `group` is not a str or None.
        DistError: before init_process_group, or no such group on this rank.

    Example:
        >>> meshcomm.group_error() is None
        True
    """
    return _resolve(group, "group_error")[1].error()


def shrink_group(group=None, exclude_ranks=None, timeout=None):
    """Replace a group with a new one made of its surviving members.

    Collective over the survivors: every member still alive calls it (a
    member blocked in an operation joins once that operation fails). They
    agree through the store on one member set: the members that call it,
    minus those known dead or gone, minus `exclude_ranks`, minus those that
    do not call it within `timeout`. Members are renumbered in the order of
    their world ranks. The old group is aborted and destroyed on the
    survivors; a member left out but alive gets an error from its next
    operation on it.

    Shrinking the world group (``group=None``) makes the new group the
    default group: ``group=None`` and the world group's names then mean it,
    and :func:`get_rank`/:func:`get_world_size` describe it. Ranks that
    functions take as world ranks (``dst``, ``src``, ``new_group``'s list)
    keep the numbering the job started with; :func:`get_global_rank`
    translates.

    Args:
        group (str, optional): the group to shrink; ``None`` (default) is the
            world.
        exclude_ranks (list[int], optional): world ranks to leave out even if
            they are alive.
        timeout (datetime.timedelta or float seconds, optional): how long to
            wait for members that are neither known dead nor answering.
            Default: the group's timeout.

    Returns:
        str: the new group's name (the world group's name when the world was
        shrunk).

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: `exclude_ranks` names a non-member.
        DistAbortedError: this rank was left out of the new group.
        DistError: the store is gone, or a survivor failed while the new
            group was set up (call shrink_group on the same group again).

    Example:
        >>> try:
        ...     meshcomm.all_reduce(x)
        ... except meshcomm.DistPeerLostError:
        ...     meshcomm.shrink_group()
        >>> meshcomm.get_world_size()      # one fewer
        3
    """
    fn = "shrink_group"
    exclude = [] if exclude_ranks is None else exclude_ranks
    if not isinstance(exclude, (list, tuple)):
        raise TypeError(f"{fn}: 'exclude_ranks' must be a list of ints, got "
                        f"{type_name(exclude_ranks)}")
    for r in exclude:
        if isinstance(r, bool) or not isinstance(r, int):
            raise TypeError(f"{fn}: 'exclude_ranks' must hold ints, got {type_name(r)}")
    if timeout is None:
        timeout_ms = 0
    else:
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
            timeout = timedelta(seconds=timeout)
        if not isinstance(timeout, timedelta):
            raise TypeError(f"{fn}: 'timeout' must be a datetime.timedelta or seconds, got "
                            f"{type_name(timeout)}")
        if timeout <= timedelta(0):
            raise ValueError(f"{fn}: 'timeout' must be positive, got {timeout}")
        timeout_ms = max(1, int(timeout / timedelta(milliseconds=1)))
    name, pg = _resolve(group, fn)
    is_world = group is None or name in _state.WORLD_NAMES
    world = _state.world()
    try:
        fresh = world.shrink_group(pg, list(exclude), timeout_ms)
    finally:
        if not is_world:
            _state.forget_group(name)
    del pg
    if is_world:
        _state.replace_world_group(fresh)
        return _state.WORLD_COMM_GROUP
    _state.add_group(fresh.name, fresh)
    return fresh.name

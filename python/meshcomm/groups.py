"""Joining the job and managing process groups.

Groups are named by strings, as in MindSpore. The world group is
``"hccl_world_group"`` (also reachable as ``"mccl_world_group"``, its
native name, and as ``group=None``); ``new_group(ranks)`` names a group
``<backend>_<len(ranks)>_<sha1 of "_".join(sorted ranks)>``, so every
member computes the same name without talking to the others.

Ranks passed to these functions are world ("global") ranks unless the
argument is called ``group_rank``.
"""

import warnings
from datetime import timedelta

from . import _meshcomm, _state
from ._checks import group_name, type_name
from ._core.waiting import configure_wait
from ._errors import DistError
from .group_options import GroupOptions
from .store import TCPStore

__all__ = [
    "init_process_group", "destroy_process_group", "get_rank", "get_world_size",
    "new_group", "get_backend", "get_global_rank", "get_group_rank",
    "get_process_group_ranks", "is_available", "is_initialized",
]

BACKENDS = ("hccl", "mccl")
_MS = timedelta(milliseconds=1)


def _timeout_ms(timeout, fn):
    if not isinstance(timeout, timedelta):
        raise TypeError(f"{fn}: 'timeout' must be a datetime.timedelta, got {type_name(timeout)}")
    if timeout <= timedelta(0):
        raise ValueError(f"{fn}: 'timeout' must be positive, got {timeout}")
    return -(-min(timeout, timedelta(days=36500)) // _MS)


def _check_type(value, types, fn, name, what):
    if value is not None and (isinstance(value, bool) or not isinstance(value, types)):
        raise TypeError(f"{fn}: '{name}' must be {what}, got {type_name(value)}")


def is_available():
    """Whether meshcomm's communication functions can be used: always True.

    Example:
        >>> meshcomm.is_available()
        True
    """
    return True


def is_initialized():
    """Whether init_process_group has run (and destroy_process_group has not).

    Example:
        >>> meshcomm.init_process_group()
        >>> meshcomm.is_initialized()
        True
    """
    return _state.is_initialized()


def init_process_group(backend="hccl", init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, pg_options=None, device_id=None):
    """Join the job and create the world group. Every process calls it;
    it returns once all ``world_size`` processes have joined.

    How the processes find each other:

    * ``store``: through this :class:`TCPStore` (rank 0 usually serves it);
    * ``init_method="tcp://host:port"``: rank 0 serves a store there;
    * neither argument: from the environment, ``MASTER_ADDR``/``MASTER_PORT``
      for the store and ``RANK``/``WORLD_SIZE`` (or Open MPI's
      ``OMPI_COMM_WORLD_RANK``/``OMPI_COMM_WORLD_SIZE``, or Slurm's
      ``SLURM_PROCID``/``SLURM_NTASKS``), as meshrun, torchrun, mpirun and
      srun set them;
    * ``init_method="env://"``: the store from ``MASTER_ADDR``/``MASTER_PORT``,
      with `rank` and `world_size` given explicitly.

    Args:
        backend (str, optional): ``"hccl"`` (default, the MindSpore name,
            accepted so Ascend code runs unchanged) or ``"mccl"``; both use
            meshcomm's shared-memory and TCP transports.
        init_method (str, optional): ``"env://"`` or ``"tcp://host:port"``.
        timeout (datetime.timedelta, optional): deadline of joining and the
            default deadline of every operation. Default 300 s (or
            ``MESHCOMM_TIMEOUT_MS``).
        world_size (int, optional): number of processes. Required with
            `init_method` or `store`; otherwise the environment's size is
            used, and a `world_size` other than -1 (default) must match it.
        rank (int, optional): this process's rank. Required with
            `init_method` or `store`; otherwise ignored (the environment's).
        store (TCPStore, optional): the store to rendezvous through.
        pg_options: accepted and ignored, with a warning.
        device_id: accepted and ignored, with a warning.

    Raises:
        TypeError: `init_method`, `timeout`, `world_size`, `rank` or `store`
            has the wrong type.
        ValueError: `backend` is not hccl/mccl; both `init_method` and `store`
            are given; with either of them, `world_size` is not positive or
            `rank` is negative; `rank` is not below `world_size`; the
            environment lacks the variables needed; `world_size` disagrees
            with the job's size.
        DistError: the process group is already initialized.
        DistTimeoutError: some ranks did not join within `timeout`.

    Example:
        >>> # RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python train.py
        >>> meshcomm.init_process_group()
        >>> meshcomm.get_world_size()
        2
    """
    fn = "init_process_group"
    _check_type(init_method, str, fn, "init_method", "a str")
    _check_type(timeout, timedelta, fn, "timeout", "a datetime.timedelta")
    _check_type(world_size, int, fn, "world_size", "an int")
    _check_type(rank, int, fn, "rank", "an int")
    if store is not None and not isinstance(store, (TCPStore, _meshcomm.Store)):
        raise TypeError(f"{fn}: 'store' must be a meshcomm.TCPStore, got {type_name(store)}")
    world_size = -1 if world_size is None else world_size
    rank = -1 if rank is None else rank
    if pg_options is not None:
        warnings.warn(f"{fn}: 'pg_options' is ignored", UserWarning, stacklevel=2)
    if device_id is not None:
        warnings.warn(f"{fn}: 'device_id' is ignored (meshcomm runs on CPUs)", UserWarning,
                      stacklevel=2)
    if backend not in BACKENDS:
        raise ValueError(f"{fn}: 'backend' must be 'hccl' or 'mccl' (or left at its default), "
                         f"got {backend!r}")
    if init_method is not None and store is not None:
        raise ValueError(f"{fn}: pass 'init_method' or 'store', not both")
    if init_method is not None or store is not None:
        if world_size <= 0:
            raise ValueError(f"{fn}: with 'init_method' or 'store', 'world_size' must be a "
                             f"positive int, got {world_size}")
        if rank < 0:
            raise ValueError(f"{fn}: with 'init_method' or 'store', 'rank' must be a "
                             f"non-negative int, got {rank}")
    # 0 leaves the default to the native core, which reads
    # MESHCOMM_TIMEOUT_MS (300 s when unset), as every path does.
    timeout_ms = 0 if timeout is None else _timeout_ms(timeout, fn)
    if _state.is_initialized():
        raise DistError(f"{fn}: the default process group is already initialized; call "
                        "destroy_process_group() first")
    native_store = store._store if isinstance(store, TCPStore) else store
    if init_method is None and store is None:
        # As in MindSpore, the launcher's environment decides; a world_size
        # given as well is only compared with it below.
        rank = world_size_arg = -1
    else:
        world_size_arg = world_size
    world = _meshcomm.World(native_store, init_method or "", rank, world_size_arg, timeout_ms,
                            world_group_name=_state.CORE_WORLD_NAME,
                            world_group_aliases=sorted(_state.WORLD_NAMES - {_state.CORE_WORLD_NAME}))
    if world_size != -1 and world_size != world.size:
        size = world.size
        world.close()
        raise ValueError(f"{fn}: 'world_size' is {world_size} but the job has {size} processes")
    _state.joined(world, backend)
    configure_wait(world.machine_size)


def destroy_process_group(group=None):
    """Destroy a group, or (``group=None`` or the world group) every group,
    leaving the job.

    Queued operations of the destroyed groups finish first. Leaving the job
    waits for no other rank (except on a rank 0 that hosts the store itself,
    outside meshrun, which keeps it up until the others have left): its
    connections close in order between messages, the store records that
    this rank left, and a peer that later needs it fails at once with an
    error saying so. After it, init_process_group may be called again. Destroying a
    sub-group is not collective: call it once no other member still runs
    an operation on the group (for example after a world ``barrier()``).

    Args:
        group (str, optional): a name returned by new_group; ``None``
            (default) or the world group's name destroys everything.

    Raises:
        TypeError: `group` is not a str or None.
        DistError: no group of that name exists on this rank.

    Example:
        >>> g = meshcomm.new_group([0, 1])
        >>> meshcomm.destroy_process_group(g)
        >>> meshcomm.destroy_process_group()
    """
    if group is None or group in _state.WORLD_NAMES:
        _state.leave()
        return
    group = group_name(group, "destroy_process_group")
    world = _state.world()
    _state.lookup(group)
    _state.forget_group(group)
    world.destroy_group(group)


def _rank_or_size(group, fn, attr):
    group = group_name(group, fn)
    try:
        return getattr(_state.lookup(group), attr)
    except DistError as e:
        warnings.warn(f"{fn}: {e}; returning -1", UserWarning, stacklevel=3)
        return -1


def get_rank(group=None):
    """This process's rank in `group`.

    Args:
        group (str, optional): the group; ``None`` (default) is the world.

    Returns:
        int: the rank, or -1 (with a warning) before init_process_group or
        when this process is not in `group`.

    Raises:
        TypeError: `group` is not a str or None.

    Example:
        >>> meshcomm.get_rank()            # on the process with RANK=1
        1
    """
    return _rank_or_size(group, "get_rank", "rank")


def get_world_size(group=None):
    """The number of processes in `group` (``None``, the default: the
    world), or -1 with a warning wherever :func:`get_rank` gives -1: before
    init_process_group, or when this process is not in `group`. Raises
    TypeError when `group` is not a str or None.

    Example:
        >>> meshcomm.get_world_size()      # with 2 processes
        2
    """
    return _rank_or_size(group, "get_world_size", "size")


def get_local_rank():
    """This process's index among the job's processes on its host, as the
    launcher placed it (``LOCAL_RANK`` from meshrun or torchrun,
    ``OMPI_COMM_WORLD_LOCAL_RANK`` from Open MPI, ``MPI_LOCALRANKID`` from
    MPICH, ``SLURM_LOCALID`` from srun); without a launcher, its position
    among the ranks of this host. -1 with a warning before
    init_process_group.

    Example:
        >>> meshcomm.get_local_rank()      # 4 ranks on each of 2 hosts, rank 5
        1
    """
    try:
        return _state.world().local_rank
    except DistError as e:
        warnings.warn(f"get_local_rank: {e}; returning -1", UserWarning, stacklevel=2)
        return -1


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None):
    """Create a group of some of the world's processes. Every member calls it
    with the same ranks (non-members do not call it); it returns once all
    members have.

    Args:
        ranks (list[int], optional): world ranks of the members, in any
            order. ``None`` (default) returns the world group's name.
        timeout (datetime.timedelta, optional): default deadline of the
            group's operations (int/float: seconds). ``None``: the world's.
        backend (str, optional): ``"hccl"`` (default) or ``"mccl"``; only
            the group's name depends on it.
        pg_options (GroupOptions, optional): accepted; its HCCL settings are
            ignored with a warning.
        use_local_synchronization (bool, optional): accepted and ignored
            (groups are always created by their members only).
        group_desc (str, optional): accepted and ignored.

    Returns:
        str: the group's name; ``""`` (with a warning) when it could not be
        created (before init_process_group, ranks out of range, this process
        not among `ranks`, members missing at the deadline).

    Raises:
        TypeError: `ranks` is not a list of ints or holds a rank twice;
            `backend` is not hccl/mccl; `pg_options` is not a GroupOptions;
            `timeout` has the wrong type.

    Example:
        >>> if meshcomm.get_rank() in (0, 1):
        ...     g = meshcomm.new_group([0, 1])
        ...     meshcomm.all_reduce(x, group=g)
        >>> meshcomm.new_group()
        'hccl_world_group'
    """
    fn = "new_group"
    if ranks is None:
        return _state.WORLD_COMM_GROUP
    if not isinstance(ranks, list):
        raise TypeError(f"{fn}: 'ranks' must be a list of ints, got {type_name(ranks)}")
    for r in ranks:
        if isinstance(r, bool) or not isinstance(r, int):
            raise TypeError(f"{fn}: 'ranks' must hold ints, got {type_name(r)}")
    ranks = sorted(ranks)
    if len(set(ranks)) != len(ranks):
        raise TypeError(f"{fn}: 'ranks' lists a rank more than once: {ranks}")
    if backend is None:
        backend = "hccl"
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise TypeError(f"{fn}: 'backend' must be 'hccl' or 'mccl', got {backend!r}")
    if pg_options is not None:
        if not isinstance(pg_options, GroupOptions):
            raise TypeError(f"{fn}: 'pg_options' must be a GroupOptions, got "
                            f"{type_name(pg_options)}")
        pg_options._warn_ignored(stacklevel=2)
    if timeout is None:
        timeout_ms = 0
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        timeout_ms = _timeout_ms(timedelta(seconds=timeout), fn)
    else:
        timeout_ms = _timeout_ms(timeout, fn)
    if use_local_synchronization:
        warnings.warn(f"{fn}: 'use_local_synchronization' is ignored", UserWarning, stacklevel=2)
    try:
        pg = _state.world().new_group(ranks, backend, timeout_ms)  # named <backend>_<n>_<sha1>
    except (ValueError, DistError) as e:
        warnings.warn(f"{fn}: could not create the group of ranks {ranks}: {e}", UserWarning,
                      stacklevel=2)
        return ""
    _state.add_group(pg.name, pg)
    return pg.name


def get_backend(group=None):
    """The backend name of a group: ``"hccl"`` or ``"mccl"``.

    A group's backend is the one in its name (new_group's `backend`); the
    world group's is init_process_group's `backend` (``"hccl"`` before
    init_process_group), although it also answers to ``"mccl_world_group"``.

    Args:
        group (str, optional): the group; ``None`` (default) is the world.

    Raises:
        TypeError: `group` is not a str or None.

    Example:
        >>> meshcomm.get_backend()
        'hccl'
    """
    world_backend = _state.backend() or "hccl"
    group = group_name(group, "get_backend")
    if group == _state.WORLD_COMM_GROUP:
        return world_backend
    for name in BACKENDS:
        if name in group:
            return name
    return world_backend


def get_global_rank(group, group_rank):
    """The world rank of the process with rank `group_rank` in `group`.

    Args:
        group (str): the group; ``None`` or the world group returns
            `group_rank` as it is.
        group_rank (int): a rank within `group`.

    Raises:
        TypeError: `group` is not a str or None, or `group_rank` not an int.
        ValueError: `group_rank` is not a rank of `group`.
        DistError: before init_process_group, or no such group on this rank.

    Example:
        >>> g = meshcomm.new_group([0, 4])        # on ranks 0 and 4 of 8
        >>> meshcomm.get_global_rank(g, 1)
        4
    """
    if isinstance(group_rank, bool) or not isinstance(group_rank, int):
        raise TypeError(f"get_global_rank: 'group_rank' must be an int, got "
                        f"{type_name(group_rank)}")
    if group is None or group in _state.WORLD_NAMES:
        if _state.is_initialized():
            pg = _state.lookup(_state.WORLD_COMM_GROUP)
            if pg.size != _state.world().size:  # the world group was shrunk
                return pg.to_world_rank(group_rank)
        return group_rank
    return _state.lookup(group_name(group, "get_global_rank")).to_world_rank(group_rank)


def get_group_rank(group, global_rank):
    """The rank within `group` of the process with world rank `global_rank`.

    Args:
        group (str): the group; ``None`` is the world.
        global_rank (int): a world rank.

    Raises:
        TypeError: `global_rank` is not an int or `group` not a str or None.
        ValueError: `global_rank` is not a member of `group`.
        DistError: before init_process_group, or no such group on this rank.

    Example:
        >>> g = meshcomm.new_group([0, 4])        # on ranks 0 and 4 of 8
        >>> meshcomm.get_group_rank(g, 4)
        1
    """
    fn = "get_group_rank"
    if isinstance(global_rank, bool) or not isinstance(global_rank, int):
        raise TypeError(f"{fn}: 'global_rank' must be an int, got {type_name(global_rank)}")
    group = group_name(group, fn)
    pg = _state.lookup(group)
    r = pg.to_group_rank(global_rank)
    if r < 0:
        raise ValueError(f"{fn}: world rank {global_rank} is not a member of group '{group}'")
    return r


def get_process_group_ranks(group=None):
    """The world ranks of `group`'s members, by group rank.

    Args:
        group (str, optional): the group; ``None`` (default) is the world.

    Raises:
        TypeError: `group` is not a str or None.
        DistError: before init_process_group, or no such group on this rank.

    Example:
        >>> meshcomm.get_process_group_ranks()    # with 4 processes
        [0, 1, 2, 3]
    """
    return list(_state.lookup(group_name(group, "get_process_group_ranks")).world_ranks)

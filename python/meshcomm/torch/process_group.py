"""ProcessGroupMeshcomm: torch.distributed's ProcessGroup on meshcomm.

One instance per torch group (the default group and each ``new_group``).
Each joins a meshcomm World of its own through the store torch hands it
(a PrefixStore unique to the group, over torchrun's or the user's store),
so a group needs no port or rendezvous beyond torch's, and destroying it
releases its transport, shared memory and threads.

Collectives run on the calling thread (meshcomm's blocking submission: on
an idle group the operation runs there, GIL released) and return a
completed Work: this is the shortest path from ``dist.all_reduce`` to the
wire, and torch waits on the Work at once anyway unless ``async_op=True``.
Point-to-point operations are queued and return a pending Work, since an
``isend`` must not wait for its ``irecv``.

Errors: bad input raises :class:`InvalidArgumentError` (a ValueError and a
RuntimeError) before anything is sent; a failed operation raises meshcomm's
error (a RuntimeError subclass: DistPeerLostError, DistMismatchError,
DistTimeoutError, ...) on every rank, with meshcomm's message, naming the
rank, the operation and the group.
"""

import queue
import threading
import time
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import AllgatherOptions

from .. import _meshcomm
from ..handle import configure_wait
from . import tensors as _t
from .tensors import InvalidArgumentError, Staging, check_tensor, desc, native_op
from .work import DoneWork, PendingWork

__all__ = ["ProcessGroupMeshcomm", "BACKEND_NAME"]

BACKEND_NAME = "meshcomm"

_AVG = _t.AVG
_SUM = _meshcomm.REDUCE_OP_CODES["sum"]
_CODES = _t.CODES
_STRIDED = torch.strided
# Per dtype code, looked up instead of asking the tensor (cheaper).
_COMPLEX = frozenset(code for dtype, code in _CODES.items() if dtype.is_complex)
_ITEM_BYTES = {code: dtype.itemsize for dtype, code in _CODES.items()}
_UNSET = dist.AllreduceOptions().timeout  # torch's "no timeout given"
# hash(ReduceOp) is its RedOpType value; the ops the core reduces natively
# on every real dtype.
_FAST_OPS = {int(op): _t._NATIVE[int(op)]
             for op in (dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN,
                        dist.ReduceOp.MAX)}

# An all_reduce at least this large issued with async_op=True is queued and
# returns at once (DDP's buckets overlap with the backward pass); smaller
# ones run on the calling thread, which is faster than any hand-off.
_ASYNC_BYTES = 1 << 20

_CLOSED_KEY = "meshcomm/closed"
_LEAVE_WAIT_S = 10.0
_LEAVE_WAIT_BROKEN_S = 2.0

# Every live group, so interpreter exit can close them before the threads
# their stores call into Python from are gone.
_LIVE = weakref.WeakSet()


def _ms(timeout):
    """A torch timeout (timedelta; negative means unset) in ms, 0 = default."""
    if timeout is None:
        return 0
    ms = int(timeout.total_seconds() * 1000)
    return ms if ms > 0 else 0


def _timeout_ms(opts):
    """The timeout of torch's options in ms, 0 = the group's."""
    timeout = opts.timeout
    return 0 if timeout == _UNSET else _ms(timeout)


def _as_is(t):
    """The descriptor of t when the core can use its memory as it is (a
    contiguous CPU tensor of a dtype meshcomm moves, with no lazy conjugate
    or negative bit), else None. This is the hot path's only check: every
    other tensor takes the general path, which stages it through a copy or
    raises the error that names what is wrong."""
    if isinstance(t, torch.Tensor) and t.layout is _STRIDED and t.is_cpu and \
            t.is_contiguous() and not t.is_neg():
        code = _CODES.get(t.dtype)
        # Only complex tensors carry the conjugate bit.
        if code is not None and not (code in _COMPLEX and t.is_conj()):
            return (t.data_ptr(), t.numel(), code)
    return None


def _one(tensors, what):
    if len(tensors) != 1:
        raise InvalidArgumentError(f"{what}: the meshcomm backend takes exactly one tensor per "
                                   f"call (CPU tensors), got {len(tensors)}")
    return tensors[0]


class ProcessGroupMeshcomm(dist.ProcessGroup):
    """A torch.distributed ProcessGroup whose operations run on meshcomm.

    Made by torch through the registered backend "meshcomm"
    (``dist.init_process_group("meshcomm")``, ``dist.new_group(...,
    backend="meshcomm")``); not meant to be constructed directly.
    """

    def __init__(self, store, rank, size, timeout, group_id="", global_ranks=()):
        super().__init__(rank, size)
        self._timeout_ms = _ms(timeout)
        # Each torch group is a meshcomm World; the label keeps a sub-group's
        # flight-recorder records apart from the default group's.
        self._world = _meshcomm.World(store=_meshcomm.PythonStore(store), rank=rank,
                                      world_size=size, timeout_ms=self._timeout_ms,
                                      label=f"torch:{group_id}" if group_id else "")
        self._pg = self._world.world_group()
        # How long waits busy-poll, chosen as meshcomm's own API does.
        configure_wait(self._world.machine_size)
        self._store = store
        self._broken = False        # an operation failed: peers may be gone
        self._rank = rank
        self._size = size
        self._pending = []          # PendingWork of queued operations (p2p, large async)
        self._pending_lock = threading.Lock()
        self._torch_group_name = group_id  # torch's setGroupName repeats it
        self._torch_group_desc = ""
        # meshcomm numbers a sub-group's ranks from 0 ("world rank" in its
        # messages); torch users think in global ranks.
        global_ranks = list(global_ranks)
        self._global_ranks = global_ranks if global_ranks != list(range(size)) else []
        self._futures = None        # (queue, thread) completing get_future()s
        _LIVE.add(self)

    # ---- identity -----------------------------------------------------

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return BACKEND_NAME

    def getBackendName(self):
        return BACKEND_NAME

    # torch names a group after creating it (_set_group_name) and looks it
    # up by name (functional collectives, DeviceMesh); its C++ base class
    # keeps names in backends, which a Python group has none of.
    def getGroupName(self):
        return self._torch_group_name

    def setGroupName(self, name):
        self._torch_group_name = name

    def getGroupDesc(self):
        return self._torch_group_desc

    def setGroupDesc(self, desc):
        self._torch_group_desc = desc

    def __repr__(self):
        return f"ProcessGroupMeshcomm(rank={self._rank}, size={self._size})"

    # ---- lifetime -----------------------------------------------------

    def shutdown(self):
        """Releases everything the group holds (torch's destroy_process_group
        calls this). Waits for queued point-to-point operations to end."""
        world, self._world, self._pg = self._world, None, None
        if world is None:
            return
        world.close()
        with self._pending_lock:
            self._pending.clear()
            futures, self._futures = self._futures, None
        if futures is not None:
            futures[0].put(None)
            futures[1].join(timeout=10)
        _LIVE.discard(self)
        store, self._store = self._store, None
        try:
            self._leave(store)
        except Exception:  # the store's host is gone: nobody is left to wait for
            pass

    def _leave(self, store):
        """Group rank 0 returns last. torch's store lives in global rank 0's
        process (or in torchrun's agent), and a rank still closing, or still
        learning why its last operation failed, would see it vanish if that
        process exited first. After a failure some ranks may be dead and
        never arrive, so the wait is shorter."""
        count = store.add(_CLOSED_KEY, 1)
        if self._rank != 0:
            return
        # Every re-creation of a group with the same name counts on.
        target = ((count - 1) // self._size + 1) * self._size
        wait_s = _LEAVE_WAIT_BROKEN_S if self._broken else _LEAVE_WAIT_S
        deadline = time.monotonic() + wait_s
        while count < target and time.monotonic() < deadline:
            time.sleep(0.002)
            count = store.add(_CLOSED_KEY, 0)

    def abort(self):
        self.shutdown()

    def _group(self):
        pg = self._pg
        if pg is None:
            raise RuntimeError("meshcomm: the process group was destroyed "
                               "(destroy_process_group); create a new one")
        return pg

    def _track(self, work):
        with self._pending_lock:
            self._pending = [w for w in self._pending if not w._done and
                             not w._native.is_completed()]
            self._pending.append(work)
        return work

    def _complete_later(self, work, future):
        """Has the group's future thread complete future when work ends.
        The group's operations end in issue order, so one thread waiting
        on them in turn completes each future as soon as it can be."""
        with self._pending_lock:
            if self._futures is None:
                q = queue.SimpleQueue()
                thread = threading.Thread(target=_complete_futures, args=(q,),
                                          name="meshcomm-futures", daemon=True)
                thread.start()
                self._futures = (q, thread)
            self._futures[0].put((work, future))

    def _run(self, method, *args):
        """Runs one blocking submission; returns once the operation is done."""
        try:
            work = method(*args, True)
        except (TypeError, ValueError) as e:
            if isinstance(e, RuntimeError):
                raise
            if isinstance(e, TypeError):
                raise _t.InvalidTypeError(str(e)) from None
            raise InvalidArgumentError(str(e)) from None
        except RuntimeError as e:
            raise self._failed(e) from None
        try:
            work.wait()  # raises the operation's error; waits only if it was queued
        except RuntimeError as e:
            raise self._failed(e) from None
        return work

    def _failed(self, error):
        """The error of a failed operation, naming the torch group too
        (meshcomm's own name for it is the same in every group: each torch
        group is a meshcomm job of its own). The group is broken now."""
        self._broken = True
        if self._torch_group_name and type(error).__module__.startswith("meshcomm"):
            where = f"torch.distributed group '{self._torch_group_name}'"
            if self._global_ranks:
                where += (f", whose ranks 0-{self._size - 1} are global ranks "
                          f"{', '.join(map(str, self._global_ranks))}")
            try:
                return type(error)(f"{error} ({where})")
            except TypeError:
                pass
        return error

    # ---- all_reduce ---------------------------------------------------

    def allreduce(self, tensors, opts=None):
        if opts is None:
            opts = dist.AllreduceOptions()
        if len(tensors) == 1:
            # The hot path: a tensor the core takes as it is and an op it has.
            t = tensors[0]
            code = _FAST_OPS.get(hash(opts.reduceOp))
            d = _as_is(t) if code is not None else None
            if d is not None and d[2] not in _COMPLEX and self._pg is not None:
                timeout = opts.timeout  # _timeout_ms(opts), inlined on the hottest call
                timeout_ms = 0 if timeout == _UNSET else _ms(timeout)
                if d[1] * _ITEM_BYTES[d[2]] >= _ASYNC_BYTES and getattr(opts, "asyncOp", False):
                    native = self._submit(self._pg.all_reduce, d, code, timeout_ms)
                    return self._track(PendingWork(native, tensors, (t,),
                                                   complete_later=self._complete_later))
                self._run(self._pg.all_reduce, d, code, timeout_ms)
                return DoneWork(tensors)
        t = _one(tensors, "all_reduce")
        self._allreduce(t, opts.reduceOp, _ms(opts.timeout))
        return DoneWork(tensors)

    def _allreduce(self, t, op, timeout_ms):
        pg = self._group()
        code = native_op(op, t.dtype, "all_reduce")
        if code is not None and t.is_cpu and t.dtype in _CODES and _t.dense(t):
            self._run(pg.all_reduce, (t.data_ptr(), t.numel(), _CODES[t.dtype]), code, timeout_ms)
            return
        stage = Staging()
        buf = stage.update(t, "all_reduce")
        opc = _t.op_code(op)
        if code is not None:
            self._run(pg.all_reduce, desc(buf), code, timeout_ms)
        elif opc == _AVG:
            self._run(pg.all_reduce, desc(buf), _SUM, timeout_ms)
            buf.div_(self._size)
        else:
            stacked = torch.empty((self._size,) + tuple(buf.shape), dtype=buf.dtype)
            self._run(pg.all_gather_into_tensor, desc(stacked), desc(buf), timeout_ms)
            _t.fold(opc, stacked, buf)
        stage.finish()

    def allreduce_coalesced(self, tensors, opts=None):
        if opts is None:
            opts = dist.AllreduceCoalescedOptions()
        for t in tensors:
            check_tensor(t, "all_reduce_coalesced")
            native_op(opts.reduceOp, t.dtype, "all_reduce_coalesced")
        # One flat buffer per dtype, reduced in one call each.
        by_dtype = {}
        for t in tensors:
            by_dtype.setdefault(t.dtype, []).append(t)
        timeout_ms = _ms(opts.timeout)
        for dtype in sorted(by_dtype, key=str):
            group = by_dtype[dtype]
            flat = torch.cat([t.reshape(-1) for t in group])
            self._allreduce(flat, opts.reduceOp, timeout_ms)
            offset = 0
            for t in group:
                n = t.numel()
                t.copy_(flat[offset:offset + n].view(t.shape))
                offset += n
        return DoneWork(tensors)

    # ---- broadcast / reduce ---------------------------------------------

    def broadcast(self, tensors, opts=None):
        t = _one(tensors, "broadcast")
        if opts is None:
            opts = dist.BroadcastOptions()
        pg = self._group()
        d = _as_is(t)
        if d is not None:  # the hot path: nothing to stage
            self._run(pg.broadcast, d, opts.rootRank, _timeout_ms(opts))
            return DoneWork(tensors)
        stage = Staging()
        buf = stage.update(t, "broadcast") if opts.rootRank == self._rank else \
            stage.write(t, "broadcast")
        self._run(pg.broadcast, desc(buf), opts.rootRank, _ms(opts.timeout))
        stage.finish()
        return DoneWork(tensors)

    def reduce(self, tensors, opts=None):
        t = _one(tensors, "reduce")
        if opts is None:
            opts = dist.ReduceOptions()
        pg = self._group()
        timeout_ms = _ms(opts.timeout)
        code = native_op(opts.reduceOp, t.dtype, "reduce")
        root = opts.rootRank
        stage = Staging()
        buf = stage.update(t, "reduce")
        opc = _t.op_code(opts.reduceOp)
        if code is not None:
            self._run(pg.reduce, desc(buf), code, root, timeout_ms)
        elif opc == _AVG:
            self._run(pg.reduce, desc(buf), _SUM, root, timeout_ms)
            if self._rank == root:
                buf.div_(self._size)
        else:
            stacked = torch.empty((self._size,) + tuple(buf.shape), dtype=buf.dtype)
            self._run(pg.gather_into_tensor, desc(stacked), desc(buf), root, timeout_ms)
            if self._rank == root:
                _t.fold(opc, stacked, buf)
        if self._rank == root:
            stage.finish()
        return DoneWork(tensors)

    # ---- all_gather ------------------------------------------------------

    def allgather(self, output_tensors, input_tensors, opts=None):
        outputs = _one(output_tensors, "all_gather")
        t = _one(input_tensors, "all_gather")
        if opts is None:
            opts = AllgatherOptions()
        self._check_list(outputs, t, "all_gather", "output_tensor_list")
        stage = Staging()
        src = stage.read(t, "all_gather")
        outs = [desc(stage.write(o, "all_gather")) for o in outputs]
        self._run(self._group().all_gather, outs, desc(src), _ms(opts.timeout))
        stage.finish()
        return DoneWork(output_tensors)

    def _stage_blocks(self, output, input, what, whole):
        """Stages `output` and `input` of a call where `whole` ("output" or
        "input") holds one block of the other per rank; checks that their
        dtypes agree and the sizes fit. Returns (staging, input, output)."""
        stage = Staging()
        src = stage.read(input, what)
        dst = stage.write(output, what)
        if dst.dtype != src.dtype:
            raise InvalidArgumentError(f"{what}: output dtype {dst.dtype} differs from input "
                                       f"dtype {src.dtype}")
        big, block, other = (dst, src, "input") if whole == "output" else (src, dst, "output")
        if big.numel() != block.numel() * self._size:
            raise InvalidArgumentError(f"{what}: {whole} has {big.numel()} elements, expected "
                                       f"{self._size} x {block.numel()} (group size x {other})")
        return stage, src, dst

    def _all_gather_single(self, output, input, opts, what="all_gather_into_tensor"):
        if opts is None:
            opts = AllgatherOptions()
        out_d, in_d = _as_is(output), _as_is(input)
        if out_d is not None and in_d is not None and out_d[2] == in_d[2] and \
                out_d[1] == in_d[1] * self._size:  # the hot path: nothing to stage
            self._run(self._group().all_gather_into_tensor, out_d, in_d, _timeout_ms(opts))
            return DoneWork([output])
        stage, src, dst = self._stage_blocks(output, input, what, whole="output")
        self._run(self._group().all_gather_into_tensor, desc(dst), desc(src), _ms(opts.timeout))
        stage.finish()
        return DoneWork([output])

    def _allgather_base(self, output, input, opts=None):
        return self._all_gather_single(output, input, opts)

    def all_gather_single(self, output, input, opts=None):
        return self._all_gather_single(output, input, opts)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        for outputs, t in zip(output_lists, input_list):
            self.allgather([outputs], [t], opts)
        return DoneWork(output_lists)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        for o, i in zip(outputs, inputs):
            self._all_gather_single(o, i, opts, "all_gather_into_tensor_coalesced")
        return DoneWork(outputs)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        return self.allgather_into_tensor_coalesced(outputs, inputs, opts)

    # ---- reduce_scatter ----------------------------------------------------

    def reduce_scatter(self, output_tensors, input_lists, opts=None):
        out = _one(output_tensors, "reduce_scatter")
        inputs = _one(input_lists, "reduce_scatter")
        if opts is None:
            opts = dist.ReduceScatterOptions()
        self._check_list(inputs, out, "reduce_scatter", "input_list")
        timeout_ms = _ms(opts.timeout)
        code = native_op(opts.reduceOp, out.dtype, "reduce_scatter")
        opc = _t.op_code(opts.reduceOp)
        stage = Staging()
        dst = stage.write(out, "reduce_scatter")
        srcs = [stage.read(i, "reduce_scatter") for i in inputs]
        pg = self._group()
        if code is not None or opc == _AVG:
            self._run(pg.reduce_scatter, desc(dst), [desc(s) for s in srcs],
                      _SUM if code is None else code, timeout_ms)
            if code is None:
                dst.div_(self._size)
        else:
            got = [torch.empty_like(dst) for _ in range(self._size)]
            self._run(pg.all_to_all, [desc(g) for g in got], [desc(s) for s in srcs],
                      timeout_ms)
            _t.fold(opc, torch.stack(got), dst)
        stage.finish()
        return DoneWork(output_tensors)

    def _reduce_scatter_single(self, output, input, opts, what="reduce_scatter_tensor"):
        if opts is None:
            opts = dist.ReduceScatterOptions()
        code = _FAST_OPS.get(hash(opts.reduceOp))
        if code is not None:
            out_d, in_d = _as_is(output), _as_is(input)
            if out_d is not None and in_d is not None and out_d[2] == in_d[2] and \
                    in_d[1] == out_d[1] * self._size and out_d[2] not in _COMPLEX:
                # The hot path: nothing to stage, an op the core has.
                self._run(self._group().reduce_scatter_tensor, out_d, in_d, code,
                          _timeout_ms(opts))
                return DoneWork([output])
        stage, src, dst = self._stage_blocks(output, input, what, whole="input")
        code = native_op(opts.reduceOp, dst.dtype, what)
        opc = _t.op_code(opts.reduceOp)
        timeout_ms = _ms(opts.timeout)
        pg = self._group()
        if code is not None or opc == _AVG:
            self._run(pg.reduce_scatter_tensor, desc(dst), desc(src),
                      _SUM if code is None else code, timeout_ms)
            if code is None:
                dst.div_(self._size)
        else:
            got = torch.empty((self._size, dst.numel()), dtype=dst.dtype)
            self._run(pg.all_to_all_single, desc(got), desc(src), [], [], timeout_ms)
            _t.fold(opc, got, dst)
        stage.finish()
        return DoneWork([output])

    def _reduce_scatter_base(self, output, input, opts=None):
        return self._reduce_scatter_single(output, input, opts)

    def reduce_scatter_single(self, output, input, opts=None):
        return self._reduce_scatter_single(output, input, opts)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        for o, i in zip(outputs, inputs):
            self._reduce_scatter_single(o, i, opts, "reduce_scatter_tensor_coalesced")
        return DoneWork(outputs)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        return self.reduce_scatter_tensor_coalesced(outputs, inputs, opts)

    # ---- all_to_all ----------------------------------------------------------

    def alltoall(self, output_tensors, input_tensors, opts=None):
        if opts is None:
            opts = dist.AllToAllOptions()
        for lst, name in ((output_tensors, "output_tensor_list"),
                          (input_tensors, "input_tensor_list")):
            if len(lst) != self._size:
                raise InvalidArgumentError(f"all_to_all: {name} has {len(lst)} tensors, "
                                           f"expected one per rank ({self._size})")
        stage = Staging()
        srcs = [desc(stage.read(i, "all_to_all")) for i in input_tensors]
        dsts = [desc(stage.write(o, "all_to_all")) for o in output_tensors]
        self._run(self._group().all_to_all, dsts, srcs, _ms(opts.timeout))
        stage.finish()
        return DoneWork(output_tensors)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        if opts is None:
            opts = dist.AllToAllOptions()
        what = "all_to_all_single"
        if not output_split_sizes and not input_split_sizes:
            out_d, in_d = _as_is(output), _as_is(input)
            if out_d is not None and in_d is not None and out_d[2] == in_d[2] and \
                    out_d[1] == in_d[1]:
                # The hot path: equal blocks, nothing to stage.
                self._splits(output, (), what, "output_split_sizes")
                self._splits(input, (), what, "input_split_sizes")
                self._run(self._group().all_to_all_single, out_d, in_d, [], [],
                          _timeout_ms(opts))
                return DoneWork([output])
        stage = Staging()
        src = stage.read(input, what)
        dst = stage.write(output, what)
        if dst.dtype != src.dtype:
            raise InvalidArgumentError(f"{what}: output dtype {dst.dtype} differs from input "
                                       f"dtype {src.dtype}")
        recv = self._splits(dst, output_split_sizes, what, "output_split_sizes")
        send = self._splits(src, input_split_sizes, what, "input_split_sizes")
        self._run(self._group().all_to_all_single, desc(dst), desc(src), recv, send,
                  _ms(opts.timeout))
        stage.finish()
        return DoneWork([output])

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes,
                          opts=None):
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def _splits(self, t, sizes, what, name):
        """Split sizes in rows of dim 0 -> element counts ([] = equal)."""
        if not sizes:
            if t.dim() == 0 or t.shape[0] % self._size:
                raise InvalidArgumentError(
                    f"{what}: without {name}, dim 0 of the tensor ({tuple(t.shape)}) must "
                    f"divide evenly by the group size {self._size}")
            return []
        if len(sizes) != self._size:
            raise InvalidArgumentError(f"{what}: {name} has {len(sizes)} entries, expected one "
                                       f"per rank ({self._size})")
        if any(s < 0 for s in sizes) or sum(sizes) != (t.shape[0] if t.dim() else 1):
            raise InvalidArgumentError(f"{what}: {name} {list(sizes)} must be non-negative and "
                                       f"sum to dim 0 of the tensor ({tuple(t.shape)})")
        row = t.numel() // t.shape[0] if t.dim() and t.shape[0] else 0
        return [int(s) * row for s in sizes]

    # ---- gather / scatter --------------------------------------------------

    def gather(self, output_lists, input_tensors, opts=None):
        t = _one(input_tensors, "gather")
        if opts is None:
            opts = dist.GatherOptions()
        root = opts.rootRank
        stage = Staging()
        src = stage.read(t, "gather")
        outs = []
        if self._rank == root:
            outputs = _one(output_lists, "gather")
            self._check_list(outputs, t, "gather", "gather_list")
            outs = [desc(stage.write(o, "gather")) for o in outputs]
        elif output_lists and output_lists[0]:
            raise InvalidArgumentError("gather: gather_list must be given on the destination "
                                       f"rank {root} only")
        self._run(self._group().gather, outs, desc(src), root, _ms(opts.timeout))
        stage.finish()
        return DoneWork(output_lists)

    def scatter(self, output_tensors, input_lists, opts=None):
        t = _one(output_tensors, "scatter")
        if opts is None:
            opts = dist.ScatterOptions()
        root = opts.rootRank
        stage = Staging()
        dst = stage.write(t, "scatter")
        ins = []
        if self._rank == root:
            inputs = _one(input_lists, "scatter")
            self._check_list(inputs, t, "scatter", "scatter_list")
            ins = [desc(stage.read(i, "scatter")) for i in inputs]
        elif input_lists and input_lists[0]:
            raise InvalidArgumentError(f"scatter: scatter_list must be given on the source rank "
                                       f"{root} only")
        self._run(self._group().scatter, desc(dst), ins, root, _ms(opts.timeout))
        stage.finish()
        return DoneWork(output_tensors)

    def _check_list(self, lst, like, what, name):
        if len(lst) != self._size:
            raise InvalidArgumentError(f"{what}: {name} has {len(lst)} tensors, expected one per "
                                       f"rank ({self._size})")
        for x in lst:
            check_tensor(x, what)
            if x.numel() != like.numel() or x.dtype != like.dtype:
                raise InvalidArgumentError(
                    f"{what}: every tensor of {name} must match the tensor "
                    f"({like.numel()} x {like.dtype}), got {x.numel()} x {x.dtype}")

    # ---- barrier ---------------------------------------------------------------

    def barrier(self, opts=None):
        timeout_ms = _ms(opts.timeout) if opts is not None else 0
        self._run(self._group().barrier, timeout_ms)
        return DoneWork([])

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """A barrier bounded by timeout; a rank that does not arrive makes
        every rank fail with a RuntimeError naming it."""
        self._run(self._group().barrier, _ms(timeout))

    # ---- point to point -------------------------------------------------------

    def send(self, tensors, dst, tag=0):
        t = _one(tensors, "send")
        pg = self._group()
        src = Staging().read(t, "send")
        native = self._submit(pg.send, desc(src), dst, tag, 0)
        return self._track(PendingWork(native, tensors, (t, src),
                                       complete_later=self._complete_later))

    def recv(self, tensors, src, tag=0):
        t = _one(tensors, "recv")
        pg = self._group()
        stage = Staging()
        buf = stage.write(t, "recv")
        native = self._submit(pg.recv, desc(buf), src, tag, 0)
        return self._track(PendingWork(native, tensors, (t, buf),
                                       stage.finish if stage.back else None,
                                       self._complete_later))

    def recv_anysource(self, tensors, tag=0):
        """torch.distributed.recv without src: the first message with `tag`
        that any rank sends; the Work's _source_rank() names the sender."""
        t = _one(tensors, "recv")
        pg = self._group()
        stage = Staging()
        buf = stage.write(t, "recv")
        native = self._submit(pg.recv_any_source, desc(buf), tag, 0)
        return self._track(PendingWork(native, tensors, (t, buf),
                                       stage.finish if stage.back else None,
                                       self._complete_later))

    def _submit(self, method, *args):
        try:
            return method(*args, False)
        except TypeError as e:
            raise _t.InvalidTypeError(str(e)) from None
        except ValueError as e:
            if isinstance(e, RuntimeError):
                raise
            raise InvalidArgumentError(str(e)) from None


def _complete_futures(q):
    while True:
        item = q.get()
        if item is None:
            return
        work, future = item
        work.complete_future(future)


def create(options, _backend_options=None):
    """The creator torch calls for the backend "meshcomm" (registered with
    torch's extended API, which also names the group)."""
    return ProcessGroupMeshcomm(options.store, options.group_rank, options.group_size,
                                options.timeout, str(options.group_id or ""),
                                options.global_ranks_in_group)


def close_all():
    """Closes every live group (at interpreter exit, while threads still may
    take the GIL)."""
    for pg in list(_LIVE):
        try:
            pg.shutdown()
        except Exception:  # exiting: nothing left to report to
            pass

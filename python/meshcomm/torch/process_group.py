"""ProcessGroupMeshcomm: torch.distributed's ProcessGroup on meshcomm.

One instance per torch group (the default group and each ``new_group``).
Each joins a meshcomm World of its own through the store torch hands it
(a PrefixStore unique to the group, over torchrun's or the user's store),
so a group needs no port or rendezvous beyond torch's, and destroying it
releases its transport, shared memory and threads.

How calls are issued (the collective and point-to-point lanes, blocking
and async calls, Works): issuing.py.

Errors: bad input raises :class:`InvalidArgumentError` (a ValueError and a
RuntimeError) before anything is sent; a failed operation raises meshcomm's
error (a RuntimeError subclass: DistPeerLostError, DistMismatchError,
DistTimeoutError, ...) on every rank, with meshcomm's message, naming the
rank, the operation and the group.
"""

import importlib
import os
import threading
import time
import warnings
import weakref
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import AllgatherOptions

from .. import _meshcomm
from .._core.checks import per_rank
from .._core.waiting import configure_wait
from . import sparse as _sparse
from . import tensors as _t
from .exchanges import Exchanges
from .tensors import InvalidArgumentError, Staging, check_tensor, desc, native_op
from .tensors import COMPLEX_CODES as _COMPLEX, UNSET_TIMEOUT as _UNSET
from .tensors import as_is as _as_is, ms as _ms, one as _one, timeout_ms as _timeout_ms
from .issuing import Issuing
from .monitored import monitored_barrier
from .work import DoneWork, PendingWork

_native = None
if os.environ.get("MESHCOMM_TORCH_NATIVE", "1") != "0":
    # The hot path in C++, built against this torch: beside the extension
    # in a make build (cmake/torch_native.cmake), or compiled once per torch
    # from the sources an installed wheel carries (native_build.py).
    # MESHCOMM_TORCH_NATIVE=0 leaves every call to the Python path.
    try:
        try:
            _native = importlib.import_module("._native", __package__)
        except ModuleNotFoundError as _missing:
            if _missing.name != f"{__package__}._native":
                raise
            from .native_build import load as _load_native
            _native = _load_native()
    except (ImportError, OSError, TimeoutError) as _error:
        # Built but not loadable (made for another torch, say): say why
        # once; the Python path does the same work.
        warnings.warn(f"meshcomm: the torch backend's native part did not load ({_error}); "
                      f"using its Python path", RuntimeWarning, stacklevel=2)

__all__ = ["ProcessGroupMeshcomm", "BACKEND_NAME"]

BACKEND_NAME = "meshcomm"

_AVG = _t.AVG
_SUM = _meshcomm.REDUCE_OP_CODES["sum"]
# hash(ReduceOp) is its RedOpType value; the ops the core reduces natively
# on every real dtype.
_FAST_OPS = {int(op): _t._NATIVE[int(op)]
             for op in (dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN,
                        dist.ReduceOp.MAX)}

_CLOSED_KEY = "meshcomm/closed"
_LEAVE_WAIT_S = 10.0
_LEAVE_WAIT_BROKEN_S = 2.0

# Every live group, so interpreter exit can close them before the threads
# their stores call into Python from are gone.
_LIVE = weakref.WeakSet()


class ProcessGroupMeshcomm(Issuing, Exchanges, dist.ProcessGroup):
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
        # The p2p lane: the same ranks as a second meshcomm group, whose
        # executor runs sends and receives beside the collectives'.
        self._p2p = self._world.new_group(list(range(size))) if size > 1 else self._pg
        # The group as the native part takes it (or None: every call in Python).
        self._native = self._pg._capsule() if _native is not None else None
        # The group as torch.ops.meshcomm's operators name it (ops.py).
        self._op_handle = _native.register_group(self._native) if _native is not None else None
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
        self._futures = {}          # lane -> (queue, thread) completing get_future()s
        # Set while an operation issued in steps (sparse all_reduce) has not
        # queued its later steps: calls issued meanwhile wait for it, so
        # every rank queues the same calls in the same order.
        self._gate = None
        self._monitored = 0         # monitored_barrier calls so far
        _LIVE.add(self)

    # ---- identity -----------------------------------------------------

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return BACKEND_NAME

    getBackendName = name  # torch asks under both names

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
        self._native = None
        handle, self._op_handle = self._op_handle, None
        if handle is not None:
            _native.unregister_group(handle)
        world, self._world, self._pg, self._p2p = self._world, None, None, None
        if world is None:
            return
        world.close()
        with self._pending_lock:
            self._pending.clear()
            futures, self._futures = self._futures, {}
        for q, _ in futures.values():
            q.put(None)
        for _, thread in futures.values():
            thread.join(timeout=10)
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

    def _p2p_group(self):
        p2p = self._p2p
        if p2p is None:
            self._group()  # raises: destroyed
        return p2p

    def _native_failed(self, error):
        """The error a call of the native part raises: bad input as
        InvalidArgumentError, a failed operation as _failed says."""
        if isinstance(error, ValueError):
            return InvalidArgumentError(str(error))
        return self._failed(error)

    # ---- all_reduce ---------------------------------------------------

    def allreduce(self, tensors, opts=None):
        native = self._native
        if native is not None and opts is not None and self._gate is None:
            # The hottest call: blocking, one tensor as the core takes it;
            # NotImplemented for anything else.
            try:
                work = _native.allreduce(native, tensors, opts)
            except (ValueError, RuntimeError) as e:
                raise self._native_failed(e) from None
            if work is not NotImplemented:
                return work
        if opts is None:
            opts = dist.AllreduceOptions()
        if len(tensors) == 1:
            # The hot path: a tensor the core takes as it is and an op it has.
            t = tensors[0]
            code = _FAST_OPS.get(hash(opts.reduceOp))
            d = _as_is(t) if code is not None else None
            pg = self._pg
            if d is not None and d[2] not in _COMPLEX and pg is not None:
                timeout = opts.timeout  # _timeout_ms(opts), inlined on the hottest call
                timeout_ms = 0 if timeout == _UNSET else _ms(timeout)
                if opts.asyncOp:
                    native = self._submit(pg.all_reduce, (d, code, timeout_ms))
                    return self._track(PendingWork((native,), tensors, (t,), None,
                                                   self._completer("coll"), self._failed))
                self._run(pg.all_reduce, (d, code, timeout_ms), t)
                return DoneWork(tensors)
        t = _one(tensors, "all_reduce")
        if t.layout == torch.sparse_coo:
            return self._sparse_allreduce(tensors, t, opts)
        return self._start(opts, tensors, *self._allreduce(t, opts.reduceOp, _timeout_ms(opts)))

    def _sparse_allreduce(self, tensors, t, opts):
        """A sparse COO tensor's SUM (sparse.py): a header gather, then the
        entries' gathers, sized from the headers. With ``opts.asyncOp`` a
        thread queues the second step once the headers arrive; calls issued
        on this group meanwhile wait for it (the lane's order)."""
        op = _sparse.SparseAllreduce(t, _t.op_code(opts.reduceOp), self._size, _timeout_ms(opts))
        pg = self._group()
        if not opts.asyncOp:
            self._run(*op.header_call(pg), (t, op))
            for call in op.data_calls(pg):
                self._run(*call, (t, op))
            op.finish()
            return DoneWork(tensors)
        header = self._submit(*op.header_call(pg))
        gate = threading.Event()
        self._gate = gate
        later = _sparse.Later(header.description)

        def queue_entries():
            try:
                header.wait(None)
                later.natives = tuple(self._issue(*c) for c in op.data_calls(pg))
            except RuntimeError as e:
                later.error = e
            finally:
                later.queued.set()
                if self._gate is gate:
                    self._gate = None
                gate.set()
        threading.Thread(target=queue_entries, name="meshcomm-sparse", daemon=True).start()
        return self._track(PendingWork((header, later), tensors, (t, op), op.finish,
                                       self._completer("coll"), self._failed))

    def _reduction(self, op, buf, what, native_call, gather_call):
        """The call of a reduction whose result lands in `buf`: native_call(code)
        when the core has the op (AVG: its SUM, divided here after), else
        gather_call(stacked), every rank's data in one tensor, folded here
        (bitwise ops). Returns (call, what runs after it or None, stacked)."""
        code = native_op(op, buf.dtype, what)
        if code is not None:
            return native_call(code), None, None
        opc = _t.op_code(op)
        if opc == _AVG:
            return native_call(_SUM), (lambda: buf.div_(self._size)), None
        stacked = torch.empty((self._size,) + tuple(buf.shape), dtype=buf.dtype)
        return gather_call(stacked), (lambda: _t.fold(opc, stacked, buf)), stacked

    def _allreduce(self, t, op, timeout_ms, what="all_reduce"):
        """The calls, finish and buffers of an all_reduce of t."""
        pg = self._group()
        stage = Staging()
        buf = stage.update(t, what)
        call, after, stacked = self._reduction(
            op, buf, what, lambda code: (pg.all_reduce, (desc(buf), code, timeout_ms)),
            lambda st: (pg.all_gather_into_tensor, (desc(st), desc(buf), timeout_ms)))
        return [call], _chain(after, stage.finisher()), (t, buf, stacked)

    def allreduce_coalesced(self, tensors, opts=None):
        if opts is None:
            opts = dist.AllreduceCoalescedOptions()
        what = "all_reduce_coalesced"
        for t in tensors:
            check_tensor(t, what)
            native_op(opts.reduceOp, t.dtype, what)
        # One flat buffer per dtype, reduced in one call each.
        by_dtype = {}
        for t in tensors:
            by_dtype.setdefault(t.dtype, []).append(t)
        calls, finishes, keep = [], [], [tensors]
        for dtype in sorted(by_dtype, key=str):
            group = by_dtype[dtype]
            flat = torch.cat([t.reshape(-1) for t in group])
            c, f, k = self._allreduce(flat, opts.reduceOp, _timeout_ms(opts), what)
            calls += c
            keep.append(k)
            finishes.append((f, flat, group))

        def finish():
            for f, flat, group in finishes:
                if f is not None:
                    f()
                offset = 0
                for t in group:
                    n = t.numel()
                    t.copy_(flat[offset:offset + n].view(t.shape))
                    offset += n
        return self._start(opts, tensors, calls, finish, keep)

    # ---- broadcast / reduce ---------------------------------------------

    def broadcast(self, tensors, opts=None):
        native = self._native
        if native is not None and opts is not None and self._gate is None:
            try:
                work = _native.broadcast(native, tensors, opts)
            except (ValueError, RuntimeError) as e:
                raise self._native_failed(e) from None
            if work is not NotImplemented:
                return work
        t = _one(tensors, "broadcast")
        if opts is None:
            opts = dist.BroadcastOptions()
        pg = self._group()
        d = _as_is(t)
        if d is not None:  # the hot path: nothing to stage
            if not opts.asyncOp:
                self._run(pg.broadcast, (d, opts.rootRank, _timeout_ms(opts)), t)
                return DoneWork(tensors)
            return self._start(opts, tensors, [(pg.broadcast, (d, opts.rootRank,
                                                               _timeout_ms(opts)))], None, (t,))
        stage = Staging()
        buf = stage.update(t, "broadcast") if opts.rootRank == self._rank else \
            stage.write(t, "broadcast")
        return self._start(opts, tensors,
                           [(pg.broadcast, (desc(buf), opts.rootRank, _timeout_ms(opts)))],
                           stage.finisher(), (t, buf))

    def reduce(self, tensors, opts=None):
        t = _one(tensors, "reduce")
        if opts is None:
            opts = dist.ReduceOptions()
        pg = self._group()
        timeout_ms = _timeout_ms(opts)
        root = opts.rootRank
        stage = Staging()
        buf = stage.update(t, "reduce")
        call, after, stacked = self._reduction(
            opts.reduceOp, buf, "reduce",
            lambda code: (pg.reduce, (desc(buf), code, root, timeout_ms)),
            lambda st: (pg.gather_into_tensor, (desc(st), desc(buf), root, timeout_ms)))
        # Only the root's tensor receives the result.
        finish = _chain(after, stage.finisher()) if self._rank == root else None
        return self._start(opts, tensors, [call], finish, (t, buf, stacked))

    # ---- all_gather ------------------------------------------------------

    def allgather(self, output_tensors, input_tensors, opts=None):
        outputs = _one(output_tensors, "all_gather")
        t = _one(input_tensors, "all_gather")
        if opts is None:
            opts = AllgatherOptions()
        stage = Staging()
        src = stage.read(t, "all_gather")
        outs = [stage.write(o, "all_gather") for o in outputs]
        return self._start(opts, output_tensors,
                           [(self._group().all_gather,
                             ([desc(o) for o in outs], desc(src), _timeout_ms(opts)))],
                           stage.finisher(), (t, src, outputs, outs))

    def _blocks_fit(self, whole, block, what, name):
        """Descriptor `whole` (the `name`) holds one `block` per rank, of its
        dtype. The native core checks that of every call; this is for calls
        it sees in parts (several calls, or a reduction built here), which
        must fail before the first part is sent."""
        if whole[2] != block[2] or whole[1] != block[1] * self._size:
            raise InvalidArgumentError(
                f"{what}: the {name} must hold group size ({self._size}) x the other tensor's "
                f"elements ({block[1]}) of one dtype, it has {whole[1]}")

    def _all_gather_calls(self, stage, output, input, opts, what, check=False):
        out_d, in_d = _as_is(output), _as_is(input)
        if out_d is None or in_d is None:
            out_d, in_d = desc(stage.write(output, what)), desc(stage.read(input, what))
        if check:
            self._blocks_fit(out_d, in_d, what, "output")
        return (self._group().all_gather_into_tensor, (out_d, in_d, _timeout_ms(opts)))

    def _all_gather_single(self, output, input, opts, what="all_gather_into_tensor"):
        if opts is None:
            opts = AllgatherOptions()
        stage = Staging()
        call = self._all_gather_calls(stage, output, input, opts, what)
        return self._start(opts, [output], [call], stage.finisher(), (output, input, stage))

    def _allgather_base(self, output, input, opts=None):
        return self._all_gather_single(output, input, opts)

    def all_gather_single(self, output, input, opts=None):
        return self._all_gather_single(output, input, opts)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """output_lists[r][i] receives rank r's input_list[i]. The inputs
        travel as one flat buffer, gathered in one call."""
        what = "all_gather_coalesced"
        if opts is None:
            opts = AllgatherOptions()
        per_rank(len(output_lists), self._size, what, "output_tensor_lists", InvalidArgumentError)
        for t in input_list:
            check_tensor(t, what)
        for r, outputs in enumerate(output_lists):
            if len(outputs) != len(input_list):
                raise InvalidArgumentError(
                    f"{what}: output_tensor_lists[{r}] has {len(outputs)} tensors, expected one "
                    f"per input ({len(input_list)})")
            for i, (o, t) in enumerate(zip(outputs, input_list)):
                check_tensor(o, what)
                if o.numel() != t.numel() or o.dtype != t.dtype:
                    raise InvalidArgumentError(
                        f"{what}: output_tensor_lists[{r}][{i}] ({o.numel()} x {o.dtype}) must "
                        f"match input_tensor_list[{i}] ({t.numel()} x {t.dtype})")
        if not input_list:
            return DoneWork(output_lists)
        dtypes = {t.dtype for t in input_list}
        if len(dtypes) > 1:
            raise InvalidArgumentError(f"{what}: every input must have one dtype, got "
                                       f"{sorted(map(str, dtypes))}")
        flat = torch.cat([t.resolve_conj().resolve_neg().reshape(-1) for t in input_list])
        gathered = torch.empty((self._size, flat.numel()), dtype=flat.dtype)

        def finish():
            for r, outputs in enumerate(output_lists):
                offset = 0
                for o in outputs:
                    n = o.numel()
                    o.copy_(gathered[r, offset:offset + n].view(o.shape))
                    offset += n
        call = (self._group().all_gather_into_tensor,
                (desc(gathered), desc(flat), _timeout_ms(opts)))
        return self._start(opts, output_lists, [call], finish, (flat, gathered))

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        if opts is None:
            opts = AllgatherOptions()
        stage = Staging()
        calls = [self._all_gather_calls(stage, o, i, opts, "all_gather_into_tensor_coalesced",
                                        len(outputs) > 1) for o, i in zip(outputs, inputs)]
        return self._start(opts, outputs, calls, stage.finisher(), (outputs, inputs, stage))

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        return self.allgather_into_tensor_coalesced(outputs, inputs, opts)

    # ---- reduce_scatter ----------------------------------------------------

    def reduce_scatter(self, output_tensors, input_lists, opts=None):
        out = _one(output_tensors, "reduce_scatter")
        inputs = _one(input_lists, "reduce_scatter")
        if opts is None:
            opts = dist.ReduceScatterOptions()
        timeout_ms = _timeout_ms(opts)
        stage = Staging()
        dst = stage.write(out, "reduce_scatter")
        srcs = [stage.read(i, "reduce_scatter") for i in inputs]
        pg = self._group()
        call, after, stacked = self._reduction(
            opts.reduceOp, dst, "reduce_scatter",
            lambda code: (pg.reduce_scatter, (desc(dst), [desc(s) for s in srcs], code,
                                              timeout_ms)),
            lambda st: (pg.all_to_all, ([desc(g) for g in st], [desc(s) for s in srcs],
                                        timeout_ms)))
        if stacked is not None:  # built here of an all_to_all
            self._check_list(inputs, out, "reduce_scatter", "input_list")
        return self._start(opts, output_tensors, [call], _chain(after, stage.finisher()),
                           (out, dst, inputs, srcs, stacked))

    def _reduce_scatter_calls(self, stage, output, input, opts, what, check):
        """The call and finish of one reduce_scatter_tensor; `check`: the
        sizes are checked here (a call of several)."""
        code = _FAST_OPS.get(hash(opts.reduceOp))
        pg = self._group()
        out_d, in_d = _as_is(output), _as_is(input)
        if code is not None and out_d is not None and in_d is not None and \
                out_d[2] not in _COMPLEX and not check:
            # The hot path: nothing to stage, an op the core has.
            return (pg.reduce_scatter_tensor, (out_d, in_d, code, _timeout_ms(opts))), None
        dst = output
        if out_d is None or in_d is None:
            dst = stage.write(output, what)
            out_d, in_d = desc(dst), desc(stage.read(input, what))
        timeout_ms = _timeout_ms(opts)
        call, after, stacked = self._reduction(
            opts.reduceOp, dst, what,
            lambda code: (pg.reduce_scatter_tensor, (out_d, in_d, code, timeout_ms)),
            lambda st: (pg.all_to_all_single, (desc(st), in_d, [], [], timeout_ms)))
        if check or stacked is not None:
            self._blocks_fit(in_d, out_d, what, "input")
        return call, after

    def _reduce_scatter_coalesced(self, outputs, inputs, opts, what):
        if opts is None:
            opts = dist.ReduceScatterOptions()
        stage = Staging()
        calls, folds = [], []
        for o, i in zip(outputs, inputs):
            call, fold = self._reduce_scatter_calls(stage, o, i, opts, what, len(outputs) > 1)
            calls.append(call)
            if fold is not None:
                folds.append(fold)

        def finish():
            for fold in folds:
                fold()
            stage.finish()
        return self._start(opts, outputs, calls, finish if folds or stage.back else None,
                           (outputs, inputs, stage, calls))

    def _reduce_scatter_base(self, output, input, opts=None):
        return self._reduce_scatter_coalesced([output], [input], opts, "reduce_scatter_tensor")

    def reduce_scatter_single(self, output, input, opts=None):
        return self._reduce_scatter_base(output, input, opts)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        return self._reduce_scatter_coalesced(outputs, inputs, opts,
                                              "reduce_scatter_tensor_coalesced")

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        return self.reduce_scatter_tensor_coalesced(outputs, inputs, opts)

    # ---- barrier ---------------------------------------------------------------

    def barrier(self, opts=None):
        if opts is None:
            opts = dist.BarrierOptions()
        return self._start(opts, [], [(self._group().barrier, (_timeout_ms(opts),))])

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """A barrier that names the ranks that do not arrive (monitored.py)."""
        pg = self._group()  # raises once destroyed
        self._monitored += 1
        if timeout is None:
            timeout = timedelta(milliseconds=pg.timeout_ms)
        monitored_barrier(self._store, self._rank, self._size, self._monitored, timeout,
                          wait_all_ranks)

    # ---- point to point (the p2p lane) ------------------------------------------

    def send(self, tensors, dst, tag=0):
        t = _one(tensors, "send")
        pg = self._p2p_group()
        src = Staging().read(t, "send")
        return self._start_p2p(tensors, pg.send, (desc(src), dst, tag, 0), (t, src))

    def recv(self, tensors, src, tag=0):
        t = _one(tensors, "recv")
        pg = self._p2p_group()
        stage = Staging()
        buf = stage.write(t, "recv")
        return self._start_p2p(tensors, pg.recv, (desc(buf), src, tag, 0), (t, buf),
                               stage.finisher())

    def recv_anysource(self, tensors, tag=0):
        """torch.distributed.recv without src: the first message with `tag`
        that any rank sends; the Work's _source_rank() names the sender."""
        t = _one(tensors, "recv")
        pg = self._p2p_group()
        stage = Staging()
        buf = stage.write(t, "recv")
        return self._start_p2p(tensors, pg.recv_any_source, (desc(buf), tag, 0), (t, buf),
                               stage.finisher())

def _chain(*steps):
    """One function running every step that is not None, or None."""
    steps = [f for f in steps if f is not None]
    if len(steps) < 2:
        return steps[0] if steps else None

    def run():
        for f in steps:
            f()
    return run


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

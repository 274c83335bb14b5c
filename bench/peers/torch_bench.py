#!/usr/bin/python3
"""One torch.distributed collective (gloo backend, or meshcomm's) over a
range of message sizes, measured the way meshcomm-bench measures meshcomm,
with the same CSV columns:
op,nranks,bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,check.

    /usr/bin/python3 torch_bench.py OP -n N [-b SIZE] [-e SIZE] [-f F]
        [--iters N] [--warmup N] [--buffers K] [--check]
        [--timeout-ms T] [--time-limit S] [--backend B]
        [--netns NS0,NS1,... --iface NAME]
    OP: all_reduce, broadcast, all_gather, reduce_scatter, all_to_all, barrier

Definitions shared with meshcomm-bench (and bench/peers/mpi_bench.c):
float32, sum, root 0; all_reduce and broadcast in place. For a size S,
count = S/4 and block = count/n: all_reduce and broadcast move count
elements ("count" = count); all_gather takes block and gives block*n;
reduce_scatter takes block*n and gives block; all_to_all takes and gives
block*n (for these three "count" = block). bytes = the larger buffer;
algbw = bytes / time; busbw = algbw * 2(n-1)/n for all_reduce, (n-1)/n for
all_gather, reduce_scatter and all_to_all, 1 for broadcast; barrier is one
row of size 0. Buffer sets rotate (enough to cover 64 MiB, at least 4, at
most 256 MiB); --warmup untimed iterations, then batches grow until one
lasts 20 ms, then about 0.25 s of timed iterations (at least 5, at most
1,000,000) unless --iters is given; each run starts after a barrier and
time is the largest over ranks of each rank's mean time per operation.
Sizes with fewer than one float per rank are skipped (noted on stderr).

--backend: gloo (default); meshcomm, torch.distributed on meshcomm's
backend (meshcomm.torch, needs torch 2.x and meshcomm on PYTHONPATH); or
meshcomm-api, the same calls made through meshcomm's own Python API on the
same torch tensors (the reference the backend's overhead is measured
against); or meshcomm-op (all_reduce only): meshcomm.torch.all_reduce_ on
the backend's default group, the call a model makes in place of
dist.all_reduce (torch.ops.meshcomm.all_reduce_ in eager mode, without
torch's operator dispatch); --dispatch calls torch.ops.meshcomm.all_reduce_
itself, as DeepSpeed's CPU all_reduce is called
(bench/peers/deepspeed_bench.py).

The process forks N ranks; they join through a torch.distributed.FileStore
in a fresh temporary directory (meshcomm-api: a TCP store on a free
loopback port), and Gloo uses the loopback interface.
With --netns (one network namespace made by `ip netns add` per rank), each
rank enters its namespace right after the fork and Gloo uses interface
--iface there: several hosts emulated on one machine (bench/compare.sh
--transport tcp).
Collectives are called the ordinary way (blocking, async_op=False), so the
numbers include torch's per-call Python and dispatch overhead; with
--async-op each call is issued with async_op=True and its Work waited on at
once (what an async call costs over a blocking one). all_gather
and reduce_scatter use the tensor forms (all_gather_into_tensor,
reduce_scatter_tensor) when this torch's gloo backend has them, else the
list forms; an operation the backend lacks is reported on stderr and its
sizes are skipped.
"""

import argparse
import ctypes
import datetime
import math
import os
import shutil
import signal
import socket
import sys
import tempfile
import time

import torch
import torch.distributed as dist

OPS = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all", "barrier")
WORD = 4  # float32
SLOT_ALIGN = 64
COVER_BYTES = 64 << 20
MAX_TOTAL_BYTES = 256 << 20
MIN_SLOTS = 4
MAX_ITERS = 1_000_000
CALIBRATION_SECONDS = 0.02
TARGET_SECONDS = 0.25
EXIT_RUNTIME = 3
HEADER = "op,nranks,bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,check"


def parse_size(text):
    units = {"": 0, "K": 10, "M": 20, "G": 30}
    body = text.upper()
    if body.endswith("B"):
        body = body[:-1]
    suffix = body[-1:] if body[-1:] in ("K", "M", "G") else ""
    digits = body[: len(body) - len(suffix)]
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(f"expected a size like 8, 64K or 1M, got {text!r}")
    value = int(digits) << units[suffix]
    if value > 64 << 30:
        raise argparse.ArgumentTypeError(f"size {text!r} is above 64G")
    return value


def at_least(lo):
    def parse(text):
        value = int(text)
        if value < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {text!r}")
        return value
    return parse


def add_sweep_options(p):
    """The options of the sweep and its checks, which every torch-based
    peer (this one, deepspeed_bench.py) takes alike."""
    p.add_argument("-b", "--minbytes", type=parse_size, default=32 << 20)
    p.add_argument("-e", "--maxbytes", type=parse_size, default=32 << 20)
    p.add_argument("-f", "--stepfactor", type=at_least(2), default=2)
    p.add_argument("--iters", type=at_least(1), default=0, help="0 or absent: adaptive")
    p.add_argument("--warmup", type=at_least(0), default=5)
    p.add_argument("--buffers", type=at_least(1), default=0, help="absent: automatic")
    p.add_argument("--check", action="store_true", help="verify one operation per size")
    p.add_argument("--csv", action="store_true", help="accepted; CSV is the only format")
    p.add_argument("--timeout-ms", type=at_least(1), default=60000)
    p.add_argument("--time-limit", type=at_least(1), default=900)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("op", choices=OPS)
    p.add_argument("-n", "--nranks", type=at_least(1), required=True)
    add_sweep_options(p)
    p.add_argument("--backend", choices=("gloo", "meshcomm", "meshcomm-api", "meshcomm-op"),
                   default="gloo")
    p.add_argument("--async-op", action="store_true",
                   help="issue with async_op=True, then wait (torch backends)")
    p.add_argument("--dispatch", action="store_true",
                   help="with --backend meshcomm-op: through torch's operator dispatch")
    p.add_argument("--netns", type=lambda t: t.split(","), default=None,
                   help="comma-separated network namespaces, one per rank")
    p.add_argument("--iface", default=None, help="with --netns: the interface Gloo uses")
    args = p.parse_args(argv)
    if args.netns is not None and len(args.netns) != args.nranks:
        p.error(f"--netns names {len(args.netns)} namespace(s) for {args.nranks} ranks; "
                "give one per rank")
    if args.async_op and args.backend == "meshcomm-api":
        p.error("--async-op measures torch.distributed's async calls: use it with --backend "
                "gloo or meshcomm")
    if args.backend == "meshcomm-op" and (args.op != "all_reduce" or args.async_op):
        p.error("--backend meshcomm-op measures the all_reduce operator (blocking) only")
    if (args.netns is None) != (args.iface is None):
        p.error("--netns and --iface go together")
    if args.minbytes > args.maxbytes:
        p.error("-b is larger than -e")
    return args


def sweep(args):
    """meshcomm-bench's sizes: multiply (0 steps to 1) until past -e."""
    if args.op == "barrier":
        return [0]
    sizes, s = [], args.minbytes
    while s <= args.maxbytes:
        sizes.append(s)
        s = 1 if s == 0 else s * args.stepfactor
    return sizes


class Shape:
    """Element counts of one size (meshcomm-bench's shapeFor())."""

    def __init__(self, op, nbytes, n):
        count = nbytes // WORD
        block = count // n
        share = (n - 1) / n
        self.in_place = op in ("all_reduce", "broadcast")
        if op == "barrier":
            self.send = self.recv = self.count = 0
            self.bus_factor = 0.0
        elif self.in_place:
            self.send = self.recv = self.count = count
            self.bus_factor = 2 * share if op == "all_reduce" else 1.0
        else:
            self.send = block if op == "all_gather" else block * n
            self.recv = block if op == "reduce_scatter" else block * n
            self.count = block
            self.bus_factor = share
        self.bytes = max(self.send, self.recv) * WORD


def round_up(v, to):
    return (v + to - 1) // to * to


def slot_count(shape):
    """meshcomm-bench's defaultSlotCount()."""
    slot_bytes = round_up(shape.send * WORD, SLOT_ALIGN)
    if not shape.in_place:
        slot_bytes += round_up(shape.recv * WORD, SLOT_ALIGN)
    if slot_bytes == 0:
        return 1
    slots = max(-(-COVER_BYTES // slot_bytes), MIN_SLOTS)
    return min(slots, max(1, MAX_TOTAL_BYTES // slot_bytes))


def values(rank, start, length):
    """Exact in float32 and distinct per rank (see mpi_bench.c)."""
    idx = torch.arange(start, start + length, dtype=torch.int64)
    return ((rank + 1) * 1000 + idx % 997).to(torch.float32)


class MeshcommAPI:
    """The calls Rank makes, through meshcomm's own Python API."""

    ReduceOp = dist.ReduceOp

    def __init__(self):
        import meshcomm
        self.mc = meshcomm

    def _op(self, op):
        return "max" if op == dist.ReduceOp.MAX else "sum"

    def all_reduce(self, t, op=dist.ReduceOp.SUM):
        self.mc.all_reduce(t, op=self._op(op))

    def broadcast(self, t, src):
        self.mc.broadcast(t, src)

    def all_gather_into_tensor(self, out, inp):
        self.mc.all_gather_into_tensor(out, inp)

    def reduce_scatter_tensor(self, out, inp):
        self.mc.reduce_scatter_tensor(out, inp)

    def all_to_all_single(self, out, inp):
        self.mc.all_to_all_single(out, inp)

    def barrier(self):
        self.mc.barrier()


COMM = dist  # what Rank calls: torch.distributed, or MeshcommAPI


class Rank:
    def __init__(self, args, rank):
        self.args = args
        self.rank = rank
        self.n = args.nranks
        # Probed only for the operation being measured, so that no other
        # operation's support shows up in the notes.
        self.all_gather = self._pick_all_gather() if args.op == "all_gather" else None
        self.reduce_scatter = self._pick_reduce_scatter() if args.op == "reduce_scatter" else None

    def note(self, text):
        if self.rank == 0:
            print(f"torch_bench: {text}", file=sys.stderr, flush=True)

    # --- which form of all_gather / reduce_scatter this backend supports ---

    def _supported(self, call):
        # An unsupported collective fails on every rank alike, at the call,
        # before any message is sent, so probing cannot leave peers waiting.
        try:
            call()
            return True
        except (RuntimeError, NotImplementedError, AttributeError) as e:
            self.last_error = str(e).splitlines()[0]
            return False

    def _pick_all_gather(self):
        n = self.n
        src, dst = torch.ones(1), torch.zeros(n)
        if self._supported(lambda: COMM.all_gather_into_tensor(dst, src)):
            return lambda out, inp, **kw: COMM.all_gather_into_tensor(out, inp, **kw)
        self.note(f"all_gather_into_tensor unsupported ({self.last_error}); using all_gather(list)")
        if self._supported(lambda: COMM.all_gather(list(dst.chunk(n)), src)):
            return lambda out, inp, **kw: COMM.all_gather(list(out.chunk(n)), inp, **kw)
        self.note(f"all_gather unsupported ({self.last_error})")
        return None

    def _pick_reduce_scatter(self):
        n = self.n
        src, dst = torch.ones(n), torch.zeros(1)
        if self._supported(lambda: COMM.reduce_scatter_tensor(dst, src)):
            return lambda out, inp, **kw: COMM.reduce_scatter_tensor(out, inp, **kw)
        self.note(f"reduce_scatter_tensor unsupported ({self.last_error})")
        if self._supported(lambda: COMM.reduce_scatter(dst, list(src.chunk(n)))):
            return lambda out, inp, **kw: COMM.reduce_scatter(out, list(inp.chunk(n)), **kw)
        self.note(f"reduce_scatter unsupported ({self.last_error})")
        return None

    # --- one size ---

    def issue(self, inp, out):
        op = self.args.op
        kw = {"async_op": True} if self.args.async_op else {}
        if op == "all_reduce":
            work = COMM.all_reduce(inp, **kw)
        elif op == "broadcast":
            work = COMM.broadcast(inp, src=0, **kw)
        elif op == "all_gather":
            work = self.all_gather(out, inp, **kw)
        elif op == "reduce_scatter":
            work = self.reduce_scatter(out, inp, **kw)
        elif op == "all_to_all":
            work = COMM.all_to_all_single(out, inp, **kw)
        else:
            work = COMM.barrier(**kw)
        if kw:
            work.wait()

    def allocate(self, shape, slots):
        self.shape, self.slots, self.next = shape, slots, 0
        self.in_stride = round_up(shape.send * WORD, SLOT_ALIGN) // WORD
        self.flat_in = torch.empty(max(1, self.in_stride * slots), dtype=torch.float32)
        if shape.in_place:
            self.out_stride, self.flat_out = self.in_stride, self.flat_in
        else:
            self.out_stride = round_up(shape.recv * WORD, SLOT_ALIGN) // WORD
            # Zeroed, so every page is faulted in before timing.
            self.flat_out = torch.zeros(max(1, self.out_stride * slots), dtype=torch.float32)
        if shape.send > 0:
            self.flat_in[: self.in_stride * slots].view(slots, self.in_stride)[:, : shape.send] = \
                values(self.rank, 0, shape.send)

    def views(self, k):
        # Sliced per call rather than kept in a list: at small sizes there
        # are up to a million sets, and slicing costs about a microsecond.
        i, o = k * self.in_stride, k * self.out_stride
        return self.flat_in[i : i + self.shape.send], self.flat_out[o : o + self.shape.recv]

    def run_batch(self, iters):
        COMM.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            inp, out = self.views(self.next)
            self.issue(inp, out)
            self.next = (self.next + 1) % self.slots
        return time.perf_counter() - start

    def over_ranks(self, value, op):
        t = torch.tensor([value], dtype=torch.float64)
        COMM.all_reduce(t, op=op)
        return t.item()

    def calibrate(self):
        """meshcomm-bench's calibrate()."""
        batch = 1
        while True:
            t = self.over_ranks(self.run_batch(batch), dist.ReduceOp.MAX)
            if t >= CALIBRATION_SECONDS or batch >= MAX_ITERS:
                per_iter = t / batch
                break
            grow = 1.2 * CALIBRATION_SECONDS / t if t > 0 else 100.0
            batch = min(MAX_ITERS, max(batch * 2, math.ceil(batch * min(grow, 100.0))))
        want = math.ceil(TARGET_SECONDS / per_iter) if per_iter > 0 else MAX_ITERS
        return max(5, min(MAX_ITERS, want))

    def check_once(self):
        """One operation on set 0 with known inputs; this rank's wrong elements."""
        op, s, n, r = self.args.op, self.shape, self.n, self.rank
        inp, out = self.views(0)
        if op == "broadcast" and r != 0:
            inp.fill_(-1.0)
        else:
            inp.copy_(values(r, 0, s.send))
        if not s.in_place:
            out.fill_(-1.0)
        self.issue(inp, out)
        block = s.count
        if op == "all_reduce":
            want = sum(values(j, 0, s.recv).double() for j in range(n)).float()
        elif op == "broadcast":
            want = values(0, 0, s.recv)
        elif op == "all_gather":
            want = torch.cat([values(j, 0, block) for j in range(n)])
        elif op == "reduce_scatter":
            want = sum(values(j, r * block, block).double() for j in range(n)).float()
        elif op == "all_to_all":
            want = torch.cat([values(j, r * block, block) for j in range(n)])
        else:
            return 0
        wrong = int((out != want).sum().item())
        inp.copy_(values(r, 0, s.send))  # back to the timing data
        return wrong

    def run(self):
        args = self.args
        if self.rank == 0:
            print(HEADER, flush=True)
        missing = (args.op == "all_gather" and self.all_gather is None) or \
                  (args.op == "reduce_scatter" and self.reduce_scatter is None)
        if missing:
            self.note(f"torch {torch.__version__}'s {args.backend} backend has no {args.op}; "
                      "skipped")
            return 0
        failed = False
        for nbytes in sweep(args):
            shape = Shape(args.op, nbytes, self.n)
            if args.op != "barrier" and (shape.send == 0 or shape.recv == 0):
                self.note(f"{args.op}, {nbytes} B: fewer than one float32 per rank; skipped")
                continue
            self.allocate(shape, args.buffers or slot_count(shape))
            if args.warmup:
                self.run_batch(args.warmup)
            iters = args.iters or self.calibrate()
            seconds = self.over_ranks(self.run_batch(iters) / iters, dist.ReduceOp.MAX)
            check = "skip"
            if args.check:
                wrong = self.over_ranks(self.check_once(), dist.ReduceOp.SUM)
                check = "fail" if wrong else "ok"
                failed |= wrong > 0
            self.flat_in = self.flat_out = None
            if self.rank == 0:
                algbw = shape.bytes / seconds / 1e9 if seconds > 0 else 0.0
                print(f"{args.op},{self.n},{shape.bytes},{shape.count},float32,{seconds * 1e6:.3f},"
                      f"{algbw:.4f},{algbw * shape.bus_factor:.4f},{check}", flush=True)
        return 1 if failed else 0


class OperatorRank(Rank):
    """The timed call is meshcomm.torch.all_reduce_ (or, --dispatch, the
    torch operator), not dist.all_reduce."""

    def __init__(self, args, rank):
        super().__init__(args, rank)
        import meshcomm.torch
        self.handle = meshcomm.torch.group_handle()
        self.all_reduce_ = (torch.ops.meshcomm.all_reduce_ if args.dispatch
                            else meshcomm.torch.all_reduce_)

    def issue(self, inp, out):
        self.all_reduce_(inp, self.handle)


def enter_netns(name):
    """Moves this process into network namespace `name` (setns(2); this
    Python's os module has no setns)."""
    CLONE_NEWNET = 0x40000000
    path = f"/var/run/netns/{name}"
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot enter network namespace {path}: {os.strerror(err)} "
                          f"(needs root and `ip netns add {name}`)")
    finally:
        os.close(fd)


def tied_to(parent):
    """Has this rank killed when `parent`, the process that supervises it,
    dies: a rank never outlives it. False when it is already gone."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    return os.getppid() == parent


def child(args, rank, store_dir, parent, port):
    if not tied_to(parent):
        return EXIT_RUNTIME
    if args.netns:
        enter_netns(args.netns[rank])
        os.environ["GLOO_SOCKET_IFNAME"] = args.iface
    else:
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # loopback, whatever the hostname resolves to
    torch.set_num_threads(1)  # ranks share the cores; no intra-op pools on top
    timeout = datetime.timedelta(milliseconds=args.timeout_ms)
    global COMM
    if args.backend == "meshcomm-api":
        import meshcomm
        meshcomm.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                    world_size=args.nranks, timeout=timeout)
        COMM = MeshcommAPI()
    else:
        backend = args.backend
        if backend in ("meshcomm", "meshcomm-op"):
            import meshcomm.torch  # noqa: F401 - registers the backend
            backend = "meshcomm"
        store = dist.FileStore(os.path.join(store_dir, "store"), args.nranks)
        dist.init_process_group(backend, store=store, rank=rank, world_size=args.nranks,
                                timeout=timeout)
    rc = (OperatorRank if args.backend == "meshcomm-op" else Rank)(args, rank).run()
    COMM.barrier()  # nobody leaves while a peer still needs its connections
    if args.backend in ("meshcomm", "meshcomm-op"):
        dist.destroy_process_group()
    return rc


def fork_ranks(args, tool, run_rank):
    """Forks one process per rank, which calls run_rank(rank) and exits
    with what it returns (EXIT_RUNTIME, saying why as `tool`, when it
    raises), and supervises them. Returns the run's exit code."""
    pids = []
    sys.stdout.flush()
    for rank in range(args.nranks):
        pid = os.fork()
        if pid == 0:
            rc = EXIT_RUNTIME
            try:
                rc = run_rank(rank)
            except Exception as e:  # report, then leave without the parent's cleanup
                print(f"{tool}: rank {rank}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
        pids.append(pid)
    return supervise(args, pids)


def supervise(args, pids):
    """Waits for every rank; the first failure, a signal or the time limit
    kills the rest (by pid). Returns the run's exit code."""
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stop.append(signum))
    deadline = time.monotonic() + args.time_limit
    alive = dict(enumerate(pids))
    result = 0

    def kill_rest():
        for pid in alive.values():
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        alive.clear()

    while alive:
        for r, pid in list(alive.items()):
            got, status = os.waitpid(pid, os.WNOHANG)
            if got != pid:
                continue
            del alive[r]
            code = os.waitstatus_to_exitcode(status)
            if code == 1:
                result = 1  # a --check failed; the others go on
            elif code != 0:
                print(f"torch_bench: rank {r} failed (exit {code}); stopping the others",
                      file=sys.stderr, flush=True)
                kill_rest()
                return EXIT_RUNTIME
        if alive and (stop or time.monotonic() >= deadline):
            why = "interrupted" if stop else "--time-limit exceeded"
            print(f"torch_bench: {why}; killing {len(alive)} rank(s)", file=sys.stderr, flush=True)
            kill_rest()
            return EXIT_RUNTIME
        time.sleep(0.01)
    return result


def main(argv):
    args = parse_args(argv)
    store_dir = tempfile.mkdtemp(prefix="torch_bench.")
    parent = os.getpid()
    with socket.socket() as sock:  # meshcomm-api's store port
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    try:
        return fork_ranks(args, "torch_bench",
                          lambda rank: child(args, rank, store_dir, parent, port))
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

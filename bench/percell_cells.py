"""The data of a per-cell comparison (bench/percell.py): the libraries,
operations and transports a cell is made of, the target of each cell, one
run as runs.csv holds it, and the verdict of a cell from its runs. Pure
functions over runs, shared by the driver (percell.py) and the report
(percell_report.py), and tested without running anything
(test_percell.py)."""

import csv
import statistics
from collections import defaultdict
from dataclasses import dataclass, fields

from compare_report import busbw

# The library compared with the others (--reference): meshcomm's C++ API,
# or meshcomm through torch (the torch targets): torch.distributed on
# meshcomm's backend, or meshcomm.torch.all_reduce_.
REFERENCES = ["meshcomm", "torch-meshcomm", "torch-meshcomm-op"]
TORCH_REFERENCES = ["torch-meshcomm", "torch-meshcomm-op"]
LIBS = ["meshcomm", "torch-meshcomm", "torch-meshcomm-op", "impi", "mpich5", "ompi5", "oneccl", "deepspeed",
        "openmpi", "gloo", "torch-gloo"]
OPS = ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all"]
TRANSPORTS = ["shm", "tcp"]

LATENCY_MAX = 4 << 10
BANDWIDTH_MIN = 64 << 10
SHM_HIGH_MIN = 1 << 20
# A verdict needs at least 80% of the rounds on its side: 4 of 5, 9 of 11.
SHARE_NUM, SHARE_DEN = 4, 5
MAX_FAILURES = 2

VERDICT_ORDER = ["met", "missed", "undecided", "no target", "no peer", "no data"]


@dataclass(frozen=True)
class Target:
    """measure: "time" (meshcomm time / peer time, lower is better for
    meshcomm) or "busbw" (meshcomm busbw / peer busbw, higher is better);
    bound None: no target, the ratio is only reported."""

    measure: str
    bound: float | None

    def met(self, ratio):
        return ratio <= self.bound if self.measure == "time" else ratio >= self.bound

    def __str__(self):
        if self.bound is None:
            return "none (time)"
        return f"{self.measure} {'<=' if self.measure == 'time' else '>='} {self.bound:.1f}"


# Through torch: up to 64 KiB no slower than the fastest peer (DeepSpeed's
# shared-memory op called as a torch op); from 1 MiB within 1.2x of
# meshcomm's C++ time.
TORCH_LATENCY_MAX = 64 << 10
TORCH_BANDWIDTH_MIN = 1 << 20


def target_for(transport, size, reference="meshcomm"):
    if reference in TORCH_REFERENCES:
        if size <= TORCH_LATENCY_MAX:
            return Target("time", 1.0)
        return Target("time", 1.2 if size >= TORCH_BANDWIDTH_MIN else None)
    if size <= LATENCY_MAX:
        return Target("time", 0.9)
    if size >= BANDWIDTH_MIN:
        return Target("busbw", 1.2 if transport == "shm" and size >= SHM_HIGH_MIN else 1.0)
    return Target("time", None)


@dataclass
class Run:
    """One run of one library on one cell, as runs.csv holds it. outcome:
    ok (a row with a time), skip (the library cannot run the cell) or fail."""

    round: int
    position: int
    lib: str
    transport: str
    op: str
    nranks: int
    size: int
    bytes: int | None = None
    time_us: float | None = None
    busbw_gbps: float | None = None
    check: str = ""
    exit: int = 0
    outcome: str = "ok"
    note: str = ""
    timestamp: str = ""
    load1: float | None = None
    # bench/probes/core_placement.c's cache-line round trip between CPU 0
    # and CPU 1, measured just before this run (None: not measured).
    round_trip_ns: float | None = None

    @property
    def cell(self):
        return (self.transport, self.op, self.nranks, self.size)


FIELDS = [f.name for f in fields(Run)]
CONVERT = {"round": int, "position": int, "nranks": int, "size": int, "bytes": int,
           "time_us": float, "busbw_gbps": float, "exit": int, "load1": float,
           "round_trip_ns": float}


def write_run(f, run):
    csv.writer(f).writerow(["" if getattr(run, k) is None else getattr(run, k) for k in FIELDS])
    f.flush()


def read_runs(path):
    with open(path, newline="") as f:
        return [Run(**{k: (CONVERT[k](v) if v != "" else None) if k in CONVERT else v
                       for k, v in row.items()})
                for row in csv.DictReader(f)]


def rotation(libs, rnd):
    """The order of round rnd (1-based): it starts at libs[(rnd-1) mod L]."""
    k = (rnd - 1) % len(libs)
    return libs[k:] + libs[:k]


def decide(ratios, target, min_rounds):
    if target.bound is None:
        return "no target"
    n = len(ratios)
    if n == 0 or n < min_rounds:
        return "undecided"
    meeting = sum(1 for x in ratios if target.met(x))
    if target.met(statistics.median(ratios)):
        return "met" if meeting * SHARE_DEN >= SHARE_NUM * n else "undecided"
    return "missed" if (n - meeting) * SHARE_DEN >= SHARE_NUM * n else "undecided"


def active_libs(libs, cell_runs):
    """The libraries still to run on a cell, given its runs so far."""
    out = []
    for lib in libs:
        mine = [r for r in cell_runs if r.lib == lib]
        if any(r.outcome == "skip" for r in mine):
            continue
        if sum(1 for r in mine if r.outcome == "fail") >= MAX_FAILURES:
            continue
        out.append(lib)
    return out


@dataclass
class LibStats:
    rounds: int
    time_min: float
    time_median: float
    busbw_max: float
    busbw_median: float


@dataclass
class CellResult:
    cell: tuple
    target: Target
    stats: dict          # lib -> LibStats
    peer_ratios: dict    # peer -> [meshcomm time / peer time], by round
    best: str | None
    ratios: list         # per round, against best, in target.measure
    verdict: str


def run_busbw(run):
    return busbw(run.op, run.nranks, run.bytes, run.time_us)


def summarize(cell, cell_runs, min_rounds, lib_order=LIBS, reference="meshcomm"):
    transport, _, _, size = cell
    target = target_for(transport, size, reference)
    by_lib = defaultdict(dict)  # lib -> round -> run
    for r in cell_runs:
        if r.outcome == "ok":
            by_lib[r.lib][r.round] = r
    stats = {}
    for lib, runs in by_lib.items():
        times = [r.time_us for r in runs.values()]
        bws = [run_busbw(r) for r in runs.values()]
        stats[lib] = LibStats(len(runs), min(times), statistics.median(times),
                              max(bws), statistics.median(bws))
    mine = by_lib.get(reference, {})
    peer_ratios = {}
    for lib in sorted(by_lib, key=lambda l: lib_key(l, lib_order)):
        common = sorted(set(mine) & set(by_lib[lib]))
        if lib != reference and common:
            peer_ratios[lib] = [mine[k].time_us / by_lib[lib][k].time_us for k in common]
    best = min(peer_ratios, key=lambda l: (stats[l].time_median, lib_key(l, lib_order)),
               default=None)
    ratios = []
    if best is not None:
        for k in sorted(set(mine) & set(by_lib[best])):
            m, p = mine[k], by_lib[best][k]
            ratios.append(m.time_us / p.time_us if target.measure == "time"
                          else run_busbw(m) / run_busbw(p))
    if not mine:
        verdict = "no data"
    elif best is None:
        verdict = "no peer"
    else:
        verdict = decide(ratios, target, min_rounds)
    return CellResult(cell, target, stats, peer_ratios, best, ratios, verdict)


FAR_ROUND_TRIP_NS = 250.0


def ratios_by_placement(result, cell_runs, reference="meshcomm"):
    """The cell's per-round ratios against its best peer, split by where the
    CPUs were when the reference ran: {"near": [...], "far": [...]}; rounds
    whose reference run has no probe are left out."""
    out = {"near": [], "far": []}
    if result.best is None:
        return out
    by_lib = defaultdict(dict)
    for r in cell_runs:
        if r.outcome == "ok":
            by_lib[r.lib][r.round] = r
    mine, peer = by_lib.get(reference, {}), by_lib.get(result.best, {})
    for k in sorted(set(mine) & set(peer)):
        m, p = mine[k], peer[k]
        if m.round_trip_ns is None:
            continue
        ratio = (m.time_us / p.time_us if result.target.measure == "time"
                 else run_busbw(m) / run_busbw(p))
        out["far" if m.round_trip_ns >= FAR_ROUND_TRIP_NS else "near"].append(ratio)
    return out


def lib_key(lib, order=LIBS):
    return (order.index(lib) if lib in order else len(order), lib)


def op_key(op):
    return (OPS.index(op) if op in OPS else len(OPS), op)


def cell_key(cell):
    transport, op, n, size = cell
    return (TRANSPORTS.index(transport), op_key(op), n, size)

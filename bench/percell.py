#!/usr/bin/python3
"""Per-cell comparison of meshcomm with peer libraries.

A cell is (transport, op, ranks, size). Each round of a cell runs every
library once on that cell, back to back (bench/peers/run_peer.sh LIB
TRANSPORT OP NRANKS SIZE SIZE 2), so that a slow minute of the host falls
on all of them; the order rotates: round 1 starts with the first of the
cell's L libraries, round 2 with the second, round L+1 with the first
again. Every cell gets --rounds rounds; a cell whose
verdict is still undecided then gets more, up to --max-rounds, while the
time budget (--budget-min, for the whole run) lasts. The rounds go through
the cells in passes (round 1 of every cell, then round 2, ...), so that
when the budget runs out every cell has had as many rounds as the others.
A round is not started when the cell's previous round would no longer fit
in the budget; one that started runs to its end.

Targets, per cell, of meshcomm against the best peer:
  latency cells (size <= 4 KiB): meshcomm time / peer time <= 0.9;
  bandwidth cells (size >= 64 KiB): meshcomm busbw / peer busbw >= 1.0,
    and >= 1.2 over shm from 1 MiB;
  in between: the time ratio is reported, there is no target.
With --reference torch-meshcomm (torch.distributed on meshcomm's backend)
the compared library is that one, and the targets are the torch ones:
time ratio <= 1.0 up to 64 KiB (peer: deepspeed, DeepSpeed's shared-memory
op called as a torch op), <= 1.2 from 1 MiB (peer: meshcomm, its C++ API).

The best peer of a cell is the peer with the lowest median time over its
rounds, and every round's ratio is taken against that one library (in that
same round). Taking the fastest peer of each round instead would judge
meshcomm against the minimum of several noisy measurements, which is lower
than any single library's typical time, a peer that does not exist.

Verdict of a cell, from its per-round ratios against the best peer (only
rounds where both gave a time count, and at least --rounds of them):
  met:       the median ratio meets the target and at least 80% of the
             rounds do (4 of 5);
  missed:    the median misses it and at least 80% of the rounds miss;
  undecided: otherwise, or fewer rounds than --rounds.

A library that reports itself not installed (exit 2), without that
transport or operation (exit 4), or prints no row for the size (fewer than
one element per rank) is dropped from the cell with a note; one that fails
(a timeout, a failed --check, any other exit) is run again in the next
round, and dropped from the cell after failing twice.

Before each run, bench/probes/core_placement.c (built into --out DIR)
measures how long a cache line takes between CPU 0 and CPU 1. On a virtual
machine the host moves the vCPUs, and a line's round trip is 75-160 ns for
seconds, then 400-600 ns (docs/tuning.md, "Where the cores are"), which
changes what every shared-memory library costs. The report sorts each
cell's rounds by the reference's run: near (below 250 ns) or far, with the
median ratio against the best peer in each. --no-placement skips it.

Output in --out DIR: runs.csv (every run, appended as it ends), settings.json
(the run's parameters and why it stopped), report.md (per-cell verdicts,
per-peer ratios, per-library times) and, when matplotlib is importable,
percell_OP.png (median time against size, one line per library).
--report-only DIR rebuilds report.md and the plots from runs.csv.

    /usr/bin/python3 bench/percell.py --quick
    bench/compare.sh --per-cell --transports shm --ops all_reduce --nranks 2
"""

import argparse
import csv
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, fields

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_report import busbw, human, shown, sig  # noqa: E402
from peer_run import run_peer, utc_now  # noqa: E402

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


def parse_size(text):
    """8, 4K, 64KiB, 1M, 16MB -> bytes (K, M, G are powers of 1024)."""
    m = re.fullmatch(r"(\d+)\s*([kmg]?)(i?b)?", text.strip(), re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: '{text}'")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


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


class PlacementProbe:
    """bench/probes/core_placement.c, built into a results directory; calling
    it returns the round trip in ns, or None where it cannot run (one CPU,
    no compiler, no AVX2)."""

    def __init__(self, out_dir):
        self.binary = os.path.join(out_dir, "core_placement")
        source = os.path.join(HERE, "probes", "core_placement.c")
        try:
            subprocess.run(["gcc", "-O2", "-mavx2", "-pthread", "-o", self.binary, source],
                           check=True, capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            self.binary = None

    def __call__(self):
        if self.binary is None:
            return None
        try:
            out = subprocess.run([self.binary, "--rounds", "20"], capture_output=True, text=True,
                                 check=True, timeout=60).stdout
            return float(out.split()[2])  # "round trip 112 ns | ..."
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return None


def lib_key(lib, order=LIBS):
    return (order.index(lib) if lib in order else len(order), lib)


def op_key(op):
    return (OPS.index(op) if op in OPS else len(OPS), op)


def cell_key(cell):
    transport, op, n, size = cell
    return (TRANSPORTS.index(transport), op_key(op), n, size)


class Driver:
    """Runs the rounds. measure(lib, cell) -> dict of Run fields (the
    outcome of one run); record(run) keeps it (runs.csv). clock and budget
    in seconds."""

    def __init__(self, cells, libs, min_rounds, max_rounds, budget_s, measure, record,
                 clock=time.monotonic, log=lambda text: None, reference="meshcomm"):
        self.cells, self.libs, self.reference = cells, libs, reference
        self.min_rounds, self.max_rounds, self.budget_s = min_rounds, max_rounds, budget_s
        self.measure, self.record, self.clock, self.log = measure, record, clock, log
        self.runs = defaultdict(list)  # cell -> [Run]

    def wants_round(self, cell, rnd):
        active = active_libs(self.libs, self.runs[cell])
        if self.reference not in active or len(active) < 2:
            return False
        return (rnd <= self.min_rounds or
                summarize(cell, self.runs[cell], self.min_rounds, self.libs,
                          self.reference).verdict == "undecided")

    def round(self, cell, rnd):
        order = rotation(active_libs(self.libs, self.runs[cell]), rnd)
        for pos, lib in enumerate(order, 1):
            transport, op, n, size = cell
            run = Run(rnd, pos, lib, transport, op, n, size, **self.measure(lib, cell))
            self.runs[cell].append(run)
            self.record(run)

    def run(self):
        """Returns why it stopped: "finished" or "budget"."""
        start = self.clock()
        last_round_s = {}
        for rnd in range(1, self.max_rounds + 1):
            todo = [c for c in self.cells if self.wants_round(c, rnd)]
            if not todo:
                break
            out_of_budget = False
            for cell in todo:
                if self.clock() - start + last_round_s.get(cell, 0.0) > self.budget_s:
                    out_of_budget = True
                    continue
                t0 = self.clock()
                self.round(cell, rnd)
                last_round_s[cell] = self.clock() - t0
            if out_of_budget:
                self.log(f"time budget used up in round {rnd}")
                return "budget"
        return "finished"




# ---- report ----

def fmt_ratios(xs):
    if not xs:
        return "n/a"
    return f"{sig(statistics.median(xs))} [{sig(min(xs))}-{sig(max(xs))}]"


def fmt_pair(stats):
    return f"{sig(stats.time_min, 4)} / {sig(stats.time_median, 4)}" if stats else "n/a"


def cell_name(cell):
    transport, op, n, size = cell
    return f"{transport} {op} {n} ranks {human(size)}"


def verdict_tables(results, reference):
    """One markdown table per (transport, op, nranks), rows by size."""
    out = []
    groups = defaultdict(list)
    for res in results:
        groups[res.cell[:3]].append(res)
    for (transport, op, n), rows in groups.items():
        out.append(f"\n### {transport}, {op}, {n} ranks\n")
        out.append("| size | " + reference + " min / median (us) | best peer | peer min / median (us) "
                   "| target | median ratio [min-max] | rounds | verdict |")
        out.append("|---:|---:|---|---:|---|---:|---:|---|")
        for res in rows:
            best = res.best or "none"
            out.append(f"| {human(res.cell[3])} | {fmt_pair(res.stats.get(reference))} | {best} "
                       f"| {fmt_pair(res.stats.get(res.best))} | {res.target} "
                       f"| {fmt_ratios(res.ratios)} | {len(res.ratios)} | {res.verdict} |")
    return out


def plot(results, libs, out_dir, reference):
    """percell_OP.png per op: median time against size, log-log, one line
    per library, one subplot per (nranks, transport). Returns the paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for op in sorted({r.cell[1] for r in results}, key=op_key):
        of_op = [r for r in results if r.cell[1] == op]
        transports = [t for t in TRANSPORTS if any(r.cell[0] == t for r in of_op)]
        ranks = sorted({r.cell[2] for r in of_op})
        fig, axes = plt.subplots(len(ranks), len(transports), squeeze=False,
                                 figsize=(6.5 * len(transports), 4.5 * len(ranks)))
        colors = {lib: plt.cm.tab10(i % 10) for i, lib in enumerate(libs)}
        for i, n in enumerate(ranks):
            for j, transport in enumerate(transports):
                ax = axes[i][j]
                cells = sorted((r for r in of_op if r.cell[0] == transport and r.cell[2] == n),
                               key=lambda r: r.cell[3])
                for lib in libs:
                    pts = [(r.cell[3], r.stats[lib].time_median) for r in cells if lib in r.stats]
                    if pts:
                        ax.plot(*zip(*pts), marker="o", markersize=4, color=colors[lib],
                                linewidth=2.5 if lib == reference else 1.2, label=lib)
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.set_xticks([r.cell[3] for r in cells], [human(r.cell[3]) for r in cells])
                ax.set_xlabel("size")
                ax.set_ylabel("median time (us)")
                ax.set_title(f"{transport}, {n} ranks")
                ax.grid(True, which="both", alpha=0.3)
                ax.legend(fontsize=7)
        fig.suptitle(f"{op}: median time per operation over rounds (lower is better)")
        fig.tight_layout()
        path = os.path.join(out_dir, f"percell_{op}.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def report(out_dir, min_rounds=None):
    """Writes out_dir/report.md from runs.csv (and settings.json) and
    returns the verdict tables' lines."""
    runs = read_runs(os.path.join(out_dir, "runs.csv"))
    settings = {}
    settings_path = os.path.join(out_dir, "settings.json")
    if os.path.exists(settings_path):
        with open(settings_path) as f:
            settings = json.load(f)
    min_rounds = min_rounds or settings.get("rounds", 5)
    reference = settings.get("reference", "meshcomm")
    libs = settings.get("libs") or sorted({r.lib for r in runs}, key=lib_key)
    by_cell = defaultdict(list)
    for r in runs:
        by_cell[r.cell].append(r)
    results = [summarize(c, by_cell[c], min_rounds, libs, reference)
               for c in sorted(by_cell, key=cell_key)]
    peers = [l for l in libs if l != reference and any(l in r.peer_ratios for r in results)]

    lines = [f"# Per-cell comparison: {reference} against its peers\n"]
    loads = [r.load1 for r in runs if r.load1 is not None]
    stamps = sorted(r.timestamp for r in runs if r.timestamp)
    lines.append(f"Source: `{shown(os.path.join(out_dir, 'runs.csv'))}`, {len(runs)} runs"
                 + (f", {stamps[0]} to {stamps[-1]}" if stamps else "")
                 + (f", load average {min(loads):.1f} to {max(loads):.1f}" if loads else "")
                 + ".")
    if settings.get("command"):
        lines.append(f"Command: `{settings['command']}`.")
    stopped = {"finished": "every cell decided or at its last round",
               "budget": "the time budget ran out", "interrupted": "interrupted"}
    lines.append(f"Rounds: at least {min_rounds}, at most {settings.get('max_rounds', '?')}; "
                 f"budget {settings.get('budget_min', '?')} min; stopped: "
                 f"{stopped.get(settings.get('stopped'), 'unknown')}.\n")
    targets = ("time ratio <= 1.0 up to 64 KiB; time ratio <= 1.2 from 1 MiB; none in between"
               if reference in TORCH_REFERENCES else
               "time ratio <= 0.9 up to 4 KiB; busbw ratio >= 1.0 from 64 KiB (>= 1.2 over shm "
               "from 1 MiB); none in between")
    lines.append("A cell's best peer is the peer with the lowest median time in that cell; each "
                 f"round's ratio is {reference}'s against that peer's run of the same round. "
                 f"Targets: {targets}. A cell's ratios are in its target's measure: "
                 f"{reference} time / peer time, or {reference} busbw / peer busbw. "
                 "met / missed: the median ratio and at least 80% "
                 f"of the rounds (and at least {min_rounds} rounds) on that side; otherwise "
                 "undecided. Method: `bench/percell.py --help`.\n")
    counts = defaultdict(int)
    for res in results:
        counts[res.verdict] += 1
    summary = "Verdicts: " + (", ".join(f"{v} {counts[v]}" for v in VERDICT_ORDER if counts[v])
                              or "none") + "."
    lines.append(summary)
    tables = verdict_tables(results, reference)
    lines.append("\n## Verdict per cell")
    lines.extend(tables)

    lines.append(f"\n## Per peer: {reference} time / peer time\n")
    lines.append(f"Median of the per-round ratios [min-max] (rounds); below 1: {reference} "
                 "faster.\n")
    lines.append("| cell | " + " | ".join(peers) + " |")
    lines.append("|---|" + "---:|" * len(peers))
    for res in results:
        cells = [f"{fmt_ratios(res.peer_ratios[p])} ({len(res.peer_ratios[p])})"
                 if p in res.peer_ratios else "n/a" for p in peers]
        lines.append(f"| {cell_name(res.cell)} | " + " | ".join(cells) + " |")

    split = {res.cell: ratios_by_placement(res, by_cell[res.cell], reference) for res in results}
    if any(v["near"] or v["far"] for v in split.values()):
        lines.append(f"\n## By placement: {reference}'s ratio to the best peer\n")
        lines.append(f"Rounds sorted by the cache-line round trip between CPU 0 and CPU 1 just "
                     f"before {reference}'s run (`bench/probes/core_placement.c`): near below "
                     f"{FAR_ROUND_TRIP_NS:.0f} ns, far from there. Median [min-max] (rounds), "
                     "in the target's measure.\n")
        lines.append("| cell | best peer | near | far |")
        lines.append("|---|---|---:|---:|")
        for res in results:
            v = split[res.cell]
            cols = [f"{fmt_ratios(v[k])} ({len(v[k])})" if v[k] else "-" for k in ("near", "far")]
            lines.append(f"| {cell_name(res.cell)} | {res.best or '-'} | " + " | ".join(cols) + " |")

    lines.append("\n## Per library: time and busbw over rounds\n")
    lines.append("busbw from bytes and time with nccl-tests factors (`meshcomm-bench --help`).\n")
    lines.append("| cell | library | rounds | time min (us) | time median (us) "
                 "| busbw max (GB/s) | busbw median (GB/s) |")
    lines.append("|---|---|---:|---:|---:|---:|---:|")
    for res in results:
        for lib in sorted(res.stats, key=lambda l: lib_key(l, libs)):
            st = res.stats[lib]
            lines.append(f"| {cell_name(res.cell)} | {lib} | {st.rounds} | {sig(st.time_min, 4)} "
                         f"| {sig(st.time_median, 4)} | {sig(st.busbw_max)} "
                         f"| {sig(st.busbw_median)} |")

    missing = Counter((r.cell, r.lib, r.outcome, r.exit, r.note) for r in runs if r.outcome != "ok")
    if missing:
        lines.append("\n## Skipped and failed runs\n")
        for (cell, lib, outcome, code, note), rounds in missing.items():
            lines.append(f"- {cell_name(cell)}, {lib}: {outcome}, exit {code}"
                         + (f" ({rounds} rounds)" if rounds > 1 else "")
                         + (f": {note}" if note else ""))

    lines.append("\n## Plots\n")
    try:
        paths = plot(results, libs, out_dir, reference)
        lines.extend(f"- `{shown(p)}`" for p in paths)
    except ImportError:
        lines.append("None: matplotlib is not importable (Debian's python3-matplotlib).")
        print("percell: no plots, matplotlib is not importable", file=sys.stderr)

    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return [summary] + tables


# ---- command line ----

QUICK = {"transports": "shm", "ops": "all_reduce", "nranks": "2", "sizes": "8 64K 1M", "rounds": 5}
DEFAULTS = {"transports": "shm tcp", "ops": " ".join(OPS), "nranks": "2 4",
            "sizes": "8 4K 64K 1M 16M", "rounds": 5}


def positive(text):
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(prog="percell.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--transports", help=f"shm and/or tcp (default \"{DEFAULTS['transports']}\")")
    p.add_argument("--ops", help=f"default \"{DEFAULTS['ops']}\"")
    p.add_argument("--nranks", help=f"default \"{DEFAULTS['nranks']}\"")
    p.add_argument("--sizes", help=f"K, M, G suffixes (default \"{DEFAULTS['sizes']}\")")
    p.add_argument("--libs", help="the reference and its peers (default: all but "
                                  "the torch-meshcomm ones; with --reference torch-meshcomm: "
                                  "\"torch-meshcomm deepspeed\", and so for torch-meshcomm-op)")
    p.add_argument("--reference", default="meshcomm", choices=REFERENCES,
                   help="the library compared with the rest (default meshcomm); "
                        "torch-meshcomm (dist.all_reduce) and torch-meshcomm-op "
                        "(meshcomm.torch.all_reduce_) take the torch targets: time <= 1.0x "
                        "the best peer up to 64 KiB (against deepspeed), <= 1.2x from 1 MiB "
                        "(against meshcomm, --libs \"torch-meshcomm meshcomm\")")
    p.add_argument("--rounds", type=positive, help="rounds of every cell (default 5)")
    p.add_argument("--max-rounds", type=positive, default=11,
                   help="rounds of a cell still undecided (default 11)")
    p.add_argument("--budget-min", type=float, default=120.0,
                   help="minutes for the whole run (default 120)")
    p.add_argument("--timeout", type=positive, default=300, help="seconds per run (default 300)")
    p.add_argument("--iters", type=positive, help="timed iterations (default: adaptive)")
    p.add_argument("--warmup", type=int, help="untimed iterations (default 5)")
    p.add_argument("--check", action="store_true", help="verify each run's results")
    p.add_argument("--no-placement", action="store_true",
                   help="do not probe where the CPUs are before each run")
    p.add_argument("--out", help="results directory (default bench/results/percell-TIMESTAMP)")
    p.add_argument("--quick", action="store_true",
                   help="shm, all_reduce, 2 ranks, 8 B, 64 KiB and 1 MiB, 5 rounds; "
                        "options given on the line win")
    p.add_argument("--report-only", metavar="DIR", help="rebuild DIR/report.md from DIR/runs.csv")
    args = p.parse_args(argv)
    if args.report_only:
        return args
    for k, v in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, k) is None:
            setattr(args, k, v)

    def words(name, allowed):
        items = getattr(args, name).split()
        bad = [w for w in items if w not in allowed]
        if bad or not items:
            p.error(f"--{name}: {' '.join(bad) or 'empty'} (choose among {' '.join(allowed)})")
        return items

    args.transports = words("transports", TRANSPORTS)
    args.ops = words("ops", OPS)
    if args.libs is None:
        args.libs = (f"{args.reference} deepspeed" if args.reference in TORCH_REFERENCES else
                     " ".join(l for l in LIBS if l not in TORCH_REFERENCES))
    args.libs = words("libs", LIBS)
    if args.reference not in args.libs:
        p.error(f"--libs must include {args.reference}, the library compared")
    try:
        args.nranks = [positive(n) for n in args.nranks.split()]
        args.sizes = sorted({parse_size(s) for s in args.sizes.split()})
    except (ValueError, argparse.ArgumentTypeError) as e:
        p.error(str(e))
    if args.budget_min <= 0:
        p.error("--budget-min must be above 0")
    if any(n < 2 for n in args.nranks):
        p.error("--nranks: a collective of one rank moves nothing to compare")
    if args.max_rounds < args.rounds:
        p.error("--max-rounds is below --rounds")
    if args.warmup is not None and args.warmup < 0:
        p.error("--warmup must be 0 or more")
    return args


def main(argv):
    args = parse_args(argv)
    if args.report_only:
        if not os.path.exists(os.path.join(args.report_only, "runs.csv")):
            print(f"percell: no runs.csv in {args.report_only}", file=sys.stderr)
            return 2
        print("\n".join(report(args.report_only, args.rounds)))
        return 0

    started = utc_now()
    stamp = re.sub(r"[-:Z]", "", started).replace("T", "-")
    out_dir = os.path.abspath(args.out or os.path.join(HERE, "results", f"percell-{stamp}"))
    runs_path = os.path.join(out_dir, "runs.csv")
    if os.path.exists(runs_path):
        print(f"percell: {shown(runs_path)} exists; choose another --out "
              "(or --report-only to rebuild its report)", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    extra = []
    if args.iters is not None:
        extra += ["--iters", str(args.iters)]
    if args.warmup is not None:
        extra += ["--warmup", str(args.warmup)]
    if args.check:
        extra.append("--check")
    cells = [(t, op, n, s) for t in args.transports for op in args.ops
             for n in args.nranks for s in args.sizes]
    settings = {"command": shlex.join(["bench/percell.py", *argv]), "libs": args.libs,
                "reference": args.reference,
                "rounds": args.rounds, "max_rounds": args.max_rounds,
                "budget_min": args.budget_min, "timeout_s": args.timeout, "extra": extra,
                "cells": len(cells), "started": started}

    def save_settings():
        with open(os.path.join(out_dir, "settings.json"), "w") as f:
            json.dump(settings, f, indent=1)

    def say(text):
        print(f"percell: {text}", file=sys.stderr, flush=True)

    save_settings()
    say(f"{len(cells)} cells, {len(args.libs)} libraries, results in {shown(out_dir)}")

    with open(runs_path, "w", newline="") as f:
        csv.writer(f).writerow(FIELDS)

        def record(run):
            write_run(f, run)
            result = (f"{sig(run.time_us, 4)} us" if run.outcome == "ok"
                      else f"{run.outcome}, exit {run.exit}: {run.note}")
            say(f"round {run.round}.{run.position} {cell_name(run.cell)} {run.lib}: {result}")

        probe = (lambda: None) if args.no_placement else PlacementProbe(out_dir)

        def measure(lib, cell):
            round_trip = probe()
            return dict(run_peer(lib, cell, args.timeout, extra), round_trip_ns=round_trip)

        driver = Driver(cells, args.libs, args.rounds, args.max_rounds, args.budget_min * 60,
                        measure, record, log=say, reference=args.reference)

        def stop(signum, frame):
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop)
        try:
            settings["stopped"] = driver.run()
        except KeyboardInterrupt:
            settings["stopped"] = "interrupted"
    settings["finished"] = utc_now()
    save_settings()
    print("\n".join(report(out_dir)))
    say(f"report: {shown(os.path.join(out_dir, 'report.md'))}")
    return 130 if settings["stopped"] == "interrupted" else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

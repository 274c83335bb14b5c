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
import subprocess
import sys
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_report import shown, sig  # noqa: E402
from peer_run import run_peer, utc_now  # noqa: E402
from percell_cells import (FIELDS, LIBS, OPS, REFERENCES, TORCH_REFERENCES, TRANSPORTS, Run,  # noqa: E402
                           active_libs, rotation, summarize, write_run)
from percell_report import cell_name, report  # noqa: E402


def parse_size(text):
    """8, 4K, 64KiB, 1M, 16MB -> bytes (K, M, G are powers of 1024)."""
    m = re.fullmatch(r"(\d+)\s*([kmg]?)(i?b)?", text.strip(), re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: '{text}'")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


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

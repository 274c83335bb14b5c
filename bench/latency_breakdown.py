#!/usr/bin/env python3
"""Where the time of one small collective goes, counted in instructions.

Runs meshcomm-bench under valgrind's callgrind (every rank), then splits the
instructions of one call of the operation's public method (for example
``ProcessGroup::allReduce``) among the parts a call is made of: argument
checks, the executor's claim and release, the abort checks, the flight
recorder, the algorithm choice, the call's context, the collective's own
work (one shared-memory round or its TCP messages), the reduction kernel,
and the wait for the peers.

Instruction counts do not depend on how loaded the machine is, which wall
time on this host does (by minutes): they say which part costs what and
whether a change made a part cheaper, not how long the call takes. The
wait for the peers is shown apart: under valgrind every rank runs tens of
times slower, so how long a rank spins depends on valgrind's scheduling,
not on meshcomm.

    bench/latency_breakdown.py                       # all_reduce, 2 ranks, 8 B, shared memory
    bench/latency_breakdown.py --transport tcp --nranks 4 --bytes 4K
    bench/latency_breakdown.py --bench build/bin/meshcomm-bench --op broadcast

Needs valgrind (apt-get install valgrind).
"""

import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The public method each bench operation calls (ProcessGroup::<method>).
ENTRY = {
    "all_reduce": "allReduce",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "all_gather": "allGatherIntoTensor",
    "reduce_scatter": "reduceScatterTensor",
    "all_to_all": "allToAllSingle",
    "barrier": "barrier",
}

# Parts of a call, by the functions that do them. A function matching a
# pattern is counted whole (with what it calls) in that part; anything else
# is split among its callees, its own instructions going to the part of the
# nearest caller that has one.
PARTS = [
    ("wait for the peers", r"ShmDomain::waitFor|ShmDomain::waitUntil|::wait\(std::span|TcpTransport::wait"),
    ("reduction kernel", r"reduce::reduceInto|reduce::reduceInPlace"),
    ("flight recorder", r"OpTrace::|FlightRecorder::"),
    ("executor (claim, release, broken checks)", r"Executor::"),
    ("abort checks", r"throwIfAborted|throwIfArrived|brokenError"),
    ("algorithm choice", r"chooseAlgorithm|chooseStepAlgorithm"),
    ("call context (deadline, Comm)", r"GroupImpl::contextFor|Comm::Comm|Comm::~Comm"),
    ("Work object", r"GroupImpl::finishedWork|Work::"),
    # By the functions' own names: the on-host variants that take an
    # Agreement as an argument are the collective's work.
    ("agreement (cross-rank check)", r"(^|::)agree\w*\(|::judge\w*\(|(^|::)(read|share)Records\("),
]
SETUP = "argument checks and call setup"
BODY = "collective's own work (rounds, messages, copies)"
# Functions of the collectives layer that set a call up rather than run it:
# a family's call.h functions (not the bodies they hand on, which are
# lambdas inside them) and the argument checks.
_SETUP_IN_COLLECTIVES = re.compile(
    r"collectives::calls::(?!.*\{lambda\(meshcomm::Comm&\))|collectives::CallChecks::|"
    r"collectives::(blocksOf|splitsDigest)\(")

_EDGE = re.compile(r"^\s*([\d,]+)\s+\([ \d.]+%\)\s+([*<>])\s+(.*?)(?:\s+\(([\d,]+)x\))?(?:\s+\[[^\]]*\])?\s*$")


def _num(s):
    return int(s.replace(",", ""))


def _name(raw):
    """A function's full name (with its arguments, which tell overloads
    apart) without the file it is in."""
    if raw.startswith(("???:", "./", "/")) and ":" in raw:
        raw = raw.split(":", 1)[1]
    return raw.strip()


class Graph:
    """callgrind_annotate's inclusive call tree of one process."""

    def __init__(self, path):
        text = subprocess.run(
            ["callgrind_annotate", "--tree=both", "--inclusive=yes", "--threshold=100", path],
            check=True, capture_output=True, text=True).stdout
        self.incl = {}
        self.calls = collections.Counter()
        self.callees = collections.defaultdict(list)
        block = []
        for line in text.splitlines() + [""]:
            if line.strip():
                block.append(line)
                continue
            self._block(block)
            block = []

    def _block(self, lines):
        edges = [m.groups() for m in map(_EDGE.match, lines) if m]
        me = [e for e in edges if e[1] == "*"]
        if len(me) != 1:
            return
        fn = _name(me[0][2])
        self.incl[fn] = _num(me[0][0])
        for cost, kind, who, count in edges:
            if kind == "<" and count:
                self.calls[fn] += _num(count)
            elif kind == ">":
                self.callees[fn].append((_name(who), _num(cost), _num(count or "0")))

    def find(self, pattern):
        hits = [f for f in self.incl if re.search(pattern, f)]
        return max(hits, key=self.incl.get) if hits else None


def classify(fn):
    for part, pattern in PARTS:
        if re.search(pattern, fn):
            return part
    return None


def breakdown(graph, entry):
    """Instructions per call of `entry`, by part."""
    parts = collections.Counter()

    def walk(fn, cost, inherited, path):
        part = classify(fn)
        if part is not None or fn in path or fn not in graph.incl or graph.incl[fn] == 0:
            parts[part or inherited] += cost
            return
        # A function called from several places: this caller's share of it.
        scale = min(1.0, cost / graph.incl[fn])
        below = 0
        if _SETUP_IN_COLLECTIVES.search(fn):
            here = SETUP
        elif re.search(r"collectives::", fn):
            here = BODY
        else:
            here = inherited
        # Inside a cycle (a callback that re-enters its caller; link-time
        # inlining makes more of them) callgrind counts the cycle's calls in
        # more than one inclusive cost, and the callees can add up to more
        # than the function itself: they share its cost in proportion.
        callees = graph.callees[fn]
        total = sum(c for _, c, _ in callees)
        fit = min(1.0, graph.incl[fn] / total) if total > 0 else 1.0
        for callee, c, _ in callees:
            below += c
            walk(callee, c * scale * fit, here, path | {fn})
        parts[here] += max(0, graph.incl[fn] - below) * scale

    walk(entry, graph.incl[entry], SETUP, frozenset())
    calls = graph.calls[entry] or 1
    return {p: v / calls for p, v in parts.items()}, calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin",
                                                    "meshcomm-bench"))
    ap.add_argument("--op", default="all_reduce", choices=sorted(ENTRY))
    ap.add_argument("--nranks", type=int, default=2)
    ap.add_argument("--bytes", default="8")
    ap.add_argument("--transport", choices=("shm", "tcp"), default="shm")
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--keep", help="keep callgrind's files in this folder")
    args = ap.parse_args()
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        sys.exit("latency_breakdown: valgrind is missing; install it: apt-get install -y valgrind")
    if not os.path.exists(args.bench):
        sys.exit(f"latency_breakdown: {args.bench} not found; build it first (make build)")

    out = args.keep or tempfile.mkdtemp(prefix="meshcomm-breakdown-")
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ)
    if args.transport == "tcp":
        env["MESHCOMM_SHM"] = "0"
    # Every rank runs tens of times slower under valgrind: give waits room.
    env.setdefault("MESHCOMM_TIMEOUT_MS", "600000")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/callgrind.%p",
           args.bench, args.op, "-n", str(args.nranks), "-b", args.bytes, "-e", args.bytes,
           "--iters", str(args.iters), "--warmup", "10"]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if run.returncode != 0:
        sys.exit(f"latency_breakdown: the bench failed (exit {run.returncode}):\n{run.stderr[-3000:]}")

    entry_pattern = rf"^meshcomm::ProcessGroup::{ENTRY[args.op]}\("
    print(f"# {args.op}, {args.nranks} ranks, {args.bytes} B, {args.transport}: "
          f"instructions per call (callgrind)\n")
    rows = []
    for path in sorted(glob.glob(f"{out}/callgrind.*")):
        graph = Graph(path)
        entry = graph.find(entry_pattern)
        if entry is None:
            continue  # the launcher, which forks the ranks and runs no operation
        parts, calls = breakdown(graph, entry)
        rows.append((path, parts, calls))
    if not rows:
        sys.exit(f"latency_breakdown: no rank called {ENTRY[args.op]}; files in {out}")
    names = [SETUP] + [p for p, _ in PARTS] + [BODY]
    names = [n for n in names if any(r[1].get(n, 0) >= 0.5 for r in rows)]
    header = "| part | " + " | ".join(f"rank {i}" for i in range(len(rows))) + " |"
    print(header)
    print("|---|" + "---:|" * len(rows))
    for n in names:
        print(f"| {n} | " + " | ".join(f"{r[1].get(n, 0):.0f}" for r in rows) + " |")
    wait = PARTS[0][0]
    print("| **all but the wait** | " +
          " | ".join(f"**{sum(v for k, v in r[1].items() if k != wait):.0f}**" for r in rows) + " |")
    print("| all | " + " | ".join(f"{sum(r[1].values()):.0f}" for r in rows) + " |")
    print(f"\ncalls counted per rank: {', '.join(str(r[2]) for r in rows)}; callgrind files: {out}")
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Report of bench/compare.sh runs: meshcomm's single-host targets, met or
missed, then one markdown table per (op, nranks) with every library's time
and bus bandwidth per size and the ratio of meshcomm to each other library,
plus one bus-bandwidth-vs-size plot per operation (docs/img/compare_OP.png)
and the memcpy reference.

    /usr/bin/python3 bench/compare_report.py RESULTS.csv [MORE.csv ...]
        [--img-dir DIR] [--failures FILE] [--no-plots]

Each CSV has the columns lib,op,nranks,bytes,time_us,algbw_gbps,busbw_gbps
and, from runs with --repeats, repeat. Several files (a sweep and a run of
the largest size, say) are reported together. A row measured more than once
is reported by its median time. busbw is recomputed here from bytes and
time_us (time_us has more digits than the CSV's busbw, which rounds small
sizes to 0), with meshcomm-bench's factors: 2(n-1)/n for all_reduce,
(n-1)/n for all_gather, reduce_scatter and all_to_all, 1 for broadcast.
"""

import argparse
import csv
import math
import os
import statistics
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OP_ORDER = ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all", "barrier"]
LIB_ORDER = ["meshcomm", "openmpi", "gloo-ring", "gloo-hd", "gloo", "torch-gloo",
             "torch-meshcomm", "torch2-gloo", "meshcomm-py"]
REFERENCE = "meshcomm"
# Rows at or below this size compare times: their bandwidth is all latency.
LATENCY_BYTES = 8


def bus_factor(op, n):
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op == "broadcast":
        return 1.0
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 0.0


def busbw(op, n, nbytes, time_us):
    """GB/s; every op's algbw counts its bytes column (see meshcomm-bench --help)."""
    if time_us <= 0:
        return 0.0
    return nbytes / (time_us * 1e-6) / 1e9 * bus_factor(op, n)


def sig(v, digits=3):
    """v with `digits` significant digits, in fixed notation."""
    if v == 0 or not math.isfinite(v):
        return "0" if v == 0 else str(v)
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(v)))))
    return f"{v:.{decimals}f}"


def shown(path):
    """A path relative to the repository when it is inside it."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def lib_key(lib):
    return (LIB_ORDER.index(lib) if lib in LIB_ORDER else len(LIB_ORDER), lib)


def sources_and_times(paths, repeats):
    """A report's opening words: the CSV files it reads and what its times
    are, up to the sentence's first semicolon."""
    sources = ", ".join(f"`{shown(os.path.abspath(c))}`" for c in paths)
    timed = "the slowest rank's mean time per operation"
    if repeats > 1:
        timed = f"the median over up to {repeats} repeats of {timed}"
    return f"Source: {sources}. time = {timed}"


def print_failures(path, out):
    """The section naming the benchmarks that failed (`path` lists them,
    one a line), when there were any."""
    if not path or not os.path.exists(path):
        return
    with open(path) as f:
        failed = [line.strip() for line in f if line.strip()]
    if failed:
        print("\n## Failed benchmarks (rows missing)\n", file=out)
        for line in failed:
            print(f"- {line}", file=out)


def table_columns(by_lib):
    """The libraries of one table (lib -> {bytes: time_us}) in report order,
    those meshcomm's ratios are taken against, and the sizes."""
    libs = sorted(by_lib, key=lib_key)
    others = [l for l in libs if l != REFERENCE] if REFERENCE in by_lib else []
    sizes = sorted({b for t in by_lib.values() for b in t})
    return libs, others, sizes


def print_table_head(head, out):
    """A markdown table's header row and its right-aligned separator."""
    print("| " + " | ".join(head) + " |", file=out)
    print("|" + "|".join("---:" for _ in head) + "|", file=out)


def pyplot():
    """matplotlib's pyplot drawing off-screen (Agg), imported only when a
    report draws its plots."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, img_dir, name, dpi):
    """Writes `fig` as img_dir/name, closes it and returns the path."""
    fig.tight_layout()
    os.makedirs(img_dir, exist_ok=True)
    path = os.path.join(img_dir, name)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


def load(paths):
    """The rows of every file, one per (lib, op, nranks, bytes) with the
    median time of its repeats and how many there were."""
    times = defaultdict(list)
    for path in paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                key = (r["lib"], r["op"], int(r["nranks"]), int(r["bytes"]))
                times[key].append(float(r["time_us"]))
    return [{"lib": lib, "op": op, "nranks": n, "bytes": b,
             "time_us": statistics.median(ts), "repeats": len(ts)}
            for (lib, op, n, b), ts in sorted(times.items())]


def human(nbytes):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


GLOO_PEERS = ("gloo", "gloo-ring", "gloo-hd", "torch-gloo")
TARGET_RANKS = (2, 4)


def targets(grid, memcpy_gbps, out):
    """Checks the targets against grid ((op, n) -> lib -> {bytes: time_us})
    and prints one line per target: met or missed, and every row that
    misses it."""

    def rows(peers, ranks, lo, hi, ops=None, reference=REFERENCE):
        for (op, n), by_lib in sorted(grid.items()):
            if op == "barrier" or n not in ranks or (ops and op not in ops):
                continue
            mine = by_lib.get(reference, {})
            for peer in peers:
                for b, theirs in sorted(by_lib.get(peer, {}).items()):
                    if lo <= b <= hi and b in mine:
                        yield op, n, b, peer, mine[b], theirs

    def report(title, checked):
        checked = list(checked)
        misses = [c for c in checked if not c[0]]
        if not checked:
            print(f"- **not measured**: {title}", file=out)
            return
        verdict = "met" if not misses else "missed"
        print(f"- **{verdict}**: {title} ({len(checked) - len(misses)} of {len(checked)} rows)",
              file=out)
        for _, text in misses:
            print(f"  - {text}", file=out)

    def speedup(need, peers, ranks, lo, hi, ops=None, reference=REFERENCE):
        """reference (meshcomm) at least `need` times as fast (time ratio =
        busbw ratio)."""
        for op, n, b, peer, mine, theirs in rows(peers, ranks, lo, hi, ops, reference):
            ratio = theirs / mine
            yield ratio >= need, (f"{op}, {n} ranks, {human(b)}: {sig(ratio)}x {peer} "
                                  f"({sig(mine, 4)} against {sig(theirs, 4)} us)")

    print("\n## Targets\n", file=out)
    print("For 2 and 4 ranks unless named; a ratio is X's time over meshcomm's, which "
          "for the same bytes is also meshcomm's busbw over X's.\n", file=out)
    report("8 B all_reduce at most Open MPI's time",
           speedup(1.0, ["openmpi"], TARGET_RANKS, 8, 8, ["all_reduce"]))
    report("every collective at least Open MPI's busbw from 64 KiB to 64 MiB",
           speedup(1.0, ["openmpi"], TARGET_RANKS, 64 << 10, 64 << 20))
    report("all_reduce and reduce_scatter at least 2x Open MPI's busbw from 1 MiB",
           speedup(2.0, ["openmpi"], TARGET_RANKS, 1 << 20, 64 << 20,
                   ["all_reduce", "reduce_scatter"]))
    report("at least 3x the busbw of Gloo and torch-gloo from 64 KiB",
           speedup(3.0, GLOO_PEERS, TARGET_RANKS, 64 << 10, 64 << 20))
    report("at least 100x faster than Gloo and torch-gloo at 8 B",
           speedup(100.0, GLOO_PEERS, TARGET_RANKS, 8, 8))

    def memcpy_share():
        for n in TARGET_RANKS:
            t = grid.get(("all_reduce", n), {}).get(REFERENCE, {}).get(16 << 20)
            if t is None or not memcpy_gbps:
                continue
            share = busbw("all_reduce", n, 16 << 20, t) / memcpy_gbps
            yield share >= 0.3, (f"all_reduce, {n} ranks, 16 MiB: {share:.0%} "
                                 f"({sig(busbw('all_reduce', n, 16 << 20, t))} GB/s busbw)")

    report("16 MiB all_reduce at least 30% of single-thread memcpy's bandwidth", memcpy_share())
    report("8 ranks at most 2x Open MPI's time at any size",
           speedup(0.5, ["openmpi"], (8,), 0, 1 << 40))
    # torch.distributed on meshcomm's backend (meshcomm.torch), against gloo
    # on the same torch and against meshcomm's own Python API.
    report("torch-meshcomm: 8 B all_reduce at least 10x faster than torch2-gloo",
           speedup(10.0, ["torch2-gloo"], TARGET_RANKS, 8, 8, ["all_reduce"], "torch-meshcomm"))
    report("torch-meshcomm: at least 3x torch2-gloo's busbw from 64 KiB",
           speedup(3.0, ["torch2-gloo"], TARGET_RANKS, 64 << 10, 64 << 20, None,
                   "torch-meshcomm"))
    report("torch-meshcomm: within 1.2x of meshcomm's Python API (meshcomm-py) from 1 MiB",
           speedup(1 / 1.2, ["meshcomm-py"], TARGET_RANKS, 1 << 20, 64 << 20, None,
                   "torch-meshcomm"))


def table(op, n, by_lib, out):
    """One markdown table for (op, n). by_lib: lib -> {bytes: time_us}."""
    libs, others, sizes = table_columns(by_lib)
    is_barrier = op == "barrier"

    print(f"\n### {op}, {n} ranks\n", file=out)
    if others:
        if is_barrier:
            print("meshcomm/X = time ratio, meshcomm time / X time (below 1: meshcomm faster).\n",
                  file=out)
        else:
            print(f"meshcomm/X = busbw ratio, meshcomm busbw / X busbw (above 1: meshcomm faster); "
                  f"rows of {LATENCY_BYTES} B and below, marked (t), are the time ratio instead, "
                  f"meshcomm time / X time (below 1: meshcomm faster).\n", file=out)
    head = ["size(B)"]
    for lib in libs:
        head.append(f"{lib} time(us)")
        if not is_barrier:
            head.append(f"{lib} busbw(GB/s)")
    head += [f"meshcomm/{lib}" for lib in others]
    print_table_head(head, out)
    for b in sizes:
        cells = [str(b)]
        for lib in libs:
            t = by_lib[lib].get(b)
            cells.append(sig(t, 4) if t is not None else "n/a")
            if not is_barrier:
                cells.append(sig(busbw(op, n, b, t)) if t is not None else "n/a")
        mine = by_lib.get(REFERENCE, {}).get(b)
        for lib in others:
            theirs = by_lib[lib].get(b)
            if mine is None or theirs is None or mine <= 0 or theirs <= 0:
                cells.append("n/a")
            elif is_barrier:
                cells.append(sig(mine / theirs))
            elif b <= LATENCY_BYTES:
                cells.append(f"{sig(mine / theirs)} (t)")
            else:
                # Same bytes and factor on both sides, so the busbw ratio is
                # the inverse time ratio, taken from the more precise times.
                cells.append(sig(theirs / mine))
        print("| " + " | ".join(cells) + " |", file=out)


def plot(op, series, memcpy_gbps, img_dir):
    """series: (lib, n) -> sorted [(bytes, time_us)]. Returns the PNG path."""
    plt = pyplot()

    libs = sorted({lib for lib, _ in series}, key=lib_key)
    ranks = sorted({n for _, n in series})
    colors = {lib: plt.cm.tab10(i % 10) for i, lib in enumerate(libs)}
    styles = ["-", "--", ":", "-."]
    markers = ["o", "s", "^", "D", "v"]
    fig, ax = plt.subplots(figsize=(9, 6))
    if op == "barrier":
        # No bandwidth: time per barrier against the number of ranks.
        for lib in libs:
            pts = [(n, series[(lib, n)][0][1]) for n in ranks if (lib, n) in series]
            if pts:
                ax.plot(*zip(*pts), marker="o", color=colors[lib], label=lib)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ranks)
        ax.set_xticklabels([str(n) for n in ranks])
        ax.set_xlabel("ranks")
        ax.set_ylabel("time per barrier (us)")
        ax.set_title("barrier: time (lower is better)")
    else:
        for lib in libs:
            for i, n in enumerate(ranks):
                pts = [(b, busbw(op, n, b, t)) for b, t in series.get((lib, n), [])]
                pts = [(b, v) for b, v in pts if b > 0 and v > 0]
                if pts:
                    ax.plot(*zip(*pts), color=colors[lib], linestyle=styles[i % len(styles)],
                            marker=markers[i % len(markers)], markersize=4,
                            label=f"{lib}, {n} ranks")
        if memcpy_gbps:
            ax.axhline(memcpy_gbps, color="gray", linestyle=(0, (1, 3)),
                       label=f"memcpy 16 MiB, 1 thread ({memcpy_gbps:.1f} GB/s)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(f"{op}: bus bandwidth (higher is better)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return save_figure(fig, img_dir, f"compare_{op}.png", 110)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv", nargs="+")
    p.add_argument("--img-dir", default=os.path.join(ROOT, "docs", "img"))
    p.add_argument("--failures", help="file listing failed benchmarks, one a line")
    p.add_argument("--no-plots", action="store_true")
    args = p.parse_args(argv)

    rows = load(args.csv)
    memcpy = [r for r in rows if r["op"] == "memcpy"]
    memcpy_gbps = None
    repeats = max((r["repeats"] for r in rows if r["op"] != "memcpy"), default=1)
    print("# meshcomm vs Open MPI, Gloo and torch.distributed (gloo)\n")
    print(f"{sources_and_times(args.csv, repeats)}; busbw from bytes and time with nccl-tests "
          "factors (see `meshcomm-bench --help`).\n")
    if memcpy:
        r = memcpy[0]
        memcpy_gbps = r["bytes"] / (r["time_us"] * 1e-6) / 1e9
        print(f"Memory-bandwidth reference: single-thread memcpy of {r['bytes'] >> 20} MiB "
              f"(rotating, uncached buffers): {r['time_us']:.1f} us, {memcpy_gbps:.2f} GB/s.")

    # (op, n) -> lib -> {bytes: time_us}. Non-barrier rows of size 0 are
    # sizes below one element per rank, which only meshcomm-bench prints.
    grid = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        if r["op"] == "memcpy" or (r["op"] != "barrier" and r["bytes"] == 0):
            continue
        grid[(r["op"], r["nranks"])][r["lib"]][r["bytes"]] = r["time_us"]

    targets(grid, memcpy_gbps, sys.stdout)

    ops = sorted({op for op, _ in grid}, key=lambda o: (OP_ORDER.index(o) if o in OP_ORDER else 99, o))
    all_libs = sorted({lib for cell in grid.values() for lib in cell}, key=lib_key)
    for op in ops:
        print(f"\n## {op}")
        for n in sorted(n for o, n in grid if o == op):
            by_lib = grid[(op, n)]
            table(op, n, by_lib, sys.stdout)
            absent = [lib for lib in all_libs if lib not in by_lib]
            if absent:
                print(f"\nNo rows from: {', '.join(absent)} (unsupported, failed or not run).")

    print_failures(args.failures, sys.stdout)

    if not args.no_plots:
        print("\n## Plots\n")
        for op in ops:
            series = defaultdict(list)
            for (o, n), by_lib in grid.items():
                if o == op:
                    for lib, pts in by_lib.items():
                        series[(lib, n)] = sorted(pts.items())
            path = plot(op, series, memcpy_gbps, args.img_dir)
            print(f"- {op}: `{shown(os.path.abspath(path))}`")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

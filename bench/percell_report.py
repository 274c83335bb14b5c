"""report.md and the plots of a per-cell comparison (bench/percell.py),
rebuilt from its runs.csv and settings.json."""

import json
import os
import statistics
import sys
from collections import Counter, defaultdict

from compare_report import human, shown, sig
from percell_cells import (FAR_ROUND_TRIP_NS, TORCH_REFERENCES, TRANSPORTS, VERDICT_ORDER, cell_key,
                           lib_key, op_key, ratios_by_placement, read_runs, summarize)

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

#!/usr/bin/python3
"""Report of `bench/compare.sh --transport tcp` runs: meshcomm's TCP targets,
met or missed, then for each network (loopback, two hosts of K ranks, the
shaped veth) one markdown table per (op, nranks) with every library's time,
algbw and busbw per size, plus one plot per network
(docs/img/compare_tcp_NETWORK.png) and one of the shaped runs
(docs/img/compare_tcp_shaped.png).

    /usr/bin/python3 bench/compare_tcp_report.py RESULTS.csv [MORE.csv ...]
        [--img-dir DIR] [--failures FILE] [--no-plots] [--ceilings FILE]

Each CSV has the columns lib,op,nranks,bytes,time_us,algbw_gbps,busbw_gbps,
repeat,network. A row measured more than once (--repeats, or several files)
is reported by its median time; algbw and busbw are recomputed from bytes
and time with meshcomm-bench's factors (bench/compare_report.py).

With --ceilings (the output of bench/tcp_ceilings.sh, which compare.sh
--transport tcp takes before and after its sweep), a missed loopback target
says when meeting it would need more than loopback TCP carries on this
machine at all: the most bytes per second its probes moved, summed over the
receiving ranks, against the bytes the ranks must receive in all whatever
the algorithm when every byte crosses TCP.
"""

import argparse
import csv
import os
import re
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_report import (OP_ORDER, REFERENCE, busbw, bus_factor, human, lib_key,  # noqa: E402
                            print_failures, print_table_head, pyplot, save_figure, shown, sig,
                            sources_and_times, table_columns)

GLOO_PEERS = ("gloo", "gloo-ring", "gloo-hd", "torch-gloo")
BEYOND = "beyond this machine"
SHAPED = re.compile(r"^2x(\d+)@(\d+)([kmg]?)bit$")
RATE_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}
LINK_SHARE = 0.9  # target: busbw at least this share of the shaped link's rate


CEILING_LINE = re.compile(r"^loopback [^:]*: ranks=(\d+) streams=\d+ (one way|ring, both "
                          r"directions): ([0-9.]+) GB/s")


def loopback_ceiling(path):
    """The most bytes per second loopback TCP carried in the runs of
    bench/tcp_ceilings.sh written to path, summed over the receiving ranks
    (one way: half the ranks receive; a ring: all of them), or None."""
    best = 0.0
    with open(path) as f:
        for line in f:
            m = CEILING_LINE.match(line.strip())
            if m:
                ranks, mode, rate = int(m.group(1)), m.group(2), float(m.group(3))
                receivers = ranks if mode.startswith("ring") else ranks // 2
                best = max(best, rate * 1e9 * receivers)
    return best or None


def least_received(op, n, nbytes):
    """Bytes the n ranks must receive in all, whatever the algorithm, when
    every byte crosses TCP (sizes as meshcomm-bench gives them: all_gather's
    output, reduce_scatter's input, one rank's all_to_all input): all_reduce
    2(n-1)/n of the buffer per rank, broadcast the buffer per non-root, the
    others (n-1)/n of the size per rank."""
    return (2 * (n - 1) if op == "all_reduce" else n - 1) * nbytes


def observed_rate(grid, min_bytes=0):
    """(bytes per second, which row) of the loopback row, at least
    min_bytes large, of any library that moved the most data over TCP by
    least_received's count: proof that the machine carries that much with
    messages that large, should the probes have seen less."""
    best = (0.0, None)
    for (net, op, n), by_lib in grid.items():
        if net != "loopback" or op == "barrier":
            continue
        for lib, times in by_lib.items():
            for b, t in times.items():
                if b < min_bytes:
                    continue
                rate = least_received(op, n, b) / (t * 1e-6) if t > 0 else 0.0
                if rate > best[0]:
                    best = (rate, f"{lib}'s {op} of {human(b)} at {n} ranks")
    return best


def algbw(nbytes, time_us):
    return nbytes / (time_us * 1e-6) / 1e9 if time_us > 0 else 0.0


def load(paths):
    """(network, op, nranks) -> lib -> {bytes: median time_us}, and the
    largest repeat count."""
    times = defaultdict(list)
    for path in paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                key = (r.get("network") or "loopback", r["op"], int(r["nranks"]), r["lib"],
                       int(r["bytes"]))
                times[key].append(float(r["time_us"]))
    grid = defaultdict(lambda: defaultdict(dict))
    for (net, op, n, lib, b), ts in times.items():
        if op != "barrier" and b == 0:
            continue  # below one element per rank; only meshcomm-bench prints it
        grid[(net, op, n)][lib][b] = statistics.median(ts)
    repeats = max((len(ts) for ts in times.values()), default=1)
    return grid, repeats


def network_key(net):
    if net == "loopback":
        return (0, 0, 0, net)
    m = SHAPED.match(net)
    if m:
        return (2, link_rate(net), 0, net)
    k = re.match(r"^2x(\d+)$", net)
    return (1, int(k.group(1)) if k else 99, 0, net)


def describe_network(net):
    if net == "loopback":
        return "loopback (every rank on one host, 127.0.0.1)"
    m = SHAPED.match(net)
    if m:
        return (f"2 hosts x {m.group(1)} ranks, veth shaped to "
                f"{m.group(2)} {m.group(3).upper()}bit/s (tc tbf)")
    k = re.match(r"^2x(\d+)$", net)
    if k:
        return f"2 hosts x {k.group(1)} rank(s) (network namespaces, veth)"
    return net


def link_rate(net):
    """The shaped rate of a network, in bytes per second, or None."""
    m = SHAPED.match(net)
    if not m:
        return None
    return int(m.group(2)) * RATE_UNITS[m.group(3)] / 8


def targets(grid, out, ceiling=None):
    def rows(peers, lo, hi, ops=None):
        for (net, op, n), by_lib in sorted(grid.items(), key=lambda kv: (network_key(kv[0][0]),
                                                                          kv[0][1:])):
            if op == "barrier" or link_rate(net) or (ops and op not in ops):
                continue
            mine = by_lib.get(REFERENCE, {})
            for peer in peers:
                for b, theirs in sorted(by_lib.get(peer, {}).items()):
                    if lo <= b <= hi and b in mine:
                        yield net, op, n, b, peer, mine[b], theirs

    def report(title, checked):
        checked = list(checked)
        misses = [text for ok, text in checked if not ok]
        if not checked:
            print(f"- **not measured**: {title}", file=out)
            return
        verdict = "met" if not misses else "missed"
        beyond = sum(BEYOND in text for text in misses)
        also = f"; {beyond} of the misses beyond this machine's loopback TCP" if beyond else ""
        print(f"- **{verdict}**: {title} ({len(checked) - len(misses)} of {len(checked)} "
              f"rows{also})", file=out)
        for text in misses:
            print(f"  - {text}", file=out)

    def speedup(need, peers, lo, hi, ops=None, nets=None):
        for net, op, n, b, peer, mine, theirs in rows(peers, lo, hi, ops):
            if nets and net not in nets:
                continue
            ratio = theirs / mine
            text = (f"{net}, {op}, {n} ranks, {human(b)}: {sig(ratio)}x {peer} "
                    f"({sig(mine, 4)} against {sig(theirs, 4)} us)")
            if ratio < need and ceiling and net == "loopback":
                rate = max(ceiling, observed_rate(grid, b)[0])
                floor_us = least_received(op, n, b) / rate * 1e6
                if floor_us > theirs / need:
                    text += (f"; {BEYOND}: {sig(theirs / need, 4)} us would be needed, loopback "
                             f"TCP alone takes {sig(floor_us, 4)}")
            yield ratio >= need, text

    def link_share():
        for (net, op, n), by_lib in sorted(grid.items(), key=lambda kv: network_key(kv[0][0])):
            rate = link_rate(net)
            t = by_lib.get(REFERENCE, {}).get(64 << 20)
            if not rate or op != "all_reduce" or t is None:
                continue
            share = busbw(op, n, 64 << 20, t) * 1e9 / rate
            yield share >= LINK_SHARE, (f"{net}: {share:.0%} of the link "
                                        f"({sig(busbw(op, n, 64 << 20, t))} GB/s busbw, "
                                        f"{sig(t / 1e3, 4)} ms)")

    loopback = {"loopback"}
    print("\n## Targets\n", file=out)
    print("A ratio is X's time over meshcomm's, which for the same bytes is also meshcomm's "
          "busbw over X's. The targets are set on loopback; the rows across namespaces are "
          "checked the same way below them, for information.\n", file=out)
    report("loopback: 8 B all_reduce at most Open MPI-TCP's time",
           speedup(1.0, ["openmpi"], 8, 8, ["all_reduce"], loopback))
    report("loopback: every collective at least Open MPI-TCP's busbw from 64 KiB",
           speedup(1.0, ["openmpi"], 64 << 10, 1 << 40, None, loopback))
    report("loopback: at least 2x the busbw of Gloo and torch-gloo from 64 KiB",
           speedup(2.0, GLOO_PEERS, 64 << 10, 1 << 40, None, loopback))
    report(f"64 MiB all_reduce across 2 hosts x 2 ranks on a shaped veth: busbw at least "
           f"{LINK_SHARE:.0%} of the link's rate", link_share())
    others = sorted({net for net, _, _ in grid if net != "loopback" and not link_rate(net)},
                    key=network_key)
    for net in others:
        report(f"{net}: 8 B all_reduce at most Open MPI-TCP's time",
               speedup(1.0, ["openmpi"], 8, 8, ["all_reduce"], {net}))
        report(f"{net}: every collective at least Open MPI-TCP's busbw from 64 KiB",
               speedup(1.0, ["openmpi"], 64 << 10, 1 << 40, None, {net}))
        report(f"{net}: at least 2x the busbw of Gloo and torch-gloo from 64 KiB",
               speedup(2.0, GLOO_PEERS, 64 << 10, 1 << 40, None, {net}))


def table(op, n, by_lib, out):
    libs, others, sizes = table_columns(by_lib)
    is_barrier = op == "barrier"
    print(f"\n#### {op}, {n} ranks\n", file=out)
    head = ["size"]
    for lib in libs:
        head.append(f"{lib} time(us)")
        if not is_barrier:
            head += [f"{lib} algbw(GB/s)", f"{lib} busbw(GB/s)"]
    head += [f"meshcomm/{lib}" for lib in others]
    print_table_head(head, out)
    for b in sizes:
        cells = [human(b) if not is_barrier else "-"]
        for lib in libs:
            t = by_lib[lib].get(b)
            cells.append(sig(t, 4) if t is not None else "n/a")
            if not is_barrier:
                cells += ([sig(algbw(b, t)), sig(busbw(op, n, b, t))] if t is not None
                          else ["n/a", "n/a"])
        mine = by_lib.get(REFERENCE, {}).get(b)
        for lib in others:
            theirs = by_lib[lib].get(b)
            if mine is None or theirs is None or mine <= 0 or theirs <= 0:
                cells.append("n/a")
            elif is_barrier or b <= 8:
                cells.append(f"{sig(mine / theirs)} (t)")
            else:
                cells.append(sig(theirs / mine))
        print("| " + " | ".join(cells) + " |", file=out)


def shaped_table(grid, out):
    nets = sorted({net for net, _, _ in grid if link_rate(net)}, key=network_key)
    if not nets:
        return
    print("\n## 64 MiB all_reduce, 2 hosts x 2 ranks, shaped veth\n", file=out)
    print("| link | library | time(ms) | algbw(GB/s) | busbw(GB/s) | busbw / link rate |",
          file=out)
    print("|---|---|---:|---:|---:|---:|", file=out)
    for net in nets:
        rate = link_rate(net)
        for (nn, op, n), by_lib in grid.items():
            if nn != net or op != "all_reduce":
                continue
            for lib in sorted(by_lib, key=lib_key):
                t = by_lib[lib].get(64 << 20)
                if t is None:
                    continue
                bb = busbw(op, n, 64 << 20, t)
                print(f"| {net.split('@')[1]} | {lib} | {sig(t / 1e3, 4)} | "
                      f"{sig(algbw(64 << 20, t))} | {sig(bb)} | {bb * 1e9 / rate:.0%} |", file=out)


def plot_network(net, grid, img_dir):
    plt = pyplot()

    cells = {(op, n): by_lib for (nn, op, n), by_lib in grid.items() if nn == net}
    ops = sorted({op for op, _ in cells}, key=lambda o: OP_ORDER.index(o) if o in OP_ORDER else 99)
    libs = sorted({lib for by_lib in cells.values() for lib in by_lib}, key=lib_key)
    ranks = sorted({n for _, n in cells})
    colors = {lib: plt.cm.tab10(i % 10) for i, lib in enumerate(libs)}
    styles = ["-", "--", ":", "-."]
    cols = min(3, len(ops))
    rows_ = (len(ops) + cols - 1) // cols
    fig, axes = plt.subplots(rows_, cols, figsize=(5.2 * cols, 4.2 * rows_), squeeze=False)
    for ax, op in zip(axes.flat, ops):
        for lib in libs:
            if op == "barrier":
                pts = [(n, cells[(op, n)][lib][0]) for n in ranks
                       if (op, n) in cells and 0 in cells[(op, n)].get(lib, {})]
                if pts:
                    ax.plot(*zip(*pts), marker="o", color=colors[lib], label=lib)
                continue
            for i, n in enumerate(ranks):
                pts = sorted(cells.get((op, n), {}).get(lib, {}).items())
                pts = [(b, busbw(op, n, b, t)) for b, t in pts if b > 0 and t > 0]
                if pts:
                    ax.plot(*zip(*pts), color=colors[lib], linestyle=styles[i % len(styles)],
                            marker="o", markersize=3, label=f"{lib}, {n} ranks")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        if op == "barrier":
            ax.set_xticks(ranks)
            ax.set_xticklabels([str(n) for n in ranks])
            ax.set_xlabel("ranks")
            ax.set_ylabel("time (us, lower is better)")
        else:
            ax.set_xlabel("size (bytes)")
            ax.set_ylabel("busbw (GB/s, higher is better)")
        ax.set_title(op)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(ops):]:
        ax.axis("off")
    fig.suptitle(f"TCP: {describe_network(net)}")
    return save_figure(fig, img_dir, f"compare_tcp_{net}.png", 100)


def plot_shaped(grid, img_dir):
    plt = pyplot()

    nets = sorted({net for net, _, _ in grid if link_rate(net)}, key=network_key)
    if not nets:
        return None
    libs = sorted({lib for (net, op, n), by_lib in grid.items() if net in nets for lib in by_lib},
                  key=lib_key)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / max(1, len(libs))
    for i, lib in enumerate(libs):
        shares = []
        for net in nets:
            share = 0.0
            for (nn, op, n), by_lib in grid.items():
                t = by_lib.get(lib, {}).get(64 << 20)
                if nn == net and op == "all_reduce" and t:
                    share = busbw(op, n, 64 << 20, t) * 1e9 / link_rate(net)
            shares.append(100 * share)
        ax.bar([x + i * width for x in range(len(nets))], shares, width, label=lib,
               color=plt.cm.tab10(i % 10))
    ax.axhline(100 * LINK_SHARE, color="gray", linestyle="--", label=f"{LINK_SHARE:.0%} target")
    ax.set_xticks([x + width * (len(libs) - 1) / 2 for x in range(len(nets))])
    ax.set_xticklabels([net.split("@")[1] for net in nets])
    ax.set_ylabel("busbw, % of the link's rate")
    ax.set_title("64 MiB all_reduce, 2 hosts x 2 ranks, veth shaped by tc tbf")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    return save_figure(fig, img_dir, "compare_tcp_shaped.png", 100)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv", nargs="+")
    p.add_argument("--img-dir", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "docs", "img"))
    p.add_argument("--failures", help="file listing failed benchmarks, one a line")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--ceilings", help="bench/tcp_ceilings.sh output taken around the sweep")
    args = p.parse_args(argv)
    ceiling = loopback_ceiling(args.ceilings) if args.ceilings else None

    grid, repeats = load(args.csv)
    out = sys.stdout
    print("# meshcomm vs Open MPI, Gloo and torch.distributed (gloo), over TCP\n", file=out)
    print(f"{sources_and_times(args.csv, repeats)}; algbw = size / time; busbw = algbw x "
          "2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and all_to_all, "
          "1 for broadcast. meshcomm/X: busbw ratio, above 1 meshcomm faster; (t): time "
          "ratio, below 1 meshcomm faster.", file=out)
    if ceiling:
        print(f"\nLoopback TCP on this machine carried at most {sig(ceiling / 1e9)} GB/s, summed "
              f"over the receiving ranks (`{shown(os.path.abspath(args.ceilings))}`). A row "
              "marked beyond this machine would need more than that, and more than any "
              "library moved in this run with messages at least as large.", file=out)
    targets(grid, out, ceiling)
    shaped_table(grid, out)

    nets = sorted({net for net, _, _ in grid if not link_rate(net)}, key=network_key)
    for net in nets:
        print(f"\n## {describe_network(net)}", file=out)
        keys = sorted((k for k in grid if k[0] == net),
                      key=lambda k: (OP_ORDER.index(k[1]) if k[1] in OP_ORDER else 99, k[2]))
        for _, op, n in keys:
            table(op, n, grid[(net, op, n)], out)

    print_failures(args.failures, out)

    if not args.no_plots:
        print("\n## Plots\n", file=out)
        for net in nets:
            print(f"- {net}: `{shown(plot_network(net, grid, args.img_dir))}`", file=out)
        path = plot_shaped(grid, args.img_dir)
        if path:
            print(f"- shaped veth: `{shown(path)}`", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

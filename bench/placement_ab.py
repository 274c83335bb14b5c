#!/usr/bin/env python3
"""Two settings of meshcomm-bench, alternated, each round sorted by where the
two CPUs were: near (a cache line's round trip below --far-ns before and
after the round), far (above it both times) or mixed.

On a virtual machine the host may move a vCPU away from the other's cache
and back while a job runs (docs/tuning.md, "Where the cores are"); a
comparison that does not sort its rounds by placement mixes two machines.
The placement comes from bench/probes/core_placement.c, built into a
temporary directory as bench/percell.py builds it (PlacementProbe).

usage: bench/placement_ab.py [--rounds 30] [--iters N] [--ranks 2]
           [--a ENV=VALUE ...] [--b ENV=VALUE ...] OP SIZE

  --a / --b   environment of the two arms (default: A sets
              MESHCOMM_SHM_SLOT_STORES=cached, B changes nothing)
  --build     meshcomm's build directory (default build)

Prints, per placement, the median time of each arm, the median of the
per-round ratios B/A and in how many rounds B was faster.
"""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from percell import FAR_ROUND_TRIP_NS, PlacementProbe  # noqa: E402


def parse_env(pairs):
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            sys.exit(f"placement_ab: expected ENV=VALUE, got {pair!r}")
        env[name] = value
    return env


def bench_us(binary, op, size, ranks, iters, env):
    full = dict(os.environ)
    full.update(env)
    cmd = [str(binary), op, "-n", str(ranks), "-b", size, "-e", size, "--csv"]
    if iters:
        cmd += ["--iters", str(iters)]
    out = subprocess.run(cmd, env=full, capture_output=True, text=True, check=True,
                         timeout=300).stdout
    return float(out.strip().splitlines()[-1].split(",")[5])


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("op")
    p.add_argument("size")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--iters", type=int, default=0)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--a", nargs="*", default=["MESHCOMM_SHM_SLOT_STORES=cached"])
    p.add_argument("--b", nargs="*", default=[])
    p.add_argument("--far-ns", type=float, default=FAR_ROUND_TRIP_NS)
    p.add_argument("--build", default=str(ROOT / "build"))
    args = p.parse_args()
    if not 1 <= args.rounds <= 1000:
        sys.exit("placement_ab: --rounds must be 1..1000")
    binary = pathlib.Path(args.build) / "bin" / "meshcomm-bench"
    if not binary.exists():
        sys.exit(f"placement_ab: no {binary}; build meshcomm first (make build)")
    arms = {"A": parse_env(args.a), "B": parse_env(args.b)}
    by_placement = {"near": [], "far": [], "mixed": []}
    with tempfile.TemporaryDirectory() as tmp:
        probe = PlacementProbe(tmp)
        if probe() is None:
            sys.exit("placement_ab: cannot build or run bench/probes/core_placement.c "
                     "(needs gcc, AVX2 and two CPUs)")
        for r in range(args.rounds):
            before = probe()
            order = ["A", "B"] if r % 2 == 0 else ["B", "A"]
            times = {arm: bench_us(binary, args.op, args.size, args.ranks, args.iters, arms[arm])
                     for arm in order}
            after = probe()
            if before is None or after is None:
                placement = "mixed"  # a probe that failed tells nothing
            else:
                far = [t >= args.far_ns for t in (before, after)]
                placement = "far" if all(far) else "near" if not any(far) else "mixed"
            by_placement[placement].append((times["A"], times["B"]))
    print(f"{args.op} {args.size}, {args.ranks} ranks; A: {' '.join(args.a) or '(as set)'}; "
          f"B: {' '.join(args.b) or '(as set)'}")
    for placement, rows in by_placement.items():
        if not rows:
            continue
        a = [x for x, _ in rows]
        b = [y for _, y in rows]
        ratios = [y / x for x, y in rows]
        print(f"  {placement:5} ({len(rows):2} rounds): A {statistics.median(a):9.2f} us, "
              f"B {statistics.median(b):9.2f} us, B/A {statistics.median(ratios):.3f} "
              f"[{min(ratios):.2f}-{max(ratios):.2f}], B faster in {sum(q < 1 for q in ratios)}")


if __name__ == "__main__":
    main()

"""Tests of bench/percell.py's (and percell_cells.py's) verdict, ratio and scheduling logic, on
synthetic rounds (no benchmark runs).

    /usr/bin/python3 -m pytest bench/test_percell.py
"""

import argparse
import csv
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_run  # noqa: E402
import percell  # noqa: E402
import percell_cells  # noqa: E402
import percell_report  # noqa: E402
from percell import Driver  # noqa: E402
from percell_cells import Run, Target, decide, rotation, summarize, target_for  # noqa: E402

KIB, MIB = 1 << 10, 1 << 20


def runs_of(cell, times):
    """times: lib -> [time_us per round, None for a failed round]."""
    transport, op, n, size = cell
    out = []
    for lib, ts in times.items():
        for rnd, t in enumerate(ts, 1):
            if t is None:
                out.append(Run(rnd, 1, lib, transport, op, n, size, exit=124, outcome="fail"))
            else:
                out.append(Run(rnd, 1, lib, transport, op, n, size, bytes=size, time_us=t,
                               check="skip"))
    return out


# ---- targets ----

@pytest.mark.parametrize("transport,size,expected", [
    ("shm", 8, Target("time", 0.9)),
    ("shm", 4 * KIB, Target("time", 0.9)),
    ("shm", 4 * KIB + 4, Target("time", None)),
    ("shm", 32 * KIB, Target("time", None)),
    ("shm", 64 * KIB, Target("busbw", 1.0)),
    ("shm", MIB - 4, Target("busbw", 1.0)),
    ("shm", MIB, Target("busbw", 1.2)),
    ("shm", 16 * MIB, Target("busbw", 1.2)),
    ("tcp", MIB, Target("busbw", 1.0)),
    ("tcp", 8, Target("time", 0.9)),
])
def test_target_for(transport, size, expected):
    assert target_for(transport, size) == expected


def test_target_bounds_are_inclusive():
    assert Target("time", 0.9).met(0.9)
    assert not Target("time", 0.9).met(0.91)
    assert Target("busbw", 1.2).met(1.2)
    assert not Target("busbw", 1.2).met(1.19)


# ---- the 80% rule ----

LAT = Target("time", 0.9)
BW = Target("busbw", 1.0)


def test_met_when_median_and_four_of_five_meet():
    assert decide([0.8, 0.85, 0.7, 0.95, 0.8], LAT, 5) == "met"


def test_undecided_when_median_meets_but_only_three_of_five():
    assert decide([0.8, 0.85, 0.7, 0.95, 1.1], LAT, 5) == "undecided"


def test_missed_when_median_and_four_of_five_miss():
    assert decide([1.2, 1.3, 0.5, 1.1, 1.0], LAT, 5) == "missed"


def test_undecided_when_median_misses_but_only_three_of_five():
    assert decide([1.2, 1.3, 0.5, 0.6, 1.0], LAT, 5) == "undecided"


def test_bandwidth_direction():
    assert decide([1.1, 1.2, 1.05, 0.9, 1.3], BW, 5) == "met"
    assert decide([0.9, 0.8, 0.95, 1.1, 0.7], BW, 5) == "missed"


def test_eighty_percent_generalises_to_other_counts():
    # 11 rounds: 9 needed (9/11 = 82%), 8 is not enough (73%).
    assert decide([0.8] * 9 + [1.5] * 2, LAT, 5) == "met"
    assert decide([0.8] * 8 + [1.5] * 3, LAT, 5) == "undecided"
    # 3 rounds: all 3 needed (2/3 = 67%).
    assert decide([0.8, 0.8, 0.8], LAT, 3) == "met"
    assert decide([0.8, 0.8, 1.0], LAT, 3) == "undecided"
    # 10 rounds: 8 of 10 is exactly 80%.
    assert decide([1.0] * 8 + [0.5] * 2, LAT, 5) == "missed"


def test_fewer_rounds_than_required_are_undecided():
    assert decide([0.5] * 4, LAT, 5) == "undecided"
    assert decide([], LAT, 1) == "undecided"


def test_no_target_between_4k_and_64k():
    assert decide([0.5] * 5, Target("time", None), 5) == "no target"


# ---- rotation ----

def test_rotation_starts_each_round_at_the_next_library():
    libs = ["meshcomm", "impi", "mpich5"]
    assert rotation(libs, 1) == ["meshcomm", "impi", "mpich5"]
    assert rotation(libs, 2) == ["impi", "mpich5", "meshcomm"]
    assert rotation(libs, 3) == ["mpich5", "meshcomm", "impi"]
    assert rotation(libs, 4) == libs
    # Every library is first equally often over L rounds.
    assert sorted(rotation(libs, r)[0] for r in range(1, 4)) == sorted(libs)


# ---- best peer and ratios ----

def test_best_peer_is_the_lowest_median_time_not_each_rounds_minimum():
    cell = ("shm", "all_reduce", 2, 8)
    # a and b alternate as the faster of the round; b's median is lower.
    runs = runs_of(cell, {"meshcomm": [9, 9, 9, 9, 9],
                          "a": [10, 20, 10, 20, 10],
                          "b": [15, 9.5, 15, 9.5, 11]})
    res = summarize(cell, runs, 5, ["meshcomm", "a", "b"])
    assert res.stats["a"].time_median == 10 and res.stats["b"].time_median == 11
    assert res.best == "a"
    assert res.ratios == [0.9, 0.45, 0.9, 0.45, 0.9]
    assert res.verdict == "met"
    # Against each round's fastest peer it would be 9/10, 9/9.5, ...: 2 of 5
    # rounds over 0.9, undecided; the fixed best peer is what is judged.
    assert res.peer_ratios["b"] == [0.6, 9 / 9.5, 0.6, 9 / 9.5, 9 / 11]


def test_best_peer_tie_goes_to_the_first_in_library_order():
    cell = ("shm", "all_reduce", 2, 8)
    runs = runs_of(cell, {"meshcomm": [5] * 5, "x": [10] * 5, "y": [10] * 5})
    assert summarize(cell, runs, 5, ["meshcomm", "y", "x"]).best == "y"


def test_bandwidth_ratio_is_busbw_and_time_ratio_per_peer():
    cell = ("shm", "all_reduce", 2, MIB)
    runs = runs_of(cell, {"meshcomm": [100] * 5, "impi": [150] * 5})
    res = summarize(cell, runs, 5)
    assert res.ratios == [pytest.approx(1.5)] * 5
    assert res.verdict == "met"  # 1.5 >= 1.2
    assert res.peer_ratios["impi"] == [pytest.approx(100 / 150)] * 5
    s = res.stats["meshcomm"]
    assert s.time_min == 100 and s.busbw_median == pytest.approx(MIB / 100e-6 / 1e9)


def test_shm_1m_needs_1_2_while_tcp_needs_1_0():
    shm = ("shm", "all_reduce", 2, MIB)
    tcp = ("tcp", "all_reduce", 2, MIB)
    times = {"meshcomm": [100] * 5, "impi": [110] * 5}  # busbw ratio 1.1
    assert summarize(shm, runs_of(shm, times), 5).verdict == "missed"
    assert summarize(tcp, runs_of(tcp, times), 5).verdict == "met"


def test_median_and_spread_of_ratios():
    cell = ("shm", "all_reduce", 2, 8)
    runs = runs_of(cell, {"meshcomm": [1, 2, 3, 4, 5], "impi": [10] * 5})
    res = summarize(cell, runs, 5)
    assert res.stats["meshcomm"].time_min == 1 and res.stats["meshcomm"].time_median == 3
    assert percell_report.fmt_ratios(res.ratios) == "0.300 [0.100-0.500]"


# ---- a library missing in some rounds ----

def test_peer_missing_in_a_round_pairs_only_the_rounds_both_ran():
    cell = ("shm", "all_reduce", 2, 8)
    runs = runs_of(cell, {"meshcomm": [8, 8, 8, 8, 8], "impi": [10, None, 10, 10, 10]})
    res = summarize(cell, runs, 5)
    assert res.stats["impi"].rounds == 4
    assert len(res.ratios) == 4
    assert res.verdict == "undecided"  # fewer than 5 paired rounds
    assert summarize(cell, runs, 4).verdict == "met"


def test_meshcomm_missing_in_a_round():
    cell = ("shm", "all_reduce", 2, 8)
    runs = runs_of(cell, {"meshcomm": [None, 20, 20, 20, 20, 20], "impi": [10] * 6})
    res = summarize(cell, runs, 5)
    assert len(res.ratios) == 5 and res.verdict == "missed"


def test_no_peer_and_no_data():
    cell = ("shm", "all_reduce", 2, 8)
    assert summarize(cell, runs_of(cell, {"meshcomm": [1] * 5}), 5).verdict == "no peer"
    assert summarize(cell, runs_of(cell, {"impi": [1] * 5}), 5).verdict == "no data"


def test_active_libs_drop_skips_and_repeated_failures():
    cell = ("tcp", "all_reduce", 2, 8)
    runs = runs_of(cell, {"meshcomm": [1, 1], "impi": [None, 1], "ompi5": [None, None]})
    runs.append(Run(1, 2, "deepspeed", *cell, exit=4, outcome="skip"))
    libs = ["meshcomm", "impi", "ompi5", "deepspeed"]
    assert percell_cells.active_libs(libs, runs) == ["meshcomm", "impi"]


# ---- sizes ----

@pytest.mark.parametrize("text,value", [("8", 8), ("4K", 4096), ("64k", 65536), ("1M", MIB),
                                        ("16MiB", 16 * MIB), ("2G", 2 << 30), ("1KB", 1024)])
def test_parse_size(text, value):
    assert percell.parse_size(text) == value


def test_parse_size_rejects_junk():
    with pytest.raises(argparse.ArgumentTypeError):
        percell.parse_size("1.5M")


def test_quick_defaults_and_given_options_win():
    a = percell.parse_args(["--quick", "--libs", "meshcomm impi", "--rounds", "3",
                            "--max-rounds", "3"])
    assert (a.transports, a.ops, a.nranks, a.sizes) == (["shm"], ["all_reduce"], [2],
                                                         [8, 64 * KIB, MIB])
    assert a.rounds == 3 and a.libs == ["meshcomm", "impi"]
    assert percell.parse_args(["--quick"]).rounds == 5


def test_meshcomm_is_required():
    with pytest.raises(SystemExit):
        percell.parse_args(["--libs", "impi mpich5"])


@pytest.mark.parametrize("size,expected", [
    (8, Target("time", 1.0)),
    (64 * KIB, Target("time", 1.0)),
    (64 * KIB + 4, Target("time", None)),
    (MIB, Target("time", 1.2)),
    (16 * MIB, Target("time", 1.2)),
])
def test_torch_reference_takes_the_torch_targets(size, expected):
    assert target_for("shm", size, "torch-meshcomm") == expected


def test_torch_reference_compares_torch_meshcomm():
    cell = ("shm", "all_reduce", 2, 8)
    runs = runs_of(cell, {"torch-meshcomm": [5.0] * 5, "deepspeed": [5.5] * 5,
                          "meshcomm": [0.3] * 5})
    res = summarize(cell, runs, 5, reference="torch-meshcomm")
    # meshcomm's C++ call is a peer here, and the fastest one.
    assert res.best == "meshcomm" and res.verdict == "missed"
    res = summarize(cell, [r for r in runs if r.lib != "meshcomm"], 5,
                    reference="torch-meshcomm")
    assert res.best == "deepspeed" and res.verdict == "met"
    assert res.ratios == pytest.approx([5.0 / 5.5] * 5)


def test_torch_reference_defaults_and_requirement():
    a = percell.parse_args(["--reference", "torch-meshcomm"])
    assert a.libs == ["torch-meshcomm", "deepspeed"]
    assert "torch-meshcomm" not in percell.parse_args([]).libs
    with pytest.raises(SystemExit):
        percell.parse_args(["--reference", "torch-meshcomm", "--libs", "meshcomm deepspeed"])


def test_torch_op_reference_takes_the_torch_targets():
    a = percell.parse_args(["--reference", "torch-meshcomm-op"])
    assert a.libs == ["torch-meshcomm-op", "deepspeed"]
    assert "torch-meshcomm-op" not in percell.parse_args([]).libs
    assert target_for("shm", 8, "torch-meshcomm-op") == target_for("shm", 8, "torch-meshcomm")
    assert target_for("shm", 8, "torch-meshcomm-op").bound == 1.0


# ---- the driver, with a fake benchmark ----

class Fake:
    """measure() from a table (lib, cell) -> [time per call]; a clock that
    advances one second per run."""

    def __init__(self, table, skip=()):
        self.table, self.skip = table, set(skip)
        self.calls = []
        self.now = 0.0

    def measure(self, lib, cell):
        self.now += 1
        self.calls.append((lib, cell))
        if (lib, cell) in self.skip:
            return {"exit": 4, "outcome": "skip", "note": "unsupported"}
        seq = self.table[(lib, cell)]
        k = sum(1 for c in self.calls if c == (lib, cell)) - 1
        t = seq[min(k, len(seq) - 1)]
        if t is None:
            return {"exit": 124, "outcome": "fail", "note": "timed out"}
        return {"bytes": cell[3], "time_us": t, "busbw_gbps": 0.0, "check": "skip"}


def driver(fake, cells, libs, rounds=5, max_rounds=11, budget_s=1e9):
    recorded = []
    d = Driver(cells, libs, rounds, max_rounds, budget_s, fake.measure, recorded.append,
               clock=lambda: fake.now)
    return d, recorded


LIBS = ["meshcomm", "impi", "mpich5"]
DECIDED = ("shm", "all_reduce", 2, 8)
NOISY = ("shm", "all_reduce", 2, 64 * KIB)


def test_driver_adds_rounds_only_to_undecided_cells():
    fake = Fake({("meshcomm", DECIDED): [5], ("impi", DECIDED): [10], ("mpich5", DECIDED): [12],
                 # a busbw ratio of 2.0, then 0.5, and so on: never 80% either way
                 ("meshcomm", NOISY): [10, 40] * 6, ("impi", NOISY): [20], ("mpich5", NOISY): [20]})
    d, recorded = driver(fake, [DECIDED, NOISY], LIBS)
    assert d.run() == "finished"
    rounds = lambda cell: max(r.round for r in recorded if r.cell == cell)
    assert rounds(DECIDED) == 5
    assert rounds(NOISY) == 11
    assert summarize(NOISY, d.runs[NOISY], 5).verdict == "undecided"


def test_driver_rotates_and_records_positions():
    fake = Fake({(lib, DECIDED): [1 + i] for i, lib in enumerate(LIBS)})
    d, recorded = driver(fake, [DECIDED], LIBS, rounds=3, max_rounds=3)
    d.run()
    firsts = [r.lib for r in recorded if r.position == 1]
    assert firsts == ["meshcomm", "impi", "mpich5"]
    assert [r.position for r in recorded if r.round == 2] == [1, 2, 3]
    assert [r.lib for r in recorded if r.round == 2] == ["impi", "mpich5", "meshcomm"]


def test_driver_drops_skipped_library_and_keeps_one_that_failed_once():
    fake = Fake({("meshcomm", DECIDED): [5], ("impi", DECIDED): [None, 10]},
                skip=[("mpich5", DECIDED)])
    d, recorded = driver(fake, [DECIDED], LIBS)
    d.run()
    assert sum(1 for r in recorded if r.lib == "mpich5") == 1
    # impi failed in round 1: 4 paired rounds after 5, so a sixth round.
    assert max(r.round for r in recorded) == 6
    res = summarize(DECIDED, d.runs[DECIDED], 5)
    assert len(res.ratios) == 5 and res.verdict == "met"


def test_driver_stops_a_cell_without_peers():
    fake = Fake({("meshcomm", DECIDED): [5]}, skip=[("impi", DECIDED), ("mpich5", DECIDED)])
    d, recorded = driver(fake, [DECIDED], LIBS)
    assert d.run() == "finished"
    assert len(recorded) == 3


def test_driver_stops_at_the_budget_with_rounds_spread_over_cells():
    table = {(lib, c): [5 if lib == "meshcomm" else 10] for lib in LIBS for c in (DECIDED, NOISY)}
    fake = Fake(table)
    # 3 runs (3 s) per round; 20 s: rounds 1-3 of both cells (18 s), then
    # round 4 of the first cell would end at 21 s.
    d, recorded = driver(fake, [DECIDED, NOISY], LIBS, budget_s=20)
    assert d.run() == "budget"
    assert {max(r.round for r in recorded if r.cell == c) for c in (DECIDED, NOISY)} == {3}
    assert fake.now <= 20


# ---- runs.csv and the report ----

def test_runs_csv_round_trip_and_report(tmp_path):
    cell = ("shm", "all_reduce", 2, 8)
    runs = runs_of(cell, {"meshcomm": [5, 5, 5], "impi": [10, None, 10]})
    runs.append(Run(1, 3, "deepspeed", *cell, exit=2, outcome="skip", note="not installed"))
    with open(tmp_path / "runs.csv", "w", newline="") as f:
        csv.writer(f).writerow(percell_cells.FIELDS)
        for r in runs:
            percell_cells.write_run(f, r)
    assert percell_cells.read_runs(tmp_path / "runs.csv") == runs
    lines = percell_report.report(str(tmp_path), min_rounds=2)
    text = (tmp_path / "report.md").read_text()
    assert "| 8 B | 5.000 / 5.000 | impi | 10.00 / 10.00 | time <= 0.9 | 0.500 [0.500-0.500] " \
           "| 2 | met |" in text
    assert "deepspeed: skip, exit 2: not installed" in text
    assert "impi: fail, exit 124" in text
    assert any("met 1" in line for line in lines)


def test_ratios_split_by_where_the_reference_ran(tmp_path):
    cell = ("shm", "all_reduce", 2, 8)
    runs = runs_of(cell, {"meshcomm": [5, 9, 5, 10], "impi": [10, 10, 10, 10]})
    # The reference's runs: near, far, near, not probed; the peer's probes
    # do not count.
    probes = {(1, "meshcomm"): 100.0, (2, "meshcomm"): 480.0, (3, "meshcomm"): 249.0,
              (1, "impi"): 600.0, (2, "impi"): 90.0}
    for r in runs:
        r.round_trip_ns = probes.get((r.round, r.lib))
    result = summarize(cell, runs, 2)
    split = percell_cells.ratios_by_placement(result, runs)
    assert split == {"near": [0.5, 0.5], "far": [0.9]}
    with open(tmp_path / "runs.csv", "w", newline="") as f:
        csv.writer(f).writerow(percell_cells.FIELDS)
        for r in runs:
            percell_cells.write_run(f, r)
    assert percell_cells.read_runs(tmp_path / "runs.csv") == runs
    percell_report.report(str(tmp_path), min_rounds=2)
    text = (tmp_path / "report.md").read_text()
    assert "## By placement" in text
    assert "| shm all_reduce 2 ranks 8 B | impi | 0.500 [0.500-0.500] (2) | 0.900 [0.900-0.900] (1) |" \
        in text


def test_no_placement_section_without_probes(tmp_path):
    cell = ("shm", "all_reduce", 2, 8)
    runs = runs_of(cell, {"meshcomm": [5, 5], "impi": [10, 10]})
    with open(tmp_path / "runs.csv", "w", newline="") as f:
        csv.writer(f).writerow(percell_cells.FIELDS)
        for r in runs:
            percell_cells.write_run(f, r)
    percell_report.report(str(tmp_path), min_rounds=2)
    assert "## By placement" not in (tmp_path / "report.md").read_text()


# ---- run_peer(): run_peer.sh's exit status and output, from a stand-in ----

FAKE_RUN_PEER = r"""
header=op,nranks,bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,check
case "$1" in
  ok) echo "$header"; echo "all_reduce,$4,$5,2,float32,12.5,0.0006,0.0006,ok" ;;
  zero) echo "$header"; echo "all_gather,$4,0,0,float32,3.0,0.0,0.0,skip" ;;
  norow) echo "$header"; echo "bench: fewer than one float32 per rank; skipped" >&2 ;;
  missing) echo "run_peer.sh: not installed" >&2; exit 2 ;;
  unsupported) echo "run_peer.sh: no tcp" >&2; exit 4 ;;
  wrong) echo "$header"; echo "all_reduce,$4,$5,2,float32,12.5,0.0006,0.0006,fail"; exit 1 ;;
  crash) echo "rank 1 died" >&2; exit 139 ;;
  chatty) echo "launcher: warming up"; echo "$header"; echo "all_reduce,$4,$5,2,float32,7,0,0,skip" ;;
  silent) ;;
  short) echo "$header"; echo "all_reduce,$4,$5" ;;
  hang) trap '' TERM; sleep 30 ;;
esac
"""


@pytest.fixture
def fake_run_peer(tmp_path, monkeypatch):
    script = tmp_path / "run_peer.sh"
    script.write_text(FAKE_RUN_PEER)
    monkeypatch.setattr(peer_run, "RUN_PEER", str(script))
    monkeypatch.setattr(peer_run, "GRACE_S", 1)
    monkeypatch.setattr(peer_run, "STOP_WAIT_S", 0.5)


@pytest.mark.parametrize("lib,outcome,exit_code,note", [
    ("ok", "ok", 0, ""),
    ("zero", "skip", 0, "fewer than one element per rank"),
    ("norow", "skip", 0, "bench: fewer than one float32 per rank; skipped"),
    ("missing", "skip", 2, "run_peer.sh: not installed"),
    ("unsupported", "skip", 4, "run_peer.sh: no tcp"),
    ("wrong", "fail", 1, "check failed"),
    ("crash", "fail", 139, "rank 1 died"),
    ("chatty", "ok", 0, ""),
    ("silent", "fail", 0, "no CSV on stdout"),
])
def test_run_peer_outcomes(fake_run_peer, lib, outcome, exit_code, note):
    res = peer_run.run_peer(lib, ("shm", "all_reduce", 2, 8), 60, [])
    assert (res["outcome"], res["exit"], res.get("note", "")) == (outcome, exit_code, note)
    assert res["timestamp"] and res["load1"] is not None
    if lib == "ok":
        assert (res["bytes"], res["time_us"], res["check"]) == (8, 12.5, "ok")


def test_run_peer_short_row_is_a_failure(fake_run_peer):
    res = peer_run.run_peer("short", ("shm", "all_reduce", 2, 8), 60, [])
    assert (res["outcome"], res["exit"]) == ("fail", 0)
    assert res["note"].startswith("unreadable row: ")


def test_run_peer_kills_a_run_that_outlasts_its_timeout(fake_run_peer):
    t0 = percell.time.monotonic()
    res = peer_run.run_peer("hang", ("shm", "all_reduce", 2, 8), 1, [])
    assert (res["outcome"], res["exit"], res["note"]) == ("fail", 124, "timed out")
    # 1 s timeout + 1 s grace + 0.5 s for SIGTERM, then SIGKILL.
    assert percell.time.monotonic() - t0 < 10


def test_driver_compares_the_given_reference():
    # With torch-meshcomm compared, a cell without it is not run; one with it
    # and a peer is, and stops once decided.
    cell = ("shm", "all_reduce", 2, 8)
    fake = Fake({("torch-meshcomm", cell): [5], ("deepspeed", cell): [6]})
    recorded = []
    d = Driver([cell], ["torch-meshcomm", "deepspeed"], 5, 11, 1e9, fake.measure,
               recorded.append, clock=lambda: fake.now, reference="torch-meshcomm")
    d.run()
    assert len(recorded) == 10
    res = summarize(cell, d.runs[cell], 5, reference="torch-meshcomm")
    assert res.best == "deepspeed" and res.verdict == "met"
    fake = Fake({("deepspeed", cell): [6]})
    d = Driver([cell], ["deepspeed"], 5, 11, 1e9, fake.measure, [].append,
               clock=lambda: fake.now, reference="torch-meshcomm")
    d.run()
    assert fake.calls == []

"""The flight recorder and its diagnosis: dumps on demand (Python), on
SIGUSR1 during a busy loop, on a timeout, a lost peer and a mismatch;
meshcomm-diagnose on the dumps of healthy, hung and failed jobs and on
unreadable input; meshrun diagnosing a hung job (a SIGSTOPped rank) and a
failed one; the per-call trace (MESHCOMM_LOG=coll).

Every job is bounded: operations have short deadlines where a failure is
the point, and meshrun runs have a --timeout and a subprocess timeout.
"""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

import meshcomm
from meshcomm import diagnose
from mcutil import init

ROOT = Path(__file__).resolve().parents[2]
MESHRUN = ROOT / "tools" / "meshrun"
DIAGNOSE = ROOT / "tools" / "meshcomm-diagnose"
PACKAGE_DIR = Path(meshcomm.__file__).resolve().parents[1]
RUN_TIMEOUT = 90.0


def read_dump(path):
    """(header, records) of a dump, checking that every line is JSON."""
    lines = Path(path).read_text().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "meshcomm-flight-recorder"
    return header, [json.loads(line) for line in lines[1:]]


def tool_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PACKAGE_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.pop("MESHCOMM_DUMP_DIR", None)
    env.update(extra)
    return env


def worker(elements, body, imports=""):
    """A worker script for meshrun: `imports`, a process group from meshrun's
    environment, x = `elements` float32 ones, then `body`."""
    return (f"{imports}import numpy as np\nimport meshcomm\nmeshcomm.init_process_group()\n"
            f"x = np.ones({elements}, np.float32)\n{body}")


def diagnosis(dump_dir, status=1):
    """meshcomm-diagnose's report on the dumps in dump_dir, which must end
    with `status` (1: it found a problem)."""
    result = diagnose.diagnose(str(dump_dir))
    assert result.status == status, result.text
    return result.text


def run_meshrun(tmp_path, body, *args, env=None, timeout=RUN_TIMEOUT):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, str(MESHRUN), *map(str, args), str(script)],
                          env=env or tool_env(), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


# ---- on demand --------------------------------------------------------------

def _on_demand(rank, nprocs, port, dump_dir):
    os.environ["MESHCOMM_DUMP_DIR"] = dump_dir
    init(rank, nprocs, port)
    x = np.ones(1024, np.float32)
    for _ in range(3):
        meshcomm.all_reduce(x)
    meshcomm.broadcast(x, src=1)
    if rank == 0:
        meshcomm.send(x, dst=1)
    elif rank == 1:
        meshcomm.recv(x, src=0)
    meshcomm.all_reduce(x, async_op=True).wait()
    meshcomm.barrier()
    default = meshcomm.dump_flight_recorder()
    explicit = meshcomm.dump_flight_recorder(Path(dump_dir) / "explicit" / f"r{rank}.jsonl")
    meshcomm.destroy_process_group()
    return default, explicit


def test_dump_on_demand_records_every_operation_and_diagnoses_healthy(run_workers, free_port,
                                                                     tmp_path):
    results = run_workers(_on_demand, 3, (free_port, str(tmp_path)))
    for rank, (default, explicit) in enumerate(results):
        assert default == str(tmp_path / f"rank_{rank}.jsonl")
        assert explicit == str(tmp_path / "explicit" / f"r{rank}.jsonl")
        header, records = read_dump(default)
        assert header["rank"] == rank and header["world_size"] == 3
        assert header["reason"] == "on demand"
        world = [g for g in header["groups"] if g["name"] == "mccl_world_group"]
        assert world and world[0]["world_ranks"] == [0, 1, 2]
        coll = [r for r in records if r["kind"] == "collective"]
        assert [(r["op"], r["seq"]) for r in coll] == [
            ("all_reduce", 0), ("all_reduce", 1), ("all_reduce", 2), ("broadcast", 3),
            ("all_reduce", 4), ("barrier", 5)]
        for r in coll:
            assert r["state"] == "completed"
            assert r["algorithm"] and r["transport"] in ("shm", "tcp")
            assert r["enqueued_at"] <= r["started_at"] <= r["finished_at"]
        assert coll[0]["dtype"] == "float32" and coll[0]["count"] == 1024
        assert coll[0]["bytes"] == 4096
        assert coll[3]["root"] == 1
        p2p = [r for r in records if r["kind"] == "p2p"]
        if rank < 2:
            assert [(r["op"], r["seq"], r["peer"], r["bytes"], r["state"]) for r in p2p] == [
                ("send" if rank == 0 else "recv", 0, 1 - rank, 4096, "completed")]
        else:
            assert p2p == []
    text = diagnosis(tmp_path, 0)
    assert "3 of 3 ranks left a dump" in text
    assert "no problem found" in text


def test_dump_flight_recorder_rejects_bad_paths():
    with pytest.raises(TypeError):
        meshcomm.dump_flight_recorder(5)
    with pytest.raises(ValueError):
        meshcomm.dump_flight_recorder("")


def _recorder_off(rank, nprocs, port, dump_dir):
    os.environ["MESHCOMM_FLIGHT_RECORDER"] = "0"
    init(rank, nprocs, port)
    meshcomm.all_reduce(np.ones(4, np.float32))
    try:
        meshcomm.dump_flight_recorder(dump_dir)
    except meshcomm.DistError as e:
        message = str(e)
    else:
        message = None
    meshcomm.destroy_process_group()
    return message


def test_recorder_off_refuses_to_dump(run_workers, free_port, tmp_path):
    for message in run_workers(_recorder_off, 2, (free_port, str(tmp_path))):
        assert message is not None and "MESHCOMM_FLIGHT_RECORDER=0" in message
    assert list(tmp_path.iterdir()) == []


# ---- SIGUSR1 during a busy loop ------------------------------------------------

def _busy(rank, nprocs, port, out_dir):
    os.environ["MESHCOMM_DUMP_DIR"] = out_dir
    init(rank, nprocs, port)
    Path(out_dir, f"ready_{rank}").write_text(str(os.getpid()))
    dump = Path(out_dir, f"rank_{rank}.jsonl")
    stop = Path(out_dir, "stop")
    x = np.ones(256, np.float32)
    flag = np.zeros(1, np.int32)
    iterations, seen_at, end = 0, None, time.monotonic() + 60
    while time.monotonic() < end:
        meshcomm.all_reduce(x)
        iterations += 1
        if seen_at is None and dump.exists():
            seen_at = iterations
        # Every rank stops at the same iteration: the one where any saw `stop`.
        flag[0] = 1 if stop.exists() else 0
        meshcomm.all_reduce(flag, op=meshcomm.ReduceOp.MAX)
        if flag[0]:
            break
    meshcomm.destroy_process_group()
    return seen_at, iterations


def test_sigusr1_dumps_during_a_busy_loop_which_continues(spawn_workers, free_port, tmp_path):
    workers = spawn_workers(_busy, 2, (free_port, str(tmp_path)), timeout=90)
    deadline = time.monotonic() + 30
    while not all((tmp_path / f"ready_{r}").exists() for r in range(2)):
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.05)
    time.sleep(0.3)  # let the loop run
    for r in range(2):
        os.kill(int((tmp_path / f"ready_{r}").read_text()), signal.SIGUSR1)
    dumps = [tmp_path / f"rank_{r}.jsonl" for r in range(2)]
    while not all(d.exists() for d in dumps):
        assert time.monotonic() < deadline + 10, "no dump after SIGUSR1"
        time.sleep(0.05)
    for r, d in enumerate(dumps):
        header, records = read_dump(d)
        assert header["rank"] == r and header["reason"] == "SIGUSR1"
        assert len(records) > 2
        assert {rec["op"] for rec in records} == {"all_reduce"}
        done = [rec["seq"] for rec in records if rec["state"] == "completed"]
        assert done == sorted(done) and len(done) >= len(records) - 1
    time.sleep(0.3)  # the loop goes on after the dump
    (tmp_path / "stop").write_text("")
    outcomes = workers.join()
    assert all(o.ok for o in outcomes), [o.describe() for o in outcomes]
    for o in outcomes:
        seen_at, iterations = o.result
        assert seen_at is not None and iterations > seen_at


# ---- dumps on failures ------------------------------------------------------

def _timeout(rank, nprocs, port, dump_dir):
    os.environ["MESHCOMM_DUMP_DIR"] = dump_dir
    init(rank, nprocs, port, timeout=timedelta(seconds=2))
    x = np.ones(1 << 20, np.float32)
    meshcomm.all_reduce(x)
    if rank == 1:
        time.sleep(4)  # never joins the second all_reduce
        return None
    try:
        meshcomm.all_reduce(x)
    except meshcomm.DistError as e:
        return str(e)
    return "no error"


def test_timeout_writes_the_dump_and_names_it(spawn_workers, free_port, tmp_path):
    outcomes = spawn_workers(_timeout, 2, (free_port, str(tmp_path)), timeout=60).join()
    assert all(o.ok for o in outcomes), [o.describe() for o in outcomes]
    message = outcomes[0].result
    assert "Timed out waiting for" in message
    assert f"flight recorder written to {tmp_path}/rank_0.jsonl" in message
    assert f"meshcomm-diagnose {tmp_path}" in message
    _, records = read_dump(tmp_path / "rank_0.jsonl")
    assert (records[-1]["op"], records[-1]["seq"], records[-1]["state"]) == ("all_reduce", 1,
                                                                            "failed")
    assert "Timed out waiting for" in records[-1]["error"]
    text = diagnosis(tmp_path)
    assert "no dump from rank 1" in text
    assert "rank 0 failed in all_reduce #1 (float32, 4 MiB)" in text


def _peer_lost(rank, nprocs, port, dump_dir):
    os.environ["MESHCOMM_DUMP_DIR"] = dump_dir
    init(rank, nprocs, port, timeout=timedelta(seconds=30))
    x = np.ones(4096, np.float32)
    meshcomm.all_reduce(x)
    if rank == 2:
        os._exit(3)
    try:
        meshcomm.all_reduce(x)
    except meshcomm.DistError as e:
        return type(e).__name__, str(e)
    return None


def test_lost_peer_writes_the_dump(spawn_workers, free_port, tmp_path):
    outcomes = spawn_workers(_peer_lost, 3, (free_port, str(tmp_path)), timeout=60).join()
    assert outcomes[2].exitcode == 3
    for o in outcomes[:2]:
        assert o.ok, o.describe()
        kind, message = o.result
        assert kind == "DistPeerLostError", message
        assert f"flight recorder written to {tmp_path}/rank_{o.rank}.jsonl" in message
    text = diagnosis(tmp_path)
    assert "no dump from rank 2" in text
    assert "ranks 0,1 failed in all_reduce #1" in text


def _mismatch(rank, nprocs, port, dump_dir):
    os.environ["MESHCOMM_DUMP_DIR"] = dump_dir
    init(rank, nprocs, port)
    meshcomm.barrier()
    try:
        meshcomm.all_reduce(np.ones(4 + (rank == 1), np.float32))
    except meshcomm.DistError as e:
        return str(e)
    return None


def test_mismatch_writes_the_dump_and_diagnose_shows_both_signatures(spawn_workers, free_port,
                                                                    tmp_path):
    outcomes = spawn_workers(_mismatch, 3, (free_port, str(tmp_path)), timeout=60).join()
    assert all(o.ok for o in outcomes), [o.describe() for o in outcomes]
    for o in outcomes:
        assert o.result and "flight recorder written to" in o.result
    text = diagnosis(tmp_path)
    assert ("mismatch at #1: ranks 0,2 called all_reduce #1 (float32, 16 B); "
            "rank 1 called all_reduce #1 (float32, 20 B)") in text


# ---- meshrun ----------------------------------------------------------------

HANG = worker("1 << 20", """\
rank = meshcomm.get_rank()
for _ in range(3):
    meshcomm.all_reduce(x)
meshcomm.broadcast(x, src=0)
if rank == 1:
    os.kill(os.getpid(), signal.SIGSTOP)
meshcomm.all_reduce(x)
""", imports="import os, signal\n")


def _others_wait_or_failed(summary, operation):
    """Ranks 0 and 2 each wait in, or failed in, `operation` (a pattern):
    together ("ranks 0,2 wait in ...") or apart ("rank 0 waits in ...;
    rank 2 failed in ...")."""
    if re.search(rf"ranks 0,2 (wait in|failed in) {operation}", summary):
        return
    for r in (0, 2):
        assert re.search(rf"\brank {r} (waits in|failed in) {operation}", summary), summary


def test_meshrun_names_the_stopped_rank_and_the_operation(tmp_path):
    logs = tmp_path / "logs"
    run = run_meshrun(tmp_path, HANG, "--nproc-per-node", 3, "--log-dir", logs, "--timeout", 8,
                      "--grace-seconds", 1)
    assert run.returncode == 124, run.stderr
    err = run.stderr
    assert "--timeout of 8 s reached" in err
    summary = err[err.index("diagnosis of the workers' flight recorders"):]
    # The others wait in all_reduce #4; or, when the store's liveness check
    # took the stopped rank for dead first, they failed in it, each at its
    # own moment (so one may have failed while the other still waits).
    _others_wait_or_failed(summary, r"all_reduce #4 \(float32, 4 MiB\)")
    assert "rank 1 left no dump" in summary
    assert "is stopped (SIGSTOP, or a debugger)" in summary
    for r in (0, 2):
        read_dump(logs / f"rank_{r}.jsonl")
    again = subprocess.run([sys.executable, str(DIAGNOSE), str(logs)], env=tool_env(),
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 1
    _others_wait_or_failed(again.stdout, r"all_reduce #4")


FAILS = worker(16, """\
meshcomm.all_reduce(x)
meshcomm.broadcast(x, src=0)
if meshcomm.get_rank() == 2:
    # Long enough for the others to be waiting for it in the next call
    # even on a loaded machine: the diagnosis must find them there.
    time.sleep(1)
    print("rank 2 crashes", flush=True)
    os._exit(1)
meshcomm.all_reduce(x)
""", imports="import os\nimport time\n")


def test_meshrun_diagnoses_after_a_failed_worker(tmp_path):
    dumps = tmp_path / "dumps"
    run = run_meshrun(tmp_path, FAILS, "--nproc-per-node", 3, "--timeout", 60,
                      "--grace-seconds", 1, env=tool_env(MESHCOMM_DUMP_DIR=str(dumps)))
    assert run.returncode == 1, run.stderr
    err = run.stderr
    assert err.index("failed first") < err.index("diagnosis of the workers' flight recorders")
    summary = err[err.index("diagnosis of the workers' flight recorders"):]
    assert f"meshcomm-diagnose {dumps}" in summary
    # The others wait in the next all_reduce, or already failed in it when
    # they learned that rank 2 left (each rank either way).
    line = next(text for text in summary.splitlines() if "rank 2 left no dump" in text)
    states = r"(wait in|waits in|failed in) all_reduce #2 \(float32, 64 B\)"
    assert (re.search(r"ranks 0,1 " + states, line)
            or (re.search(r"rank 0 " + states, line) and re.search(r"rank 1 " + states, line))), line


def test_meshrun_says_nothing_more_on_success(tmp_path):
    run = run_meshrun(tmp_path, "import meshcomm\nmeshcomm.init_process_group()\n"
                      "meshcomm.barrier()\n", "--nproc-per-node", 2, "--timeout", 60)
    assert run.returncode == 0, run.stderr
    assert "diagnosis" not in run.stderr


# ---- the per-call trace -----------------------------------------------------

TRACED = worker(1024, """\
meshcomm.all_reduce(x)
meshcomm.broadcast(x, src=1)
if meshcomm.get_rank() == 0:
    meshcomm.send(x, dst=1)
else:
    meshcomm.recv(x, src=0)
meshcomm.destroy_process_group()
""")


def test_trace_prints_one_line_per_operation(tmp_path):
    run = run_meshrun(tmp_path, TRACED, "--nproc-per-node", 2, "--timeout", 60,
                      env=tool_env(MESHCOMM_LOG="coll"))
    assert run.returncode == 0, run.stderr
    line = re.compile(r"^\[rank (\d)\] \[meshcomm coll pid \d+\] rank=(\d) "
                      r"group=mccl_world_group seq=(\d+) op=(\w+) bytes=(\d+) "
                      r"algorithm=(\S+) transport=(shm|tcp) us=\d+\.\d state=completed$")
    seen = {}
    for text in run.stderr.splitlines():
        m = line.match(text)
        if m:
            assert m.group(1) == m.group(2)
            seen.setdefault(int(m.group(1)), []).append(
                (m.group(4), int(m.group(3)), int(m.group(5)), m.group(6)))
    for rank in (0, 1):
        ops = seen[rank]
        assert [(op, seq, size) for op, seq, size, _ in ops[:2]] == [
            ("all_reduce", 0, 4096), ("broadcast", 1, 4096)]
        assert ops[0][3] != "-"
        assert (ops[2][0], ops[2][1], ops[2][2], ops[2][3]) == (
            "send" if rank == 0 else "recv", 0, 4096, "-")
        assert [op for op, _, _, _ in ops[3:]] == ["barrier"] * (len(ops) - 3)


@pytest.mark.parametrize("variable, value, says", [
    ("MESHCOMM_LOG", "colls", "MESHCOMM_LOG=colls: unknown item 'colls'"),
    ("MESHCOMM_FLIGHT_RECORDER", "-1", "MESHCOMM_FLIGHT_RECORDER=-1: give the number"),
    ("MESHCOMM_FLIGHT_RECORDER", "lots", "MESHCOMM_FLIGHT_RECORDER"),
])
def test_malformed_settings_fail_the_first_group(tmp_path, variable, value, says):
    run = run_meshrun(tmp_path, "import meshcomm\nmeshcomm.init_process_group()\n",
                      "--nproc-per-node", 1, "--timeout", 60, env=tool_env(**{variable: value}))
    assert run.returncode != 0
    assert says in run.stderr


# ---- meshcomm-diagnose on crafted input ------------------------------------------

def write_dump(directory, rank, world, records, groups=None, dumped_at=1000.0):
    groups = groups or [{"id": 0, "name": "world", "rank": rank,
                         "world_ranks": list(range(world))}]
    header = {"format": "meshcomm-flight-recorder", "version": 1, "rank": rank,
              "world_size": world, "pid": 100 + rank, "host": "h", "job": "j",
              "reason": "SIGUSR1", "dumped_at": dumped_at, "capacity": 2000,
              "recorded": len(records), "groups": groups}
    lines = [json.dumps(header)] + [json.dumps(r) for r in records]
    (Path(directory) / f"rank_{rank}.jsonl").write_text("\n".join(lines) + "\n")


def op(seq, name="all_reduce", state="completed", started=900.0, count=1 << 20, **extra):
    record = {"id": seq + 1, "group_id": 0, "group": "world", "kind": "collective", "seq": seq,
              "op": name, "dtype": "float32", "count": count, "bytes": 4 * count,
              "algorithm": "ring", "transport": "tcp", "state": state, "enqueued_at": started,
              "started_at": started, "finished_at": None if state == "started" else started + 1}
    record.update(extra)
    return record


def test_diagnose_names_the_rank_behind_and_what_the_others_wait_in(tmp_path):
    history = [op(s) for s in range(41)] + [op(41, "broadcast", count=16, root=0)]
    for rank in (0, 1, 3):
        write_dump(tmp_path, rank, 4, history + [op(42, state="started", started=968.8)])
    write_dump(tmp_path, 2, 4, history)
    text = diagnosis(tmp_path)
    assert ("group world (4 ranks):" in text)
    assert ("ranks 0,1,3 wait in all_reduce #42 (float32, 4 MiB) since 31.2 s; "
            "rank 2 last finished broadcast #41 and never entered #42") in text
    assert ("ranks 0,1,3: entered #42, finished #41; rank 2: entered #41, finished #41"
            in text)


def test_diagnose_abbreviates_long_rank_lists(tmp_path):
    history = [op(s) for s in range(3)]
    for rank in range(64):
        if rank != 40:
            write_dump(tmp_path, rank, 64, history + [op(3, state="started", started=990.0)])
    write_dump(tmp_path, 40, 64, history)
    result = diagnose.diagnose(str(tmp_path))
    assert ("ranks 0-39,41-63 wait in all_reduce #3 (float32, 4 MiB) since 10.0 s; "
            "rank 40 last finished all_reduce #2 and never entered #3") in result.text
    assert len(result.lines) <= 6


def test_diagnose_reports_missing_ranks(tmp_path):
    write_dump(tmp_path, 0, 3, [op(0)])
    write_dump(tmp_path, 2, 3, [op(0)])
    text = diagnosis(tmp_path)
    assert "no dump from rank 1" in text


def test_diagnose_exits_0_on_a_healthy_job(tmp_path):
    for rank in range(3):
        write_dump(tmp_path, rank, 3, [op(s) for s in range(5)])
    assert diagnose.main([str(tmp_path)]) == 0


@pytest.mark.parametrize("content, says", [
    (b"", "is empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00garbage", "not a meshcomm flight recorder dump"),
    (b'{"some": "other json"}\n', "not a meshcomm flight recorder dump"),
    ("cut", "truncated"),
    ("bad record", "line 2 is not an operation record"),
    ("bad field", "line 3: its seq is not a number"),
    ("renamed", "its header says rank 0"),
])
def test_diagnose_refuses_unreadable_files_without_a_traceback(tmp_path, content, says):
    write_dump(tmp_path, 0, 2, [op(0)])
    write_dump(tmp_path, 1, 2, [op(0), op(1)])
    bad = tmp_path / "rank_1.jsonl"
    if content == "cut":
        bad.write_bytes(bad.read_bytes()[:-25])
    elif content == "bad record":
        bad.write_text(bad.read_text().split("\n")[0] + "\n[1, 2]\n")
    elif content == "bad field":
        bad.write_text(bad.read_text().replace('"seq": 1,', '"seq": "1",'))
    elif content == "renamed":
        bad.write_bytes((tmp_path / "rank_0.jsonl").read_bytes())
    else:
        bad.write_bytes(content)
    run = subprocess.run([sys.executable, str(DIAGNOSE), str(tmp_path)], env=tool_env(),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "Traceback" not in run.stdout + run.stderr
    assert f"{bad}: " in run.stdout and says in run.stdout
    assert "group world" in run.stdout  # the readable dump is still diagnosed
    assert run.stdout.count("meshcomm-diagnose: ") == 1


def test_diagnose_refuses_a_missing_or_empty_directory(tmp_path):
    run = subprocess.run([sys.executable, "-m", "meshcomm.diagnose", str(tmp_path / "none")],
                         env=tool_env(), capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "cannot read" in run.stdout and "Traceback" not in run.stderr
    assert diagnose.main([str(tmp_path)]) == 2
    assert diagnose.main([]) == 2


def test_diagnose_shows_point_to_point_waits_and_each_group(tmp_path):
    world = {"id": 0, "name": "world", "rank": 0, "world_ranks": [0, 1, 2]}
    recv = {"id": 9, "group_id": 0, "group": "world", "kind": "p2p", "seq": 3, "op": "recv",
            "dtype": "float32", "count": 1024, "bytes": 4096, "peer": 1, "algorithm": None,
            "transport": "tcp", "state": "started", "enqueued_at": 988.0, "started_at": 988.0,
            "finished_at": None}
    for rank in range(3):
        groups = [dict(world, rank=rank)]
        records = [op(0)]
        if rank < 2:
            groups.append({"id": 1, "name": "pair", "rank": rank, "world_ranks": [0, 1]})
            records += [dict(op(s), group_id=1, group="pair") for s in range(5)]
            if rank == 0:
                records += [dict(op(5, state="started", started=995.0), group_id=1, group="pair"),
                            recv]
        write_dump(tmp_path, rank, 3, records, groups=groups)
    text = diagnosis(tmp_path)
    assert text.index("group world (3 ranks)") < text.index("group pair (2 ranks)")
    assert "rank 0 waits in recv #3 (from rank 1, 4 KiB) since 12.0 s" in text
    assert ("rank 0 waits in all_reduce #5 (float32, 4 MiB) since 5.0 s; "
            "rank 1 last finished all_reduce #4 and never entered #5") in text


SLEEPER = worker(16, """\
meshcomm.all_reduce(x)
open(os.path.join(sys.argv[1], f"ready_{meshcomm.get_rank()}"), "w").close()
if meshcomm.get_rank() == 1:
    time.sleep(120)  # busy elsewhere: alive, so it answers SIGUSR1
meshcomm.all_reduce(x)
""", imports="import os, sys, time\n")


def test_meshrun_diagnoses_when_stopped_by_sigterm(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SLEEPER)
    dumps = tmp_path / "dumps"
    proc = subprocess.Popen([sys.executable, str(MESHRUN), "--nproc-per-node", "3",
                             "--grace-seconds", "1", str(script), str(tmp_path)],
                            env=tool_env(MESHCOMM_DUMP_DIR=str(dumps)), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"ready_{r}").exists() for r in range(3)):
            assert time.monotonic() < deadline and proc.poll() is None, "the job did not start"
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert "got SIGTERM; stopping the workers" in err
    summary = err[err.index("diagnosis of the workers' flight recorders"):]
    assert "3 of 3 ranks left a dump" in summary
    assert ("ranks 0,2 wait in all_reduce #1 (float32, 64 B) since" in summary
            and "rank 1 last finished all_reduce #0 and never entered #1" in summary), summary

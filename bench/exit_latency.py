#!/usr/bin/python3
"""How long a rank that calls sys.exit takes to be gone, and whether its
peers learn that it left.

Each run starts a job of --ranks processes on this machine (rank 0 hosts
the store, as without a launcher). After init and one all_reduce, rank
--exiting-rank notes the time and calls sys.exit(7) (or, with --how return,
returns from main); the run measures from that moment until the process
has exited (a pidfd becomes readable), then reaps it and checks its exit
code. The other ranks run one more all_reduce and report the error they
get, which must say that the rank left the job.

    PYTHONPATH=build/python /usr/bin/python3 bench/exit_latency.py [--runs 20] [--ranks 3] [--load] [--meshrun]

With --meshrun the job runs under meshrun (--on-worker-failure continue) and
the exit counts as seen when meshrun reports it.

--load keeps both cores busy with two bounded busy loops for the whole
measurement (started and ended here, by pid). Every wait is bounded: a run
that does not finish within --run-timeout seconds is killed and reported.
"""

import argparse
import json
import os
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

EXIT_CODE = 7


def worker(out_dir, exiting_rank, how):
    import numpy as np

    import meshcomm

    meshcomm.init_process_group()
    rank = meshcomm.get_rank()
    meshcomm.all_reduce(np.ones(8))
    meshcomm.barrier()
    if rank == exiting_rank:
        path = os.path.join(out_dir, "exit_at")
        with open(path + ".tmp", "w") as f:
            f.write(str(time.monotonic_ns()))
        os.replace(path + ".tmp", path)
        if how == "exit":
            sys.exit(EXIT_CODE)
        return 0
    # Leave the departing rank time to go before this rank needs it.
    end = time.monotonic() + 10.0
    while not os.path.exists(os.path.join(out_dir, "gone")) and time.monotonic() < end:
        time.sleep(0.005)
    start = time.monotonic()
    try:
        meshcomm.all_reduce(np.ones(8))
        result = {"error": None}
    except meshcomm.DistError as e:
        result = {"error": type(e).__name__, "message": str(e).splitlines()[0],
                  "took_s": time.monotonic() - start}
    with open(os.path.join(out_dir, f"peer{rank}.json"), "w") as f:
        json.dump(result, f)
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def busy_loops(seconds):
    code = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 2)]


def one_run(args):
    """Returns (latency in ms or None, exit code, peer results, note)."""
    with tempfile.TemporaryDirectory(prefix="meshcomm-exit-") as out_dir:
        if args.meshrun:
            return _run_under_meshrun(args, out_dir)
        port = free_port()
        procs = []
        for rank in range(args.ranks):
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                       RANK=str(rank), WORLD_SIZE=str(args.ranks),
                       MESHCOMM_DUMP_DIR=os.path.join(out_dir, "dumps"))
            procs.append(subprocess.Popen(
                [sys.executable, __file__, "--worker", out_dir, str(args.exiting_rank),
                 args.how], env=env, stdin=subprocess.DEVNULL))
        leaver = procs[args.exiting_rank]
        deadline = time.monotonic() + args.run_timeout
        latency = code = None
        note = ""
        try:
            fd = os.pidfd_open(leaver.pid)
            try:
                ready, _, _ = select.select([fd], [], [], args.run_timeout)
                gone_at = time.monotonic_ns()
            finally:
                os.close(fd)
            if ready:
                code = leaver.wait(timeout=5)
                open(os.path.join(out_dir, "gone"), "w").close()
                latency = _since_exit_call(out_dir, gone_at)
            else:
                note = "the exiting rank was still running at the run's deadline"
            for p in procs:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            note = note or "a peer was still running at the run's deadline"
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(timeout=5)
        return latency, code, _peers(args, out_dir), note


def _since_exit_call(out_dir, gone_at):
    try:
        with open(os.path.join(out_dir, "exit_at")) as f:
            return (gone_at - int(f.read())) / 1e6
    except OSError:
        return None


def _peers(args, out_dir):
    peers = {}
    for rank in range(args.ranks):
        try:
            with open(os.path.join(out_dir, f"peer{rank}.json")) as f:
                peers[rank] = json.load(f)
        except OSError:
            pass
    return peers


def _run_under_meshrun(args, out_dir):
    """The job under meshrun (--on-worker-failure continue): the exit counts
    as seen when meshrun reports it, which is when meshrun has noticed it."""
    meshrun = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "tools", "meshrun")
    env = dict(os.environ, MESHCOMM_DUMP_DIR=os.path.join(out_dir, "dumps"))
    proc = subprocess.Popen(
        [sys.executable, meshrun, "--nproc-per-node", str(args.ranks),
         "--on-worker-failure", "continue", "--timeout", str(args.run_timeout),
         __file__, "--worker", out_dir, str(args.exiting_rank), args.how],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    latency = code = None
    note = ""
    wanted = f"rank {args.exiting_rank} exited with code "
    try:
        os.set_blocking(proc.stderr.fileno(), False)
        deadline = time.monotonic() + args.run_timeout
        pending = b""
        while code is None and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], deadline - time.monotonic())
            if not ready:
                break
            data = proc.stderr.read() or b""
            seen_at = time.monotonic_ns()
            if not data:
                break
            pending += data
            for line in pending.decode(errors="replace").splitlines():
                if wanted in line:
                    code = int(line.split(wanted)[1].split()[0].rstrip(";"))
                    latency = _since_exit_call(out_dir, seen_at)
        if code is None and args.how == "return":
            code = 0  # meshrun reports failures only; a clean exit is silent
            note = "(a clean exit is not reported by meshrun; not timed)"
        open(os.path.join(out_dir, "gone"), "w").close()
        proc.wait(timeout=args.run_timeout)
    except subprocess.TimeoutExpired:
        note = "meshrun was still running at the run's deadline"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        proc.stderr.close()
    return latency, code, _peers(args, out_dir), note


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--exiting-rank", type=int, default=1)
    parser.add_argument("--how", choices=("exit", "return"), default="exit")
    parser.add_argument("--load", action="store_true")
    parser.add_argument("--meshrun", action="store_true",
                        help="launch with meshrun and time until meshrun reports the exit")
    parser.add_argument("--run-timeout", type=float, default=60.0)
    parser.add_argument("--worker", nargs=3, metavar=("OUT", "EXITING", "HOW"))
    args = parser.parse_args()
    if args.worker:
        out_dir, exiting, how = args.worker
        sys.exit(worker(out_dir, int(exiting), how))
    if not 0 < args.exiting_rank < args.ranks:
        parser.error("--exiting-rank must be a rank other than 0 (rank 0 hosts the store)")
    load = busy_loops(args.runs * (args.run_timeout + 5)) if args.load else []
    latencies, problems = [], []
    try:
        for i in range(args.runs):
            latency, code, peers, note = one_run(args)
            expected = EXIT_CODE if args.how == "exit" else 0
            told = all(p.get("error") == "DistPeerLostError" and "left" in p.get("message", "")
                       for r, p in peers.items())
            if (note and not note.startswith("(")) or code != expected or len(peers) != args.ranks - 1 or not told:
                problems.append(f"run {i}: exit code {code}, peers {peers} {note}")
            if latency is not None:
                latencies.append(latency)
    finally:
        for p in load:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=5)
    latencies.sort()
    if latencies:
        q = statistics.quantiles(latencies, n=10) if len(latencies) > 1 else latencies * 9
        print(f"{'loaded' if args.load else 'idle'}, {args.ranks} ranks, {args.how}"
              f"{' under meshrun' if args.meshrun else ''}: "
              f"{len(latencies)} runs, ms from the call to the exit: min {latencies[0]:.1f}, "
              f"median {statistics.median(latencies):.1f}, p90 {q[8]:.1f}, "
              f"max {latencies[-1]:.1f}")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

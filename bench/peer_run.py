"""One run of one library on one cell of bench/percell.py: bench/peers/run_peer.sh
in a session of its own, bounded, and its exit status and CSV read into the
fields of a Run.
"""

import csv
import datetime
import os
import signal
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_PEER = os.path.join(HERE, "peers", "run_peer.sh")
# run_peer.sh ends the benchmark after PEER_TIMEOUT (SIGKILL 10 s later);
# should it not, the run is stopped from here GRACE_S after that: SIGTERM,
# then SIGKILL STOP_WAIT_S later.
GRACE_S = 30
STOP_WAIT_S = 15


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def last_line(text):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1][:200] if lines else ""


def stop_run(p):
    """Ends a run: SIGTERM to its process group first, which the launchers
    pass on to ranks they put in process groups of their own, then SIGKILL
    to whatever of the group is left. Returns its stdout and stderr."""
    for signum, wait_s in ((signal.SIGTERM, STOP_WAIT_S), (signal.SIGKILL, None)):
        try:
            os.killpg(p.pid, signum)
        except ProcessLookupError:
            break
        try:
            return p.communicate(timeout=wait_s)
        except subprocess.TimeoutExpired:
            pass
    return p.communicate()


def run_peer(lib, cell, timeout_s, extra):
    """One run of bench/peers/run_peer.sh; the fields of its Run."""
    transport, op, n, size = cell
    cmd = ["bash", RUN_PEER, lib, transport, op, str(n), str(size), str(size), "2", *extra]
    done = {"timestamp": utc_now(), "load1": round(os.getloadavg()[0], 2)}
    # A session of its own: the run's process group can then be signalled
    # as a whole, should run_peer.sh's own timeout not end it or should this
    # script be stopped.
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env=dict(os.environ, PEER_TIMEOUT=str(timeout_s)))
    try:
        out, err = p.communicate(timeout=timeout_s + GRACE_S)
        code = p.returncode
    except subprocess.TimeoutExpired:
        out, err = stop_run(p)
        code = 124
    except BaseException:
        stop_run(p)
        raise
    note = last_line(err)
    if code in (2, 4):
        return done | {"exit": code, "outcome": "skip", "note": note}
    if code != 0 and code != 1:
        return done | {"exit": code, "outcome": "fail",
                       "note": "timed out" if code == 124 else note}
    # The CSV from its header on: a launcher's note may come before it.
    lines = out.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("op,nranks,bytes,")), None)
    if header is None:
        return done | {"exit": code, "outcome": "fail", "note": note or "no CSV on stdout"}
    rows = list(csv.DictReader(lines[header:]))
    if not rows:
        # The benchmark skipped the size (fewer than one element per rank).
        return done | {"exit": code, "outcome": "fail" if code else "skip",
                       "note": note or "no row"}
    r = rows[0]
    try:
        res = {"bytes": int(r["bytes"]), "time_us": float(r["time_us"]),
               "busbw_gbps": float(r["busbw_gbps"]), "check": r["check"]}
    except (TypeError, ValueError):
        return done | {"exit": code, "outcome": "fail", "note": f"unreadable row: {r}"}
    if res["time_us"] <= 0:
        return done | res | {"exit": code, "outcome": "fail", "note": "time 0"}
    if code == 1 or res["check"] == "fail":
        return done | res | {"exit": code, "outcome": "fail", "note": note or "check failed"}
    if res["bytes"] == 0:
        # meshcomm-bench prints sizes below one element per rank as 0 bytes.
        return done | res | {"exit": 0, "outcome": "skip", "note": "fewer than one element per rank"}
    return done | res | {"exit": 0, "outcome": "ok"}

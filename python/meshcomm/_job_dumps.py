"""meshrun's side of the flight recorder: where the workers' dumps go, asking
the live workers for one (SIGUSR1) when the job fails or is stopped, and the
diagnosis printed after the workers' output (meshcomm.diagnose).

Standard library only, like the rest of meshrun.
"""

import os
import re
import signal
import time

from . import diagnose

# How long the live workers get to write their dumps after SIGUSR1. A dump
# takes milliseconds; the margin is for a loaded machine.
_DUMP_WAIT_S = 3.0
_POLL_S = 0.05
_DUMP_FILE = re.compile(r"^rank_\d+\.jsonl$")


def directory(log_dir, job_id):
    """Where the workers write their dumps: MESHCOMM_DUMP_DIR when set, else
    meshrun's --log-dir, else a directory of this job's under /tmp."""
    explicit = os.environ.get("MESHCOMM_DUMP_DIR")
    if explicit:
        return explicit
    if log_dir is not None:
        return log_dir
    return os.path.join("/tmp", f"meshcomm-dumps-{job_id[:12]}")


def _path(dump_dir, rank):
    return os.path.join(dump_dir, f"rank_{rank}.jsonl")


def clear(dump_dir, ranks):
    """Removes the dumps of these ranks left by an earlier attempt, so the
    diagnosis never mixes attempts."""
    for rank in ranks:
        try:
            os.unlink(_path(dump_dir, rank))
        except OSError:
            pass


def _state(pid):
    """The process state letter from /proc (R, S, T, Z...), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rfind(b")") + 2:].split()[0].decode()
    except (OSError, IndexError):
        return None


def _catches_sigusr1(pid):
    """Whether the process has a SIGUSR1 handler (meshcomm installs one while
    a process group exists). Without one the signal would end it."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signal.SIGUSR1 - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def request(workers, dump_dir):
    """Sends SIGUSR1 to every worker (rank, pid) still running that handles
    it and waits, bounded, for their dumps. Returns notes on the workers that
    wrote none."""
    asked = time.time()
    pending = {}
    notes = []
    for rank, pid in workers:
        state = _state(pid)
        if state in (None, "Z", "X"):
            continue
        if not _catches_sigusr1(pid):
            if state in ("T", "t"):
                notes.append(f"rank {rank} (pid {pid}) is stopped (SIGSTOP, or a debugger)")
            else:
                notes.append(f"rank {rank} (pid {pid}) has no SIGUSR1 handler, so no flight "
                             "recorder to write (no process group, or "
                             "MESHCOMM_FLIGHT_RECORDER=0)")
            continue
        try:
            os.kill(pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            continue
        pending[rank] = pid
    deadline = time.monotonic() + _DUMP_WAIT_S
    while pending and time.monotonic() < deadline:
        for rank in list(pending):
            try:
                fresh = os.stat(_path(dump_dir, rank)).st_mtime >= asked - 0.01
            except OSError:
                fresh = False
            state = _state(pending[rank])
            if state in ("T", "t") and not fresh:
                notes.append(f"rank {rank} (pid {pending[rank]}) is stopped (SIGSTOP, or a "
                             "debugger) and could not write a dump")
            if fresh or state in (None, "Z", "X", "T", "t"):
                del pending[rank]
        if pending:
            time.sleep(_POLL_S)
    for rank, pid in sorted(pending.items()):
        notes.append(f"rank {rank} (pid {pid}) wrote no dump within {_DUMP_WAIT_S:g} s of "
                     "SIGUSR1")
    return notes


def summary(dump_dir, notes, other_nodes):
    """The diagnosis as meshrun prints it: one paragraph, or None when no
    worker left a dump."""
    try:
        names = [n for n in os.listdir(dump_dir) if _DUMP_FILE.match(n)]
    except OSError:
        names = []
    if not names:
        return None
    result = diagnose.diagnose(dump_dir)
    lines = [f"diagnosis of the workers' flight recorders (meshcomm-diagnose {dump_dir}):"]
    lines += ["    " + line for line in result.lines]
    lines += ["    " + note for note in notes]
    if other_nodes:
        lines.append("    (the ranks of other nodes write their dumps on their own node; "
                     "copy them here for a diagnosis of the whole job)")
    return lines

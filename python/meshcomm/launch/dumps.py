"""meshrun's side of the flight recorder: where the workers' dumps go, the
job's dump folder and its end, asking the live workers for one (SIGUSR1)
when the job fails or is stopped, and the diagnosis printed after the
workers' output (meshcomm.diagnose).

The rule for how long dump folders stay is in src/runtime/dump_folders.h
and docs/errors.md ("How long dumps are kept"): meshcomm marks the folders
it makes under MESHCOMM_DUMP_ROOT (default /tmp) with a marker file, and
only ever removes a marked folder of this user holding nothing but its own
files, that no live process on this host has written a dump to, and whose
marker nobody holds a shared flock on (a worker writing a dump, or meshrun
while its job runs): removal takes that lock exclusively without waiting.
The workers prune old folders when they write a dump; meshrun makes its
job's folder before the workers start, holds it while they run, and removes
it when every worker exited 0, which only meshrun knows.

Standard library and meshcomm.diagnose only.
"""

import fcntl
import os
import re
import signal
import time

from meshcomm import diagnose

# How long the live workers get to write their dumps after SIGUSR1. A dump
# takes milliseconds; the margin is for a loaded machine.
_DUMP_WAIT_S = 3.0
_POLL_S = 0.05
_DUMP_FILE = re.compile(r"^rank_\d+\.jsonl$")
# What runtime/dump_folders.h calls a folder of meshcomm's, its marker, and
# the files meshcomm writes in one.
_MARKER = ".meshcomm-dump-folder"
_MARKER_START = b'{"format":"meshcomm-dump-folder"'
_OWN_FILE = re.compile(r"^(?:(?:rank|pid)_\d+\.jsonl|\.meshcomm-dump-folder)(?:\.tmp\d+)?$")


def root():
    """Where the default dump folders go: MESHCOMM_DUMP_ROOT, else /tmp."""
    return os.environ.get("MESHCOMM_DUMP_ROOT") or "/tmp"


def is_default(log_dir):
    """Whether the workers' dumps go to a folder meshcomm chooses (and so
    manages): neither MESHCOMM_DUMP_DIR nor --log-dir names one."""
    return not os.environ.get("MESHCOMM_DUMP_DIR") and log_dir is None


def directory(log_dir, job_id):
    """Where the workers write their dumps: MESHCOMM_DUMP_DIR when set, else
    meshrun's --log-dir, else a folder of this job's under root()."""
    explicit = os.environ.get("MESHCOMM_DUMP_DIR")
    if explicit:
        return explicit
    if log_dir is not None:
        return log_dir
    return os.path.join(root(), f"meshcomm-dumps-{job_id[:12]}")


class JobFolder:
    """The job's default dump folder: made and marked before the workers
    start, and held (a shared flock on the marker) until finish(), so no
    worker of another job prunes it while this one runs.

    Raises OSError when the folder cannot be made, or what is at its path is
    not a folder of this user's (then the job's folder is not managed)."""

    def __init__(self, path):
        self.path = path
        self._fd = None
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        st = os.lstat(path)
        if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != os.geteuid():
            raise OSError(f"{path} is not a folder of this user's")
        self._add_marker()
        fd = os.open(os.path.join(path, _MARKER), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            # Without waiting: a fresh folder of a new job id is nobody's.
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            if os.pread(fd, len(_MARKER_START), 0) != _MARKER_START:
                raise OSError(f"{path} holds a marker that is not meshcomm's")
        except OSError:
            os.close(fd)
            raise
        self._fd = fd

    def _add_marker(self):
        """Written whole under a temporary name and linked into place, as
        runtime/dump_folders.cc does, so nobody reads half a marker."""
        marker = os.path.join(self.path, _MARKER)
        if os.path.lexists(marker):
            return
        temp = f"{marker}.tmp{os.getpid()}"
        with open(temp, "w") as f:
            f.write(_MARKER_START.decode() + f',"version":1,"created_by":"meshrun",'
                    f'"pid":{os.getpid()},"created_at":{int(time.time())}}}\n')
        try:
            os.link(temp, marker)
        except FileExistsError:
            pass
        finally:
            os.unlink(temp)

    def dumps(self):
        """The dump files in the folder now."""
        try:
            return sorted(n for n in os.listdir(self.path) if _DUMP_FILE.match(n))
        except OSError:
            return []

    def remove(self):
        """Removes the folder, unless a process still holds it (a worker's
        child that outlived it) or it holds a file that is not meshcomm's
        (both are left as they are). Then lets go of it. Returns whether it
        is gone."""
        if self._fd is None:
            return False
        try:
            # From shared to exclusive, without waiting: fails while any
            # other process holds the marker.
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            names = os.listdir(self.path)
            if any(not _OWN_FILE.match(n) for n in names):
                return False
            for name in names:
                if name != _MARKER:
                    os.unlink(os.path.join(self.path, name))
            os.unlink(os.path.join(self.path, _MARKER))
            os.rmdir(self.path)
            return True
        except OSError:
            return False
        finally:
            self.release()

    def release(self):
        """Lets go of the folder, which stays, subject to the workers'
        pruning (MESHCOMM_DUMP_RETAIN_JOBS, MESHCOMM_DUMP_RETAIN_MB)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


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

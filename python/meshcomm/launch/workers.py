"""The workers of one node as meshrun sees them: their processes and
process groups, how they ended, and their output forwarded line by line."""

import collections
import os
import select
import selectors
import signal
import sys
import threading
import time


# Lines of the failed worker's output repeated in the failure report.
_TAIL_LINES = 20
# Longest line forwarded in one piece, and the size of one read.
_MAX_LINE = 64 * 1024


class _Console:
    """One of meshrun's own output streams, shared by the reader threads.

    Each line goes out in one write(2) under a lock, so lines of different
    workers never mix. If the stream is closed (meshrun's output piped into
    `head`), output is dropped but the workers' pipes keep being drained, so
    no worker blocks on a full pipe.
    """

    def __init__(self, fd):
        self._fd = fd
        self._lock = threading.Lock()
        self._broken = False

    def write(self, data):
        with self._lock:
            if self._broken:
                return
            view = memoryview(data)
            try:
                while view:
                    n = os.write(self._fd, view)
                    view = view[n:]
            except OSError:
                self._broken = True


_stdout = _Console(1)
_stderr = _Console(2)


def _say(message):
    """A message from meshrun itself, on stderr."""
    _stderr.write(f"meshrun: {message}\n".encode("utf-8", "replace"))


class _Worker:
    """One local worker: its process, how it ended, and the end of its output."""

    def __init__(self, local_rank, rank):
        self.local_rank = local_rank
        self.rank = rank
        self.proc = None
        self.status = None  # (how, number): ("exit", code) or ("signal", signum)
        self.tail = collections.deque(maxlen=_TAIL_LINES)
        self.readers = []
        self.logs = []
        self.pidfd = None  # readable once the worker has exited (Linux 5.3+)

    @property
    def pid(self):
        return self.proc.pid

    def failed(self):
        return self.status is not None and self.status != ("exit", 0)

    def exit_code(self):
        how, number = self.status
        return number if how == "exit" else 128 + number

    def describe_status(self):
        how, number = self.status
        if how == "exit":
            return f"exited with code {number}"
        return f"was killed by signal {_signal_name(number)} ({number})"


def _signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _peek_exit(worker):
    """How the worker ended, or None while it runs. Does not reap it (WNOWAIT):
    the zombie keeps its pid and process group id reserved until stop_all
    has finished with the group."""
    try:
        info = os.waitid(os.P_PID, worker.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        # Already reaped (only stop_all reaps, after which nobody asks).
        code = worker.proc.returncode
        if code is None:
            return None
        return ("signal", -code) if code < 0 else ("exit", code)
    if info is None or info.si_pid == 0:
        return None
    if info.si_code == os.CLD_EXITED:
        return ("exit", info.si_status)
    return ("signal", info.si_status)


def _open_pidfd(pid):
    """A pidfd of the worker, or None where the kernel or Python has none
    (then the supervisor finds exits on its next tick)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _wait_for_an_exit(workers, timeout):
    """Sleeps up to timeout, returning early when one of the workers (all
    still running as far as the caller knows) exits. Without this the
    supervisor would see an exit only on its next tick, up to _POLL_S after
    it, and that delay is most of the time between a worker's sys.exit and
    meshrun reporting it, and stopping or telling the others."""
    fds = [w.pidfd for w in workers if w.pidfd is not None]
    if not fds or len(fds) < len(workers):
        time.sleep(timeout)
        return
    try:
        select.select(fds, [], [], timeout)
    except (OSError, ValueError):
        time.sleep(timeout)


def _live_groups(pgids):
    """The subset of pgids that still hold a process that is not a zombie."""
    pgids = set(pgids)
    live = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return pgids  # no /proc: assume the worst, the caller bounds its wait
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # exited while we looked
        # The command name in parentheses may contain anything; the fields
        # after its closing parenthesis are: state ppid pgrp ...
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) < 3 or fields[0] in (b"Z", b"X"):
            continue
        pgrp = int(fields[2])
        if pgrp in pgids:
            live.add(pgrp)
    return live


def _signal_groups(pgids, signum):
    for pgid in pgids:
        try:
            os.killpg(pgid, signum)
        except (ProcessLookupError, PermissionError):
            pass


class _Stream:
    """One output stream of a worker: where its lines go, and the bytes of a
    line not yet complete."""

    def __init__(self, pipe, console, log, prefix):
        self.pipe = pipe
        self.console = console  # None: not echoed
        self.log = log  # None: no log file
        self.prefix = prefix
        self.pending = b""

    def emit(self, line, tail, complete=True):
        """complete=False: a piece without its newline (the end of the
        output, or a piece of an overlong line); the log file gets it as is."""
        tail.append(line.decode("utf-8", "replace").rstrip("\r"))
        if self.log is not None:
            try:
                self.log.write(line + b"\n" if complete else line)
                self.log.flush()
            except OSError:
                pass  # a full disk must not stop the draining
        if self.console is not None:
            # A partial last line still ends with a newline on the console,
            # so the next rank's line starts on a line of its own.
            self.console.write(self.prefix + line + b"\n")


def _forward(streams, tail):
    """Reader thread of one worker: copies its stdout and stderr, line by
    line, to the console (with the rank prefix) and/or log files, and keeps
    the last lines of both in tail.

    One thread reads both pipes so that the tail keeps the order in which
    the worker wrote: when both pipes have data, stdout is read first. A
    worker that prints progress and then a traceback and exits leaves both
    pipes full at once, and everything in its stdout pipe was written before
    the traceback.
    """
    sel = selectors.DefaultSelector()
    for index, stream in enumerate(streams):
        os.set_blocking(stream.pipe.fileno(), False)
        sel.register(stream.pipe.fileno(), selectors.EVENT_READ, index)
    try:
        while sel.get_map():
            for key, _ in sorted(sel.select(), key=lambda event: event[0].data):
                stream = streams[key.data]
                try:
                    data = os.read(key.fd, _MAX_LINE)
                except BlockingIOError:
                    continue
                if not data:  # end of file: flush a partial last line
                    if stream.pending:
                        stream.emit(stream.pending, tail, complete=False)
                        stream.pending = b""
                    sel.unregister(key.fd)
                    continue
                lines = (stream.pending + data).split(b"\n")
                stream.pending = lines.pop()
                for line in lines:
                    stream.emit(line, tail)
                if len(stream.pending) >= _MAX_LINE:
                    # A very long line (or binary output) goes in pieces, so
                    # memory stays bounded.
                    stream.emit(stream.pending, tail, complete=False)
                    stream.pending = b""
    finally:
        sel.close()
        for stream in streams:
            stream.pipe.close()

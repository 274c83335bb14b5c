"""meshrun: start the local workers of a meshcomm job and look after them.

Usage (``python3 -m meshcomm.run`` or the ``meshrun`` script)::

    meshrun --nproc-per-node 4 train.py --lr 0.1
    meshrun --nproc-per-node 4 -m mypkg.train --lr 0.1
    meshrun --nproc-per-node 4 --no-python build/bin/average_demo
    meshrun --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port 29500 train.py

One meshrun runs on each node and starts ``--nproc-per-node`` workers there.
Each worker gets the variables that ``env://`` rendezvous reads (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT, plus LOCAL_RANK and friends, as
torchrun sets them). Worker output is forwarded line by line with a
``[rank R] `` prefix, or written to per-rank files with ``--log-dir``.

On node 0, meshrun itself hosts the job's store (the rendezvous that
``env://`` reaches at MASTER_ADDR:MASTER_PORT), so it outlives every worker:
rank 0's death leaves rendezvous up for the survivors, and restarted workers
(``--max-restarts``) rejoin the same store.

When one worker fails, meshrun says at once which rank failed and how. By
default (``--on-worker-failure stop``) the others on this node are then
stopped (SIGTERM to each worker's process group, SIGKILL after
``--grace-seconds``), and meshrun exits with the failed worker's status.
With ``--on-worker-failure continue`` the survivors run on (a job that
shrinks its groups, docs/fault-tolerance.md); meshrun exits once every
worker has ended, with the first failure's status, naming every rank that
failed.
SIGINT and SIGTERM sent to meshrun stop the workers the same way, and so
does ``--timeout``.

Before it stops the workers, meshrun sends SIGUSR1 to those still running,
which makes each write its flight recorder (``rank_R.jsonl`` in
MESHCOMM_DUMP_DIR: ``--log-dir``, or a directory of the job's under /tmp),
reads them before it stops the workers, and after their output it prints
what ``meshcomm-diagnose`` finds there: which rank is stuck, in which
operation, since when. That default folder
(not one the user names) is removed when every worker exits 0, unless
``--keep-dumps`` (docs/errors.md, "How long dumps are kept").

Every worker is started in a session of its own, so the process group with
the worker's pid holds the worker and whatever it starts; meshrun signals only
those groups. A worker that has exited is not reaped until its group has been
dealt with: while the zombie holds the pid, no unrelated process can be given
that pid or process group id, so the signals cannot reach a stranger.

Linux only (process groups, ``waitid`` and ``/proc``, ``/dev/shm``).
"""

import argparse
import collections
import errno
import os
import secrets
import select
import selectors
import shutil
import signal
import site
import socket
import subprocess
import sys
import threading
import time

from . import _job_dumps

__all__ = ["main", "build_parser"]

# How often the supervisor looks at its workers when nothing wakes it. A
# worker's exit wakes it at once (it waits on the workers' pidfds), so this
# bounds only how late a Ctrl-C or --timeout is acted on; a few syscalls per
# worker per tick is negligible.
_POLL_S = 0.05
# Lines of the failed worker's output repeated in the failure report.
_TAIL_LINES = 20
# Longest line forwarded in one piece, and the size of one read.
_MAX_LINE = 64 * 1024
# After SIGKILL, how long to wait for the kernel to finish the processes off.
_KILL_WAIT_S = 5.0
# After the workers are gone, how long to wait for their output to drain. Only
# a process that left the worker's process group (setsid) can keep a pipe open
# past its worker; meshrun does not wait for it forever.
_DRAIN_WAIT_S = 2.0
_SHM_DIR = "/dev/shm"

# meshrun's options: (names, argparse keyword arguments). The table is used
# both to build the parser and to find where meshrun's options end and the
# target's arguments begin (see _split_argv), so the two cannot disagree.
_OPTIONS = [
    (("--nproc-per-node", "--nproc_per_node"),
     dict(dest="nproc_per_node", default="1", metavar="N",
          help="workers to start on this node; 'auto' or 'cpu' means one per "
               "usable CPU (default 1)")),
    (("--nnodes",),
     dict(type=int, default=1, metavar="M", help="number of nodes (default 1)")),
    (("--node-rank", "--node_rank"),
     dict(dest="node_rank", type=int, default=0, metavar="K",
          help="this node's index, 0 .. nnodes-1 (default 0)")),
    (("--master-addr", "--master_addr"),
     dict(dest="master_addr", default="127.0.0.1", metavar="ADDR",
          help="address of node 0, where meshrun hosts the store (default 127.0.0.1)")),
    (("--master-port", "--master_port"),
     dict(dest="master_port", type=int, default=None, metavar="PORT",
          help="port of the store on node 0; required with --nnodes > 1, a free "
               "port by default on one node")),
    (("--standalone",),
     dict(action="store_true",
          help="one node with a free port (as torchrun's --standalone)")),
    (("--log-dir", "--log_dir"),
     dict(dest="log_dir", default=None, metavar="DIR",
          help="write each worker's output to DIR/rank_R.stdout and "
               "DIR/rank_R.stderr instead of the console")),
    (("--tee",),
     dict(action="store_true",
          help="with --log-dir, also forward the output to the console")),
    (("--max-restarts", "--max_restarts"),
     dict(dest="max_restarts", type=int, default=0, metavar="N",
          help="restart all workers up to N times after a failure (one node "
               "only; default 0)")),
    (("--on-worker-failure", "--on_worker_failure"),
     dict(dest="on_worker_failure", choices=("stop", "continue"), default="stop",
          help="when a worker fails: 'stop' the others (default), or let them "
               "'continue' (for jobs that survive a lost rank)")),
    (("--timeout",),
     dict(type=float, default=None, metavar="S",
          help="stop the job after S seconds, as if it got SIGTERM (workers "
               "first write their flight recorders); exit status 124")),
    (("--grace-seconds", "--grace_seconds"),
     dict(dest="grace_seconds", type=float, default=5.0, metavar="S",
          help="between SIGTERM and SIGKILL when stopping workers (default 5)")),
    (("--keep-dumps", "--keep_dumps"),
     dict(dest="keep_dumps", action="store_true",
          help="keep the job's flight recorder dumps in their default folder even "
               "when every worker exits 0 (as MESHCOMM_KEEP_DUMPS=1); by default "
               "that folder is removed then")),
    (("-m", "--module"),
     dict(action="store_true",
          help="the target is a Python module, run as 'python -m'")),
    (("--no-python", "--no_python"),
     dict(dest="no_python", action="store_true",
          help="the target is a program to execute directly, not a Python script")),
]

_USAGE = ("meshrun [options] [--] (script.py | -m module | --no-python program) "
          "[args ...]")


def build_parser():
    """The parser of meshrun's own options (not the target or its arguments)."""
    parser = argparse.ArgumentParser(
        prog="meshrun", usage=_USAGE, allow_abbrev=False,
        description="Start the workers of a meshcomm job on this node.",
        epilog="Everything from the target on is passed to it unchanged; '--' "
               "ends meshrun's options explicitly.")
    for names, kwargs in _OPTIONS:
        parser.add_argument(*names, **kwargs)
    return parser


def _split_argv(argv):
    """Splits argv into (meshrun's options, [target, args...]).

    meshrun's options end at '--' or at the first word that is neither an
    option nor an option's value. argparse cannot be left to do this: it
    drops a '--' that belongs to the target's arguments.
    """
    takes_value = set()
    for names, kwargs in _OPTIONS:
        if kwargs.get("action") not in ("store_true", "store_false"):
            takes_value.update(names)
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return argv[:i], argv[i + 1:]
        if word.startswith("-") and word != "-":
            i += 2 if (word in takes_value) else 1
            continue
        return argv[:i], argv[i:]
    return argv, []


class _Options:
    """The validated command line."""

    def __init__(self, ns, target, target_args):
        self.__dict__.update(vars(ns))
        self.target = target
        self.target_args = target_args


def _parse(argv):
    parser = build_parser()
    own, rest = _split_argv(argv)
    ns = parser.parse_args(own)
    if not rest:
        parser.error("no script to run: give a script, '-m module', or "
                     "'--no-python program'")
    if ns.module and ns.no_python:
        parser.error("-m and --no-python exclude each other")
    value = str(ns.nproc_per_node).strip().lower()
    if value in ("auto", "cpu"):
        ns.nproc_per_node = len(os.sched_getaffinity(0))
    else:
        try:
            ns.nproc_per_node = int(value)
        except ValueError:
            parser.error(f"--nproc-per-node must be a positive integer, 'auto' or "
                         f"'cpu', got {ns.nproc_per_node!r}")
    if ns.nproc_per_node < 1:
        parser.error(f"--nproc-per-node must be at least 1, got {ns.nproc_per_node}")
    if ns.standalone:
        if ns.nnodes != 1:
            parser.error("--standalone runs one node; drop --nnodes or --standalone")
    if ns.nnodes < 1:
        parser.error(f"--nnodes must be at least 1, got {ns.nnodes}")
    if not 0 <= ns.node_rank < ns.nnodes:
        parser.error(f"--node-rank must be in 0..{ns.nnodes - 1} for --nnodes "
                     f"{ns.nnodes}, got {ns.node_rank}")
    if not ns.master_addr:
        parser.error("--master-addr must not be empty")
    if ns.master_port is None and ns.nnodes > 1:
        parser.error("--master-port is required with --nnodes > 1: every node's "
                     "meshrun must be given the same port, where rank 0 on node 0 "
                     "hosts the store")
    if ns.master_port is not None and not 1 <= ns.master_port <= 65535:
        parser.error(f"--master-port must be in 1..65535, got {ns.master_port}")
    if ns.timeout is not None and not ns.timeout > 0:
        parser.error(f"--timeout must be a positive number of seconds, got {ns.timeout}")
    if ns.grace_seconds < 0:
        parser.error(f"--grace-seconds must not be negative, got {ns.grace_seconds}")
    keep = os.environ.get("MESHCOMM_KEEP_DUMPS", "").strip().lower()
    if keep in ("1", "true", "yes", "on"):
        ns.keep_dumps = True
    elif keep not in ("", "0", "false", "no", "off"):
        parser.error(f"MESHCOMM_KEEP_DUMPS={keep!r}: give 1 to keep the job's dumps, 0 "
                     "(the default) to remove them when every worker exits 0")
    if ns.max_restarts < 0:
        parser.error(f"--max-restarts must not be negative, got {ns.max_restarts}")
    if ns.max_restarts > 0 and ns.nnodes > 1:
        # Each node's meshrun would restart on its own, with nothing to make
        # the nodes agree on when the new attempt starts.
        parser.error("--max-restarts > 0 needs --nnodes 1: meshrun has no way to "
                     "restart several nodes together")
    opts = _Options(ns, rest[0], rest[1:])
    _check_target(parser, opts)
    return opts


def _check_target(parser, opts):
    """Fails early, once, for a target that cannot start, rather than with one
    identical error per worker."""
    if opts.module:
        return
    if not opts.no_python and not opts.target.endswith(".py") \
            and os.path.isfile(opts.target) and os.access(opts.target, os.X_OK):
        # An executable that is not a .py file (a compiled program, or a
        # script with its own #! line) runs as it is, as with --no-python.
        opts.no_python = True
    if opts.no_python:
        if shutil.which(opts.target) is None:
            parser.error(f"cannot run {opts.target!r}: not found, or not executable")
    elif not os.path.exists(opts.target):
        parser.error(f"no such script: {opts.target!r}")


def _free_port(addr):
    """A port that was free on addr a moment ago (the kernel's choice)."""
    infos = socket.getaddrinfo(addr, 0, type=socket.SOCK_STREAM)
    last = None
    for family, socktype, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, socktype, proto) as s:
                s.bind(sockaddr)
                return s.getsockname()[1]
        except OSError as e:
            last = e
    raise OSError(f"cannot bind a port on {addr}: {last}")


def _port_with_free_next(tries=50):
    """A kernel-chosen port P whose neighbour P + 1 is free too, or 0 (let
    the store choose). Under meshrun, torch's env:// rendezvous takes
    MASTER_PORT + 1 (meshcomm/torch/launch_env.py), so the job needs both."""
    for _ in range(tries):
        port = _free_port("0.0.0.0")
        if port < 65535 and not _port_in_use(port) and not _port_in_use(port + 1):
            return port
    return 0


def _port_in_use(port):
    """Whether the store of rank 0 would fail to bind port. It listens on
    0.0.0.0 with SO_REUSEADDR, so this asks the same question the same way."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False


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


_PACKAGE_HOME = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _package_off_the_default_path():
    """Whether this meshcomm package lives outside the interpreter's own
    site-packages (a source tree's build/python, found by tools/meshrun,
    is on no one's path by default)."""
    default = site.getsitepackages() + [site.getusersitepackages()]
    return _PACKAGE_HOME not in map(os.path.abspath, default)


def _python_path_with_this_package(python_path):
    """PYTHONPATH with the folder holding this meshcomm package first, so
    the workers import the meshcomm that meshrun runs from."""
    home = _PACKAGE_HOME
    rest = [p for p in python_path.split(os.pathsep) if p and os.path.abspath(p) != home]
    return os.pathsep.join([home] + rest)


class _Job:
    """One attempt: the workers of this node, from start to cleanup."""

    def __init__(self, opts, port, job_id, restart_count, signals, hosted_store=False):
        self.opts = opts
        self.port = port
        self.hosted_store = hosted_store
        self.job_id = job_id
        self.restart_count = restart_count
        self.signals = signals  # appended to by the signal handler
        self.world_size = opts.nnodes * opts.nproc_per_node
        self.workers = [_Worker(lr, opts.node_rank * opts.nproc_per_node + lr)
                        for lr in range(opts.nproc_per_node)]
        self.dump_dir = _job_dumps.directory(opts.log_dir, job_id)
        self.timed_out = False

    def command(self):
        opts = self.opts
        if opts.no_python:
            return [opts.target] + opts.target_args
        if opts.module:
            return [sys.executable, "-u", "-m", opts.target] + opts.target_args
        return [sys.executable, "-u", opts.target] + opts.target_args

    def environment(self, worker):
        opts = self.opts
        env = dict(os.environ)
        env.update({
            "MASTER_ADDR": opts.master_addr,
            "MASTER_PORT": str(self.port),
            # meshcomm's store, whatever becomes of MASTER_PORT: the torch
            # backend moves torch's rendezvous to MASTER_PORT + 1.
            "MESHCOMM_STORE_PORT": str(self.port),
            "RANK": str(worker.rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_RANK": str(worker.local_rank),
            "LOCAL_WORLD_SIZE": str(opts.nproc_per_node),
            "GROUP_RANK": str(opts.node_rank),
            "NODE_RANK": str(opts.node_rank),
            "MESHCOMM_LAUNCHER": "meshrun",
            "MESHCOMM_JOB_ID": self.job_id,
            "MESHCOMM_RESTART_COUNT": str(self.restart_count),
            "MESHCOMM_DUMP_DIR": self.dump_dir,
            "PYTHONUNBUFFERED": "1",
        })
        if self.hosted_store:
            env["MESHCOMM_STORE_HOSTED"] = "launcher"
        else:
            env.pop("MESHCOMM_STORE_HOSTED", None)
        # The torch backend moves torch's rendezvous off MASTER_PORT once per
        # job (meshcomm/torch/launch_env.py); a mark inherited from an outer
        # job must not stop it.
        env.pop("MESHCOMM_TORCH_MASTER_PORT", None)
        if _package_off_the_default_path():
            env["PYTHONPATH"] = _python_path_with_this_package(env.get("PYTHONPATH", ""))
        return env

    def _open_logs(self, worker):
        mode = "wb" if self.restart_count == 0 else "ab"
        paths = [os.path.join(self.opts.log_dir, f"rank_{worker.rank}.{s}")
                 for s in ("stdout", "stderr")]
        worker.logs = [open(p, mode) for p in paths]
        return worker.logs

    def start(self):
        """Starts every worker. Returns None, or the exit code for a worker
        that could not be started (the caller stops the ones that were)."""
        cmd = self.command()
        _job_dumps.clear(self.dump_dir, [w.rank for w in self.workers])
        for worker in self.workers:
            if self.signals:
                return None  # the supervisor loop handles it
            logs = [None, None]
            if self.opts.log_dir is not None:
                logs = self._open_logs(worker)
            try:
                worker.proc = subprocess.Popen(
                    cmd, env=self.environment(worker), stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    start_new_session=True)
            except OSError as e:
                _say(f"cannot start rank {worker.rank} ({cmd[0]}): {e.strerror or e}")
                return 127 if isinstance(e, FileNotFoundError) else 126
            worker.pidfd = _open_pidfd(worker.pid)
            echo = self.opts.log_dir is None or self.opts.tee
            prefix = f"[rank {worker.rank}] ".encode()
            streams = [_Stream(worker.proc.stdout, _stdout if echo else None, logs[0], prefix),
                       _Stream(worker.proc.stderr, _stderr if echo else None, logs[1], prefix)]
            t = threading.Thread(target=_forward, args=(streams, worker.tail),
                                 name=f"meshrun-rank{worker.rank}-output", daemon=True)
            t.start()
            worker.readers.append(t)
        return None

    def supervise(self):
        """Waits until every worker has exited, one has failed (unless the
        others are to continue), or meshrun got a signal. Returns the first
        failed worker or None."""
        started = [w for w in self.workers if w.proc is not None]
        keep_going = self.opts.on_worker_failure == "continue"
        first = None
        deadline = None if self.opts.timeout is None else time.monotonic() + self.opts.timeout
        while not self.signals:
            if deadline is not None and time.monotonic() >= deadline:
                self.timed_out = True
                return first
            failed = []
            for worker in started:
                if worker.status is None:
                    worker.status = _peek_exit(worker)
                    if worker.failed():
                        failed.append(worker)
            if failed and not keep_going:
                return failed[0]  # lowest rank among those seen in one tick
            for worker in failed:
                left = sum(1 for w in started if w.status is None)
                _say(f"rank {worker.rank} {worker.describe_status()}; the other {left} "
                     "worker(s) continue (--on-worker-failure continue)")
                first = first or worker
            if all(w.status is not None for w in started):
                return first
            _wait_for_an_exit([w for w in started if w.status is None], _POLL_S)
        return first

    def stop_all(self):
        """Stops whatever is left of every worker's process group, then reaps
        the workers. Safe to call when everything has already exited."""
        started = [w for w in self.workers if w.proc is not None]
        pgids = {w.pid for w in started}
        live = _live_groups(pgids)
        if live:
            seen = len(self.signals)
            _signal_groups(live, signal.SIGTERM)
            deadline = time.monotonic() + self.opts.grace_seconds
            while live and time.monotonic() < deadline:
                if len(self.signals) > seen:
                    break  # a second Ctrl-C: no more grace
                time.sleep(_POLL_S)
                live = _live_groups(live)
            if live:
                _signal_groups(live, signal.SIGKILL)
                deadline = time.monotonic() + _KILL_WAIT_S
                while live and time.monotonic() < deadline:
                    time.sleep(_POLL_S)
                    live = _live_groups(live)
        for worker in started:
            if worker.status is None:
                worker.status = _peek_exit(worker)
            try:
                worker.proc.wait(timeout=_KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                pass  # stuck in the kernel; nothing more meshrun can do
            if worker.pidfd is not None:
                os.close(worker.pidfd)
                worker.pidfd = None
        if live:
            _say("processes of process group(s) "
                 f"{', '.join(str(p) for p in sorted(live))} survived SIGKILL")

    def drain(self):
        """Waits (bounded) for the output threads, then closes the log files."""
        deadline = time.monotonic() + _DRAIN_WAIT_S
        for worker in self.workers:
            for t in worker.readers:
                t.join(max(0.0, deadline - time.monotonic()))
            if any(t.is_alive() for t in worker.readers):
                _say(f"output of rank {worker.rank} is still held open by a process "
                     "that left its process group; not waiting for it")
            else:
                for log in worker.logs:
                    log.close()

    def remove_shm(self):
        """Removes this job's shared-memory segments: /dev/shm entries whose
        names start with "meshcomm" and contain this job's id. A worker
        killed mid-job cannot unlink its own; nothing else is touched."""
        try:
            names = os.listdir(_SHM_DIR)
        except OSError:
            return
        for name in names:
            if not (name.startswith("meshcomm") and self.job_id in name):
                continue
            path = os.path.join(_SHM_DIR, name)
            try:
                if not os.path.isdir(path) or os.path.islink(path):
                    os.unlink(path)
            except OSError:
                pass

    def request_dumps(self):
        """Asks the workers still running for their flight recorders (before
        they are stopped); returns notes on those that wrote none."""
        return _job_dumps.request(
            [(w.rank, w.pid) for w in self.workers if w.proc is not None and w.status is None],
            self.dump_dir)

    def diagnose(self, notes):
        """The diagnosis of the dumps just written, as lines to report. Read
        before the workers are stopped: a worker that sees a peer stop first
        fails and dumps again, and the diagnosis must show where the job
        stood when it was asked, not what stopping it did."""
        return _job_dumps.summary(self.dump_dir, notes, self.opts.nnodes > 1)

    def report(self, worker):
        how = worker.describe_status()
        _say(f"rank {worker.rank} (node {self.opts.node_rank}, local rank "
             f"{worker.local_rank}) failed first: it {how}")
        lines = list(worker.tail)
        if lines:
            what = "line" if len(lines) == 1 else f"{len(lines)} lines"
            _say(f"last {what} of rank {worker.rank}'s output:")
            _stderr.write("".join(f"    {line}\n" for line in lines)
                          .encode("utf-8", "replace"))
        else:
            _say(f"rank {worker.rank} printed nothing")
        if self.opts.log_dir is not None:
            base = os.path.join(self.opts.log_dir, f"rank_{worker.rank}")
            _say(f"its full output: {base}.stdout, {base}.stderr")


def _run_attempt(opts, port, job_id, restart_count, signals, hosted_store=False):
    """Runs one attempt. Returns (exit code, whether a worker failed)."""
    job = _Job(opts, port, job_id, restart_count, signals, hosted_store)
    diagnosis = None  # set once the workers were asked for their flight recorders
    try:
        code = job.start()
        failed = None
        if code is None:
            failed = job.supervise()
            if failed is not None and not signals:
                others = sum(1 for w in job.workers
                             if w.proc is not None and w.status is None)
                if others:
                    _say(f"rank {failed.rank} {failed.describe_status()}; stopping "
                         f"the other {others} worker(s)")
        if signals:
            _say(f"got {_signal_name(signals[0])}; stopping the workers")
        elif job.timed_out:
            _say(f"--timeout of {opts.timeout:g} s reached; stopping the workers")
        if failed is not None or signals or job.timed_out:
            diagnosis = job.diagnose(job.request_dumps())
    finally:
        # Whatever happened above (even an exception in meshrun itself), the
        # workers do not outlive meshrun.
        job.stop_all()
        job.drain()
        job.remove_shm()
    if failed is not None and not signals:
        job.report(failed)
    if diagnosis:
        _say("\n".join(diagnosis))
    if signals:
        return 128 + signals[0], False
    if code is not None:
        return code, False  # a start failure would only repeat on a restart
    if job.timed_out:
        return 124, False
    if failed is not None:
        dead = [w for w in job.workers if w.failed()]
        if len(dead) > 1:
            _say("ranks that failed: " + "; ".join(
                f"rank {w.rank} {w.describe_status()}" for w in dead))
        return failed.exit_code(), True
    return 0, False


def main(argv=None):
    """meshrun's entry point. Returns the exit code (the caller exits with it)."""
    opts = _parse(sys.argv[1:] if argv is None else list(argv))
    if opts.log_dir is not None:
        os.makedirs(opts.log_dir, exist_ok=True)

    signals = []

    def on_signal(signum, _frame):
        signals.append(signum)

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, on_signal) for s in handled}
    store = None
    folder = None
    code = None
    try:
        job_id = secrets.token_hex(16)
        restart = 0
        if opts.node_rank == 0:
            store, port_or_code = _host_store(opts)
            if store is None and port_or_code is not None:
                return port_or_code
        if _job_dumps.is_default(opts.log_dir):
            try:
                folder = _job_dumps.JobFolder(_job_dumps.directory(None, job_id))
            except OSError:
                pass  # not managed: a worker that dumps makes the folder itself
        while True:
            port = opts.master_port
            if store is not None:
                port = store.port
            elif port is None:
                try:
                    port = _free_port(opts.master_addr)
                except OSError as e:
                    _say(f"{e}; pass --master-port, or a local --master-addr")
                    return 1
            elif opts.node_rank == 0 and _port_in_use(port):
                _say(f"port {port} is in use on this host; rank 0 could not host "
                     "the store there. Choose another --master-port")
                return 1
            code, failed = _run_attempt(opts, port, job_id, restart, signals,
                                        hosted_store=store is not None)
            if not failed or signals or restart >= opts.max_restarts:
                return code
            restart += 1
            _say(f"restarting the workers (restart {restart} of {opts.max_restarts})")
    finally:
        if folder is not None:
            _end_dump_folder(opts, folder, code)
        for s, handler in previous.items():
            signal.signal(s, handler)
        del store


def _end_dump_folder(opts, folder, code):
    """The job's default dump folder at the job's end. Removed when every
    worker exited 0 (the job ended cleanly, and its dumps, if any, were
    asked for or were of errors it got over), unless --keep-dumps or
    MESHCOMM_KEEP_DUMPS=1; removed too when it holds no dump, since there is
    nothing in it to diagnose. Otherwise kept for meshcomm-diagnose, subject
    to the workers' pruning of old folders (MESHCOMM_DUMP_RETAIN_JOBS, _MB)."""
    dumps = folder.dumps()
    clean = code == 0
    if (clean and not opts.keep_dumps) or not dumps:
        if folder.remove() and dumps:
            _say(f"removed the {len(dumps)} flight recorder dump(s) in {folder.path}: every "
                 "worker exited 0 (--keep-dumps or MESHCOMM_KEEP_DUMPS=1 keeps them)")
    else:
        folder.release()


def _host_store(opts):
    """The job's store, served from this process (node 0), so that it
    outlives every worker. Returns (store, None); (None, exit code) when the
    port is taken; (None, None) when the native extension is unavailable
    (then rank 0 hosts it, as without meshrun)."""
    try:
        from ._meshcomm import TCPStore
    except ImportError:
        return None, None
    port = _port_with_free_next() if opts.master_port is None else opts.master_port
    if port and _port_in_use(port):
        _say(f"port {port} is in use on this host; meshrun could not host the store "
             "there. Choose another --master-port")
        return None, 1
    try:
        # No deadline of its own matters here: the store only serves.
        return TCPStore("0.0.0.0", port, is_master=True, wait_for_workers=False,
                        timeout_ms=300000), None
    except Exception as e:  # the port is in use, or cannot be bound
        _say(f"cannot host the job's store on port {port}: {e}. Choose another "
             "--master-port")
        return None, 1


if __name__ == "__main__":
    sys.exit(main())

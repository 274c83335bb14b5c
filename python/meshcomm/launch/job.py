"""One attempt of a job on this node: start the workers, supervise them,
stop them, report the failure and the flight recorders' diagnosis."""

import os
import signal
import site
import subprocess
import sys
import threading
import time

from . import dumps as job_dumps
from .workers import (_Stream, _Worker, _forward, _live_groups, _open_pidfd, _peek_exit, _say,
                      _signal_groups, _signal_name, _stderr, _stdout, _wait_for_an_exit)


# How often the supervisor looks at its workers when nothing wakes it. A
# worker's exit wakes it at once (it waits on the workers' pidfds), so this
# bounds only how late a Ctrl-C or --timeout is acted on; a few syscalls per
# worker per tick is negligible.
_POLL_S = 0.05
# After SIGKILL, how long to wait for the kernel to finish the processes off.
_KILL_WAIT_S = 5.0
# After the workers are gone, how long to wait for their output to drain. Only
# a process that left the worker's process group (setsid) can keep a pipe open
# past its worker; meshrun does not wait for it forever.
_DRAIN_WAIT_S = 2.0
_SHM_DIR = "/dev/shm"


_PACKAGE_HOME = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
        self.dump_dir = job_dumps.directory(opts.log_dir, job_id)
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
        job_dumps.clear(self.dump_dir, [w.rank for w in self.workers])
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
        return job_dumps.request(
            [(w.rank, w.pid) for w in self.workers if w.proc is not None and w.status is None],
            self.dump_dir)

    def diagnose(self, notes):
        """The diagnosis of the dumps just written, as lines to report. Read
        before the workers are stopped: a worker that sees a peer stop first
        fails and dumps again, and the diagnosis must show where the job
        stood when it was asked, not what stopping it did."""
        return job_dumps.summary(self.dump_dir, notes, self.opts.nnodes > 1)

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

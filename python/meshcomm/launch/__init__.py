"""meshrun: start the local workers of a meshcomm job and look after them.

Usage (``python3 -m meshcomm.launch`` or the ``meshrun`` script)::

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

Linux only (process groups, ``waitid`` and ``/proc``, ``/dev/shm``)."""

import os
import secrets
import signal
import sys
from datetime import timedelta

from . import dumps as job_dumps
from .job import _run_attempt
from .options import _parse, build_parser
from .ports import _free_port, _port_in_use, _port_with_free_next
from .workers import _say

__all__ = ["main", "build_parser"]


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
        if job_dumps.is_default(opts.log_dir):
            try:
                folder = job_dumps.JobFolder(job_dumps.directory(None, job_id))
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
        from meshcomm import TCPStore
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
                        timeout=timedelta(minutes=5)), None
    except Exception as e:  # the port is in use, or cannot be bound
        _say(f"cannot host the job's store on port {port}: {e}. Choose another "
             "--master-port")
        return None, 1

"""meshrun's command line: its options, and where they end and the
target's arguments begin."""

import argparse
import os
import shutil


def _option(*names, **kwargs):
    """One of meshrun's options as _OPTIONS lists it: (names, argparse
    keyword arguments), each --dashed-name followed by torchrun's
    --underscored_name spelling of it (argparse stores the value under the
    first long name, underscored)."""
    spelled = []
    for name in names:
        spelled.append(name)
        if name.startswith("--") and "-" in name[2:]:
            spelled.append("--" + name[2:].replace("-", "_"))
    return tuple(spelled), kwargs


# meshrun's options: (names, argparse keyword arguments). The table is used
# both to build the parser and to find where meshrun's options end and the
# target's arguments begin (see _split_argv), so the two cannot disagree.
_OPTIONS = [
    _option("--nproc-per-node", default="1", metavar="N",
            help="workers to start on this node; 'auto' or 'cpu' means one per "
                 "usable CPU (default 1)"),
    _option("--nnodes", type=int, default=1, metavar="M", help="number of nodes (default 1)"),
    _option("--node-rank", type=int, default=0, metavar="K",
            help="this node's index, 0 .. nnodes-1 (default 0)"),
    _option("--master-addr", default="127.0.0.1", metavar="ADDR",
            help="address of node 0, where meshrun hosts the store (default 127.0.0.1)"),
    _option("--master-port", type=int, default=None, metavar="PORT",
            help="port of the store on node 0; required with --nnodes > 1, a free "
                 "port by default on one node"),
    _option("--standalone", action="store_true",
            help="one node with a free port (as torchrun's --standalone)"),
    _option("--log-dir", default=None, metavar="DIR",
            help="write each worker's output to DIR/rank_R.stdout and "
                 "DIR/rank_R.stderr instead of the console"),
    _option("--tee", action="store_true",
            help="with --log-dir, also forward the output to the console"),
    _option("--max-restarts", type=int, default=0, metavar="N",
            help="restart all workers up to N times after a failure (one node "
                 "only; default 0)"),
    _option("--on-worker-failure", choices=("stop", "continue"), default="stop",
            help="when a worker fails: 'stop' the others (default), or let them "
                 "'continue' (for jobs that survive a lost rank)"),
    _option("--timeout", type=float, default=None, metavar="S",
            help="stop the job after S seconds, as if it got SIGTERM (workers "
                 "first write their flight recorders); exit status 124"),
    _option("--grace-seconds", type=float, default=5.0, metavar="S",
            help="between SIGTERM and SIGKILL when stopping workers (default 5)"),
    _option("--keep-dumps", action="store_true",
            help="keep the job's flight recorder dumps in their default folder even "
                 "when every worker exits 0 (as MESHCOMM_KEEP_DUMPS=1); by default "
                 "that folder is removed then"),
    _option("-m", "--module", action="store_true",
            help="the target is a Python module, run as 'python -m'"),
    _option("--no-python", action="store_true",
            help="the target is a program to execute directly, not a Python script"),
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

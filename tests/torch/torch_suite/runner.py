"""torch's own distributed test suite, run on the meshcomm backend.

torch ships its distributed tests in the wheel as
torch/testing/_internal/distributed/distributed_test.py: the mixin
DistributedTest._DistTestBase (the tests) and TestDistBackend (a
MultiProcessTestCase: every test starts WORLD_SIZE rank processes, each of
which makes the default process group, runs the test method and exits).
torch's test/distributed/test_distributed_spawn.py combines the two into
TestDistBackendWithSpawn<BACKEND> and runs it with BACKEND, WORLD_SIZE and
TEMP_DIR in the environment. This module does the same, with two changes.

How gloo's selection is kept while meshcomm makes the group
-----------------------------------------------------------
torch decides which tests a backend runs while the module is imported:
`BACKEND = os.environ["BACKEND"]` is read once, and decorators such as
`skip_but_pass_in_sandcastle_if(BACKEND != "gloo", ...)`,
`require_backend_is_available(...)` and the
`DistTestCases.skip_collective[...]` checks are evaluated as the class body
runs. Test bodies also branch on BACKEND ("gloo" takes the CPU paths).
So the runner always imports the module with BACKEND=gloo: every test, skip
and in-body branch is exactly gloo's. The backend is swapped at the one point
the group is made: in each rank process, `torch.distributed.init_process_group`
is wrapped so that a request for "gloo" makes a "meshcomm" group instead
(torch's test code calls it with backend=BACKEND in TestDistBackend._run and
in the few tests that re-create the default group). Sub-groups made with
`new_group()` inherit the default group's backend, so they are meshcomm too;
a test that asks new_group for gloo by name still gets gloo, as it would in
a meshcomm user's program. Patching the module's BACKEND instead (the other way
round) would flip the in-body branches away from gloo's CPU paths, so the
tests would no longer be the ones gloo runs.

The only visible difference this leaves is `dist.get_backend()`, which says
"meshcomm" where torch's test_get_backend expects BACKEND ("gloo"); suite.txt
records that test with its reason.

INIT_METHOD is left unset, as torch's test/run_test.py leaves it: the module
reads "env://" at import, so test_barrier_timeout_global (which needs
file://) is skipped as in torch's own runs. Export INIT_METHOD=file://...
to run it too.

How ranks start
---------------
torch's spawn script starts each rank with multiprocessing's "spawn", which
re-imports torch and the test module in every rank of every test (seconds
each, on two shared cores). The runner forks instead by default (--start
fork): this process imports everything once and never makes a process group
or runs a parallel torch operation itself, so the forked ranks inherit no
threads. --start spawn runs them exactly as torch's script does (both give
the same results here; spawn takes about ten times as long). With --backend
meshcomm each rank imports meshcomm.torch (registering the backend) before
the group is made.

Bounds
------
Every test is bounded by torch's own join timeout (MultiProcessTestCase
terminates the ranks it started when it runs out); the runner lowers it to
--test-timeout seconds, and after each test kills, by pid, any rank of that
test still alive. The whole run is bounded by --deadline: tests not started
by then are reported "not-run". Nothing else is started or killed.

Usage (Debian's Python in build/venv, the package on PYTHONPATH):
  PYTHONPATH=build/python build/venv/bin/python tests/torch/torch_suite/runner.py \
      --backend meshcomm --select core --json /tmp/meshcomm.json
  --backend gloo|meshcomm   which backend the default group uses
  --select all|TAG|NAME[,NAME...]  a tag of suite.txt (full, core, quick,
                            ...), torch test names, or all: every test of
                            torch's class
Writes a JSON report (per test: status pass/fail/skip/not-run, seconds,
error tail) and prints a summary.
"""

import argparse
import json
import os
import platform
import signal
import sys
import time
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE_FILE = os.path.join(HERE, "suite.txt")
WORLD_SIZE = 2
BACKEND_ENV = "MESHCOMM_TORCH_SUITE_BACKEND"  # read by every rank process
START_ENV = "MESHCOMM_TORCH_SUITE_START"


def read_suite(path=SUITE_FILE):
    """suite.txt: one torch test a line, `name  tag[,tag]  [# note]` (its
    header says what the tags mean). Returns {name: (tags, note)}."""
    tests = {}
    with open(path) as f:
        for line in f:
            body, _, note = line.partition("#")
            fields = body.split()
            if not fields:
                continue
            tags = set(fields[1].split(",")) if len(fields) > 1 else set()
            tests[fields[0]] = (tags, note.strip())
    return tests


def _prepare_environment(args):
    # Read by torch's test module at import time (see the docstring).
    os.environ["BACKEND"] = "gloo"
    os.environ["WORLD_SIZE"] = str(WORLD_SIZE)
    os.environ[BACKEND_ENV] = args.backend
    os.environ[START_ENV] = args.start
    # TestDistBackend.setUp makes a fresh TEMP_DIR for each test; the module
    # only needs one to exist at import.
    os.environ["TEMP_DIR"] = args.workdir
    # torch's MultiProcessTestCase leaves a FileStore file per test in the
    # temporary directory: put every temporary file of the run in its own
    # directory, and meshcomm's flight-recorder dumps beside them.
    os.environ["TMPDIR"] = args.workdir
    import tempfile
    tempfile.tempdir = args.workdir
    os.environ.setdefault("MESHCOMM_DUMP_DIR", os.path.join(args.workdir, "dumps"))
    # torch's per-test join timeout (MultiProcessTestCase._join_processes).
    os.environ["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(args.test_timeout)
    # Two ranks share the machine's cores with each other (and with
    # whatever else runs there): one intra-op thread each.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # A failure's text ends with its error, not with a repro hint.
    os.environ["PYTORCH_PRINT_REPRO_ON_FAILURE"] = "0"


def _install_backend_swap():
    """In a rank process: make init_process_group(backend="gloo") build a
    meshcomm group. Called before the rank makes its group."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    import meshcomm.torch  # noqa: F401 - registers the backend "meshcomm"

    original = c10d.init_process_group
    if getattr(original, "_meshcomm_swap", False):
        return  # forked from a process that already swapped

    def init_process_group(*args, **kwargs):
        if args:  # backend is the first positional parameter
            kwargs["backend"], args = args[0], args[1:]
        if str(kwargs.get("backend") or "").lower() == "gloo":
            kwargs["backend"] = "meshcomm"
        return original(*args, **kwargs)

    init_process_group._meshcomm_swap = True
    init_process_group.__wrapped__ = original
    dist.init_process_group = init_process_group
    c10d.init_process_group = init_process_group


def make_case_class(start):
    """TestDistBackendWithSpawnGLOO as torch's spawn script builds it, with
    the rank start method chosen and the backend swap in each rank."""
    import torch
    import torch.multiprocessing
    from torch.testing._internal.distributed.distributed_test import (
        DistributedTest, TestDistBackend)

    class TorchSuiteCase(TestDistBackend, DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            if start == "spawn":
                self._spawn_processes()
            else:
                self._start_processes(torch.multiprocessing.get_context("fork").Process)
            torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()

        def tearDown(self):
            # torch's tearDown sends SIGTERM to the ranks and forgets them;
            # a rank that ignores it would outlive the test. Only this
            # test's own rank processes are touched, by pid.
            procs = list(self.processes)
            super().tearDown()
            for p in procs:
                p.join(5)
                if p.is_alive():
                    os.kill(p.pid, signal.SIGKILL)
                    p.join(5)
            # The test's FileStore file, which torch leaves behind.
            if os.path.exists(self.file_name):
                os.unlink(self.file_name)

        @classmethod
        def _run(cls, rank, test_name, file_name, pipe, **kwargs):
            # The rank process: faulthandler on SIGUSR2 to ask a hung rank
            # for its stacks; the backend swap before TestDistBackend._run
            # makes the group.
            import faulthandler
            faulthandler.register(signal.SIGUSR2, all_threads=True)
            if os.environ.get(BACKEND_ENV) == "meshcomm":
                _install_backend_swap()
            # A spawned rank re-imports torch's module and so reads the
            # INIT_METHOD that TestDistBackend.setUp has just set (a file://
            # in this test's TEMP_DIR); a forked rank has the value read at
            # import: give it the spawned rank's.
            from torch.testing._internal.distributed import distributed_test
            distributed_test.INIT_METHOD = os.environ.get("INIT_METHOD", "env://")
            super()._run(rank, test_name, file_name, pipe, **kwargs)

    TorchSuiteCase.__name__ = TorchSuiteCase.__qualname__ = "TestDistBackendWithSpawnGLOO"
    # Pickled by reference when ranks are spawned: make it findable there.
    TorchSuiteCase.__module__ = __name__
    globals()["TestDistBackendWithSpawnGLOO"] = TorchSuiteCase
    return TorchSuiteCase


def _tail(text, lines=25):
    return "\n".join(text.rstrip().splitlines()[-lines:])


def essential(error):
    """The line that says what went wrong: the last `SomethingError: ...`
    (or Exception) line of the text, else its last line."""
    import re
    lines = [ln.strip() for ln in error.strip().splitlines() if ln.strip()]
    pattern = re.compile(r"^[\w.]*(Error|Exception|Timeout|Interrupt)\b.*")
    hits = [ln for ln in lines if pattern.match(ln)
            and not ln.startswith("RuntimeError: Process ")]
    return hits[-1] if hits else (lines[-1] if lines else "")


class _Result(unittest.TestResult):
    def __init__(self, log):
        super().__init__()
        self.outcomes = {}
        self._log = log
        self._t0 = 0.0

    def startTest(self, test):
        super().startTest(test)
        self._t0 = time.monotonic()
        self._log(f"  {test._testMethodName} ...")

    def _record(self, test, status, error=""):
        name = test._testMethodName
        seconds = round(time.monotonic() - self._t0, 2)
        self.outcomes[name] = {"status": status, "seconds": seconds,
                               "error": _tail(error, 60), "summary": essential(error)}
        self._log(f"  {name}: {status} ({seconds} s)")
        if error and status == "fail":
            self._log(f"    {essential(error)}")

    def addSuccess(self, test):
        self._record(test, "pass")

    def addFailure(self, test, err):
        self._record(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        self._record(test, "fail", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        self._record(test, "skip", str(reason))

    def addExpectedFailure(self, test, err):
        self._record(test, "fail", self._exc_info_to_string(err, test))

    def addUnexpectedSuccess(self, test):
        self._record(test, "pass")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["gloo", "meshcomm"], required=True)
    ap.add_argument("--select", default="quick")
    ap.add_argument("--start", choices=["fork", "spawn"], default="fork")
    ap.add_argument("--json", help="write the report here")
    ap.add_argument("--test-timeout", type=int, default=120,
                    help="seconds one test's ranks may take (torch's join timeout)")
    ap.add_argument("--deadline", type=float, default=1800,
                    help="seconds for the whole run; later tests are not started")
    ap.add_argument("--workdir", help="temporary files and flight-recorder dumps go "
                    "here (kept); default: a new directory, removed at the end")
    args = ap.parse_args(argv)
    own_workdir = args.workdir is None
    if own_workdir:
        import tempfile
        args.workdir = tempfile.mkdtemp(prefix="meshcomm-torch-suite-")
    os.makedirs(args.workdir, exist_ok=True)
    try:
        return _run_selection(ap, args)
    finally:
        if own_workdir:
            import shutil
            shutil.rmtree(args.workdir, ignore_errors=True)


def _run_selection(ap, args):

    t_start = time.monotonic()
    _prepare_environment(args)

    def log(msg):
        print(msg, flush=True)

    import torch
    from torch.testing._internal import common_distributed, common_utils
    # What torch's run_tests() sets up before running (rng seed, executor
    # mode), without reading this script's arguments.
    saved_argv, sys.argv = sys.argv, [sys.argv[0]]
    try:
        common_utils.parse_cmd_line_args()
    finally:
        sys.argv = saved_argv
    # torch gives two slow tests a longer join timeout than the default;
    # keep them within this run's bound too.
    for name in list(common_distributed.TIMEOUT_OVERRIDE):
        common_distributed.TIMEOUT_OVERRIDE[name] = min(
            common_distributed.TIMEOUT_OVERRIDE[name], 2 * args.test_timeout)
    if args.start == "fork" and args.backend == "meshcomm":
        import meshcomm.torch  # noqa: F401 - imported once, before the forks

    case_cls = make_case_class(args.start)
    every = unittest.TestLoader().getTestCaseNames(case_cls)
    if args.select == "all":
        names = list(every)
    elif any(args.select in tags for tags, _ in read_suite().values()):
        names = [n for n, (tags, _) in read_suite().items() if args.select in tags]
    else:
        names = args.select.split(",")
    unknown = [n for n in names if n not in every]
    if unknown:
        ap.error(f"not tests of torch {torch.__version__}'s suite: {unknown}")

    log(f"torch {torch.__version__}: {len(names)} tests of {len(every)}, backend "
        f"{args.backend} (selection: gloo's), {WORLD_SIZE} ranks, start={args.start}")
    result = _Result(log)
    for name in names:
        if time.monotonic() - t_start > args.deadline:
            result.outcomes[name] = {"status": "not-run", "seconds": 0.0,
                                     "error": f"run deadline of {args.deadline} s reached"}
            continue
        try:
            case_cls(name).run(result)
        except Exception:  # noqa: BLE001 - a harness error is reported per test
            result.outcomes[name] = {"status": "fail", "seconds": 0.0,
                                     "error": "harness: " + traceback.format_exc()}
    elapsed = round(time.monotonic() - t_start, 1)

    counts = {}
    for o in result.outcomes.values():
        counts[o["status"]] = counts.get(o["status"], 0) + 1
    report = {
        "backend": args.backend, "selection": args.select, "start": args.start,
        "world_size": WORLD_SIZE, "torch": torch.__version__,
        "python": platform.python_version(), "elapsed_seconds": elapsed,
        "counts": counts, "tests": result.outcomes,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
    log(f"{args.backend}: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        + f" in {elapsed} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
elif os.environ.get(BACKEND_ENV) and "TestDistBackendWithSpawnGLOO" not in globals():
    # A rank started with --start spawn re-imports this file (as
    # __mp_main__) and unpickles the test class by name: build it here, from
    # the environment the runner set before starting the rank.
    make_case_class(os.environ.get(START_ENV, "spawn"))

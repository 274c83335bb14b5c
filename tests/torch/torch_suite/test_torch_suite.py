"""torch's own distributed tests on the meshcomm backend: every test that
torch's TestDistBackendWithSpawnGLOO passes on gloo at 2 ranks on CPU must
pass when the default group is a meshcomm group (runner.py says how).

Two runs of runner.py, each in a process of its own, once per session:
  gloo      torch's selection for gloo, on gloo: which tests gloo passes here
  meshcomm  the listed tests (suite.txt), with meshcomm making the group
then one pytest test per listed torch test, which fails with meshcomm's
error if gloo passes it and meshcomm does not. A listed test tagged
expect-fail is one that meshcomm cannot pass for a reason outside meshcomm
(suite.txt gives it): it is reported as xfail, and fails if it starts
passing, so the list stays true.

Environment:
  MESHCOMM_TORCH_SUITE=full (default) | core | quick | another tag of suite.txt
      full: the whole list, and (with fork) gloo runs torch's whole class
      so that a test gloo starts or stops passing (another torch) shows up
      as a mismatch with suite.txt. core: the collectives, point-to-point and
      DDP-on-CPU tests. quick: one or more tests per operation. Other than
      full, gloo runs the same tests as meshcomm.
  MESHCOMM_TORCH_SUITE_START=fork (default) | spawn
      spawn starts every rank as torch's own script does (several times
      slower). gloo then runs only the listed tests: the whole class is
      compared with suite.txt by the fork run, and under spawn it would
      take most of an hour.
Each run writes its log and JSON report under pytest's tmp_path; a failure
message names the log. Both runs happen once per session whatever -k keeps:
choose what runs with MESHCOMM_TORCH_SUITE.
"""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "runner.py")
_spec = importlib.util.spec_from_file_location("meshcomm_torch_suite_runner", RUNNER)
runner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(runner)

MODE = os.environ.get("MESHCOMM_TORCH_SUITE", "full")
START = os.environ.get("MESHCOMM_TORCH_SUITE_START", "fork")
SUITE = runner.read_suite()
SELECTED = [name for name, (tags, _) in SUITE.items() if MODE in tags]
if not SELECTED:
    raise ValueError(f"MESHCOMM_TORCH_SUITE={MODE!r}: no test of suite.txt has that tag")

TEST_TIMEOUT = 120  # seconds one torch test's ranks may take (runner --test-timeout)
# Seconds after which a run starts no further test: typical runs take
# about a minute with fork and ten with spawn (every rank imports torch
# afresh); this leaves room for a loaded machine and for a few tests that
# hang until their own timeout.
DEADLINE = (1500 if len(SELECTED) > 40 else 600) * (3 if START == "spawn" else 1)
WHOLE_CLASS = MODE == "full" and START == "fork"


def _end_session(pid, sig):
    """Signals what is left of the process group the runner was started in.
    The group was created for that one runner (start_new_session), so it
    holds only the runner and the rank processes it started; its id is the
    runner's pid, which stays reserved while any member is alive."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _run(backend, select, tmp_dir, config):
    os.makedirs(tmp_dir, exist_ok=True)
    json_path = os.path.join(tmp_dir, "report.json")
    log_path = os.path.join(tmp_dir, "runner.log")
    cmd = [sys.executable, RUNNER, "--backend", backend, "--select", select,
           "--start", START, "--json", json_path, "--workdir", os.path.join(tmp_dir, "work"),
           "--test-timeout", str(TEST_TIMEOUT), "--deadline", str(DEADLINE)]
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            # The runner stops starting tests at DEADLINE and each test ends
            # within its timeout (twice that for torch's two slow ones), so
            # this bound is reached only if the runner itself hangs.
            proc.wait(timeout=DEADLINE + 3 * TEST_TIMEOUT + 60)
        except subprocess.TimeoutExpired:
            _end_session(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _end_session(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
            pytest.fail(f"the {backend} run did not finish; log: {log_path}")
        finally:
            # A rank that outlived the runner would hold ports and memory.
            _end_session(proc.pid, signal.SIGKILL)
    if proc.returncode != 0 or not os.path.exists(json_path):
        with open(log_path) as f:
            tail = "".join(f.readlines()[-30:])
        pytest.fail(f"the {backend} run failed (exit {proc.returncode}); log: {log_path}\n{tail}")
    with open(json_path) as f:
        report = json.load(f)
    report["log"] = log_path
    counts = ", ".join(f"{v} {k}" for k, v in sorted(report["counts"].items()))
    label = select if len(select) < 40 else MODE
    line = (f"torch suite, {backend} ({label}, {START}): {counts} in "
            f"{report['elapsed_seconds']} s (whole run {time.monotonic() - t0:.1f} s); log {log_path}")
    if config is not None:
        # Shown even when output is captured: the run times are the point.
        capture = config.pluginmanager.get_plugin("capturemanager")
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)
    return report


@pytest.fixture(scope="session")
def gloo_report(tmp_path_factory, pytestconfig):
    select = "all" if WHOLE_CLASS else ",".join(SELECTED)
    return _run("gloo", select, str(tmp_path_factory.mktemp("torch_suite_gloo")),
                pytestconfig)


@pytest.fixture(scope="session")
def meshcomm_report(tmp_path_factory, pytestconfig):
    return _run("meshcomm", MODE, str(tmp_path_factory.mktemp("torch_suite_meshcomm")),
                pytestconfig)


def test_list_is_what_gloo_passes(gloo_report):
    """suite.txt holds exactly the tests gloo passes here (full, fork), or
    only tests gloo passes (any other selection)."""
    _require_complete(gloo_report)
    passing = {n for n, o in gloo_report["tests"].items() if o["status"] == "pass"}
    listed = set(SELECTED)
    missing = sorted(passing - listed) if WHOLE_CLASS else []
    not_passing = {n: gloo_report["tests"].get(n, {"status": "absent"})["status"]
                   for n in sorted(listed - passing)}
    assert not missing and not not_passing, (
        f"suite.txt no longer matches gloo on torch {gloo_report['torch']}: gloo passes "
        f"these unlisted tests: {missing}; gloo does not pass these listed ones: "
        f"{not_passing}; log: {gloo_report['log']}")


def _require_complete(report, name=None):
    """A test the run never started (its deadline came first) says nothing
    about the backend: it fails as such, not as the backend failing it."""
    outcomes = report["tests"]
    late = [name] if name is not None else sorted(n for n, o in outcomes.items()
                                                   if o["status"] == "not-run")
    late = [n for n in late if outcomes.get(n, {}).get("status") == "not-run"]
    if late:
        pytest.fail(f"the {report['backend']} run reached its {DEADLINE} s deadline before "
                    f"starting {len(late)} test(s) ({', '.join(late[:5])}"
                    f"{', ...' if len(late) > 5 else ''}): the machine was too slow for this "
                    f"bound; run again when it is quieter; log: {report['log']}", pytrace=False)


@pytest.mark.parametrize("name", SELECTED)
def test_torch_test(name, gloo_report, meshcomm_report):
    _require_complete(gloo_report, name)
    _require_complete(meshcomm_report, name)
    gloo = gloo_report["tests"].get(name, {"status": "absent"})
    if gloo["status"] != "pass":
        pytest.fail(f"gloo does not pass {name} here ({gloo['status']}): "
                    f"{gloo.get('summary', '')}; log: {gloo_report['log']}")
    tags, note = SUITE[name]
    mc = meshcomm_report["tests"].get(name, {"status": "absent", "error": "", "summary": ""})
    if "expect-fail" in tags:
        if mc["status"] == "pass":
            pytest.fail(f"{name} now passes on meshcomm: drop its expect-fail tag in suite.txt")
        pytest.xfail(f"{note} [meshcomm: {mc.get('summary', '')}]")
    if mc["status"] != "pass":
        pytest.fail(f"gloo passes {name}, meshcomm does not ({mc['status']}, "
                    f"{mc.get('seconds', 0)} s): {mc.get('summary', '')}\n"
                    f"--- tail ---\n{mc.get('error', '')[-4000:]}\n"
                    f"log: {meshcomm_report['log']}", pytrace=False)

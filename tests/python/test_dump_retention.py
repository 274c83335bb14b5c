"""How long flight-recorder dumps stay (docs/errors.md, "How long dumps are
kept"): meshrun removes its job's default dump folder when every worker
exits 0, unless asked to keep it; a failed job keeps it, and
meshcomm-diagnose reads it; a worker that writes a dump removes the oldest
of meshcomm's folders beyond MESHCOMM_DUMP_RETAIN_JOBS and leaves alone
every folder that is not meshcomm's, in use, or recent; a folder the user
names is never removed.

Every test points MESHCOMM_DUMP_ROOT at a folder of its own, so nothing
under /tmp is pruned by these tests. Every meshrun run has a --timeout and
a subprocess timeout.
"""

import fcntl
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import meshcomm
from meshcomm import diagnose

ROOT = Path(__file__).resolve().parents[2]
MESHRUN = ROOT / "tools" / "meshrun"
DIAGNOSE = ROOT / "tools" / "meshcomm-diagnose"
PACKAGE_DIR = Path(meshcomm.__file__).resolve().parents[1]
RUN_TIMEOUT = 90.0
MARKER = ".meshcomm-dump-folder"
MARKER_TEXT = '{"format":"meshcomm-dump-folder","version":1,"created_by":"test"}\n'


def env_for(root, **extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PACKAGE_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    for name in ("MESHCOMM_DUMP_DIR", "MESHCOMM_KEEP_DUMPS", "MESHCOMM_DUMP_RETAIN_JOBS",
                 "MESHCOMM_DUMP_RETAIN_MB"):
        env.pop(name, None)
    env["MESHCOMM_DUMP_ROOT"] = str(root)
    env.update(extra)
    return env


def run_meshrun(tmp_path, body, *args, env):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, str(MESHRUN), "--timeout", "60", *map(str, args),
                           str(script)],
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)


def folders(root):
    return sorted(p.name for p in Path(root).iterdir())


def old_folder(root, name, age_s, marker=MARKER_TEXT, files=("rank_0.jsonl", "rank_1.jsonl")):
    """A folder as meshcomm leaves one, last written age_s ago."""
    path = Path(root) / name
    path.mkdir()
    paths = []
    if marker is not None:
        (path / MARKER).write_text(marker)
        paths.append(path / MARKER)
    for f in files:
        (path / f).write_text("{}\n")
        paths.append(path / f)
    when = time.time() - age_s
    for p in paths + [path]:
        os.utime(p, (when, when))
    return path


# A job whose ranks write a dump on demand, in the default folder, and end well.
DUMPS_AND_ENDS_WELL = """\
import meshcomm
meshcomm.init_process_group()
meshcomm.barrier()
print("dumped", meshcomm.dump_flight_recorder(), flush=True)
meshcomm.destroy_process_group()
"""

# A job that fails: rank 2 leaves abruptly and the others fail in the next
# all_reduce, writing their dumps.
FAILS = """\
import os
import numpy as np
import meshcomm
meshcomm.init_process_group()
x = np.ones(16, np.float32)
meshcomm.all_reduce(x)
if meshcomm.get_rank() == 2:
    os._exit(1)
meshcomm.all_reduce(x)
"""


def test_a_clean_job_leaves_no_folder(tmp_path):
    root = tmp_path / "root"
    run = run_meshrun(tmp_path, DUMPS_AND_ENDS_WELL, "--nproc-per-node", 2, env=env_for(root))
    assert run.returncode == 0, run.stderr
    dumped = re.findall(r"dumped (\S+)", run.stdout)
    assert len(dumped) == 2 and all(d.startswith(f"{root}/meshcomm-dumps-") for d in dumped)
    assert folders(root) == []
    assert re.search(r"removed the 2 flight recorder dump\(s\) in \S+: every worker exited 0",
                     run.stderr), run.stderr


def test_a_clean_job_without_dumps_says_nothing_and_leaves_nothing(tmp_path):
    root = tmp_path / "root"
    run = run_meshrun(tmp_path, "import meshcomm\nmeshcomm.init_process_group()\n"
                      "meshcomm.barrier()\n", "--nproc-per-node", 2, env=env_for(root))
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert folders(root) == []


@pytest.mark.parametrize("how", ["flag", "env"])
def test_keep_keeps_a_clean_jobs_folder(tmp_path, how):
    root = tmp_path / "root"
    args = ["--nproc-per-node", 2] + (["--keep-dumps"] if how == "flag" else [])
    env = env_for(root, **({"MESHCOMM_KEEP_DUMPS": "1"} if how == "env" else {}))
    run = run_meshrun(tmp_path, DUMPS_AND_ENDS_WELL, *args, env=env)
    assert run.returncode == 0, run.stderr
    (kept,) = folders(root)
    assert sorted(os.listdir(root / kept)) == [MARKER, "rank_0.jsonl", "rank_1.jsonl"]
    assert "removed" not in run.stderr


def test_a_malformed_keep_setting_is_refused(tmp_path):
    run = run_meshrun(tmp_path, "pass\n", env=env_for(tmp_path / "root",
                                                       MESHCOMM_KEEP_DUMPS="maybe"))
    assert run.returncode == 2 and "MESHCOMM_KEEP_DUMPS='maybe'" in run.stderr, run.stderr


def test_a_failed_job_keeps_its_folder_for_the_diagnosis(tmp_path):
    root = tmp_path / "root"
    run = run_meshrun(tmp_path, FAILS, "--nproc-per-node", 3, "--grace-seconds", 1,
                      env=env_for(root))
    assert run.returncode == 1, run.stderr
    (kept,) = folders(root)
    folder = root / kept
    assert f"meshcomm-diagnose {folder}" in run.stderr
    assert (folder / MARKER).is_file()
    assert (folder / "rank_0.jsonl").is_file() and (folder / "rank_1.jsonl").is_file()
    assert diagnose.diagnose(str(folder)).status == diagnose.EXIT_PROBLEM
    again = subprocess.run([sys.executable, str(DIAGNOSE), str(folder)], env=env_for(root),
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "no dump from rank 2" in again.stdout, again.stdout


def test_a_dump_removes_the_oldest_folders_beyond_the_count_and_nothing_else(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    ours = [old_folder(root, f"meshcomm-dumps-old{i}", 3600 * (6 - i)) for i in range(5)]
    # Not meshcomm's, or not to be removed: none of these is touched.
    foreign = [
        old_folder(root, "meshcomm-dumps-nomarker", 90000, marker=None),
        old_folder(root, "meshcomm-dumps-othermarker", 90000, marker="someone else's\n"),
        old_folder(root, "my-meshcomm-dumps-x", 90000),
        old_folder(root, "meshcomm-dumps-with-notes", 90000, files=("rank_0.jsonl", "notes.txt")),
        old_folder(root, "meshcomm-dumps-recent", 10),
    ]
    (root / "meshcomm-dumps-link").symlink_to(ours[0])
    live = old_folder(root, "meshcomm-dumps-live", 90000)
    user_dir = tmp_path / "mine"
    user_dir.mkdir()
    (user_dir / "rank_0.jsonl").write_text("{}\n")
    untouched = foreign + [live]
    before = {f: sorted(os.listdir(f)) for f in untouched}
    # A live job holds its folder as its processes do: a shared lock on the marker.
    fd = os.open(live / MARKER, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        run = run_meshrun(tmp_path, FAILS, "--nproc-per-node", 3, "--grace-seconds", 1,
                          env=env_for(root, MESHCOMM_DUMP_RETAIN_JOBS="4"))
    finally:
        os.close(fd)
    assert run.returncode == 1, run.stderr
    job = re.search(r"meshcomm-diagnose (\S+)\):", run.stderr).group(1)
    # Of meshcomm's folders, the 4 most recently written stay: the job's
    # own, the recent one, old4 and old3; old2, old1 and old0 go. The live
    # one is the oldest but stays while it is held, and the rest are not
    # meshcomm's to remove.
    assert folders(root) == sorted(
        [Path(job).name, "meshcomm-dumps-old3", "meshcomm-dumps-old4", "meshcomm-dumps-link"]
        + [f.name for f in untouched])
    assert {f: sorted(os.listdir(f)) for f in untouched} == before
    assert sorted(os.listdir(ours[4])) == [MARKER, "rank_0.jsonl", "rank_1.jsonl"]
    assert os.listdir(user_dir) == ["rank_0.jsonl"]


def test_a_folder_the_user_names_is_never_removed(tmp_path):
    root = tmp_path / "root"
    named = tmp_path / "named"
    run = run_meshrun(tmp_path, DUMPS_AND_ENDS_WELL, "--nproc-per-node", 2,
                      env=env_for(root, MESHCOMM_DUMP_DIR=str(named)))
    assert run.returncode == 0, run.stderr
    assert sorted(os.listdir(named)) == ["rank_0.jsonl", "rank_1.jsonl"]
    assert not root.exists() or folders(root) == []

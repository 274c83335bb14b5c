"""The scripts under examples/ run under meshrun and report success."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("script,nproc,expect", [
    ("data_parallel_train.py", 4, "-> match"),
    ("pipeline_stages.py", 4, "all correct"),
    ("token_shuffle.py", 3, "all correct"),
    ("reference_examples.py", 2, "[2. 2."),
])
def test_example_runs(script, nproc, expect):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "build" / "python"))
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "meshrun"), "--nproc-per-node", str(nproc),
         str(ROOT / "examples" / script)],
        env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert expect in result.stdout, result.stdout

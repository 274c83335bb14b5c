"""Fixtures of the launcher tests: a per-test deadline and, once per run,
the one-node Slurm cluster (slurm_cluster.py)."""

import faulthandler
import os
import sys

import pytest

# tests/helpers: what every suite shares (ports.py). Not tests/ itself,
# whose folders (torch, python) would shadow the packages of those names.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "helpers"))
from slurm_cluster import started_cluster  # noqa: E402

# Backstop: no test may take longer than this; each bounds its own waits.
TEST_DEADLINE_S = 180.0


@pytest.fixture(autouse=True)
def _test_deadline():
    faulthandler.dump_traceback_later(TEST_DEADLINE_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


# One-node Slurm cluster, once per run.
slurm = pytest.fixture(scope="session", name="slurm")(started_cluster)

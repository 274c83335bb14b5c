"""Fixtures of the launcher tests: a per-test deadline and, once per run,
the one-node Slurm cluster (slurm_cluster.py)."""

import os
import sys

import pytest

# tests/helpers: what every suite shares (ports.py). Not tests/ itself,
# whose folders (torch, python) would shadow the packages of those names.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "helpers"))
from deadline import per_test_deadline  # noqa: E402
from slurm_cluster import started_cluster  # noqa: E402

# Backstop: no test may take longer than this; each bounds its own waits.
_test_deadline = per_test_deadline(180.0)


# One-node Slurm cluster, once per run.
slurm = pytest.fixture(scope="session", name="slurm")(started_cluster)

"""Fixtures of the launcher tests: a per-test deadline and, once per run,
the one-node Slurm cluster (slurm_cluster.py)."""

import faulthandler
import os

import pytest

from slurm_cluster import SlurmCluster, missing_programs

# Backstop: no test may take longer than this; each bounds its own waits.
TEST_DEADLINE_S = 180.0


@pytest.fixture(autouse=True)
def _test_deadline():
    faulthandler.dump_traceback_later(TEST_DEADLINE_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    missing = missing_programs()
    if missing:
        pytest.skip("Slurm is not installed (missing: " + ", ".join(missing) +
                    "); make deps installs it")
    if os.geteuid() != 0:
        pytest.skip("the Slurm fixture runs slurmd and munged, which needs root")
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()

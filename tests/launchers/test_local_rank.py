"""get_local_rank() without a launcher's local rank: the rank's position
among the ranks of its host; and before init_process_group, -1 with a
warning, as get_rank() does."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import meshcomm

from ports import free_port

PACKAGE_DIR = Path(meshcomm.__file__).resolve().parents[1]
SCRIPT = """\
import meshcomm
meshcomm.init_process_group()
print(meshcomm.get_rank(), meshcomm.get_local_rank())
meshcomm.destroy_process_group()
"""


def test_position_on_the_host_without_a_launcher_local_rank():
    port = free_port()
    base = {k: v for k, v in os.environ.items()
            if k not in ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                         "SLURM_LOCALID")}
    base.update(PYTHONPATH=str(PACKAGE_DIR), WORLD_SIZE="3", MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port), MESHCOMM_TIMEOUT_MS="30000")
    # Two "hosts": ranks 0 and 2 on one, rank 1 on the other.
    host_of = ["hostA", "hostB", "hostA"]
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT],
                              env=dict(base, RANK=str(r), MESHCOMM_HOST_ID=host_of[r]),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(3)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        results.append(out.split())
    assert sorted(results) == [["0", "0"], ["1", "0"], ["2", "1"]]


def test_before_init_it_is_minus_one_with_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert meshcomm.get_local_rank() == -1
    assert any("get_local_rank" in str(w.message) for w in caught)

"""The same unmodified script (launched_job.py) under torchrun, meshrun and
mpirun: env:// rendezvous through the store torch creates (under torchrun,
the one its agent hosts on MASTER_PORT), which the backend uses as it is."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import free_port
from meshcomm.torch.launch_env import export_launcher_env, first_slurm_host

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "launched_job.py")


def _run(cmd, env=None):
    env = dict(os.environ if env is None else env, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=150, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in range(2):
        assert f"rank {rank} of 2: ok on meshcomm" in proc.stdout, proc.stdout + proc.stderr


def test_torchrun():
    _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
          "--master_addr", "127.0.0.1", "--master_port", str(free_port()), JOB])


def test_meshrun():
    _run([sys.executable, "-m", "meshcomm.launch", "--nproc-per-node", "2", JOB])


def test_meshrun_torch_backend_and_meshcomm_api_in_one_script():
    _run([sys.executable, "-m", "meshcomm.launch", "--nproc-per-node", "2",
          os.path.join(HERE, "both_apis_job.py")])


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed")
def test_mpirun():
    cmd = ["mpirun", "--oversubscribe", "-np", "2", "-x", "MASTER_ADDR=127.0.0.1",
           "-x", f"MASTER_PORT={free_port()}", "-x", "PYTHONPATH", sys.executable, JOB]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    _run(cmd)


def test_launcher_variables_become_torchs():
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
    export_launcher_env(env)
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == \
        ("3", "8", "1", "4")
    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "6", "SLURM_JOB_NODELIST": "gpu[07-09],cpu1",
           "RANK": "2", "WORLD_SIZE": "6"}
    export_launcher_env(env)  # what is set stays
    assert (env["RANK"], env["MASTER_ADDR"]) == ("2", "gpu07")
    assert first_slurm_host("node3,node4") == "node3"
    assert first_slurm_host("n[1,5-7]") == "n1"


def test_meshrun_port_moves_once():
    # Under meshrun, torch's rendezvous moves to MASTER_PORT + 1: once, however
    # often the variables are exported (at torch's start and at import) and in
    # the workers' own children, which inherit the moved port.
    env = {"MESHCOMM_LAUNCHER": "meshrun", "MASTER_PORT": "29500"}
    export_launcher_env(env)
    export_launcher_env(env)
    assert env["MASTER_PORT"] == "29501"
    child = dict(env)
    export_launcher_env(child)
    assert child["MASTER_PORT"] == "29501"

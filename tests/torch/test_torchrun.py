"""The same script under torchrun: env:// rendezvous through the store
torchrun's agent hosts on MASTER_PORT, which the backend uses as it is."""

import os
import subprocess
import sys

from conftest import free_port

HERE = os.path.dirname(os.path.abspath(__file__))


def test_torchrun_two_ranks():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
           os.path.join(HERE, "torchrun_job.py")]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=150, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in range(2):
        assert f"rank {rank} of 2: ok on meshcomm" in proc.stdout, proc.stdout + proc.stderr

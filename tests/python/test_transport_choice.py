"""The transport the environment asks for is the one a job uses.

``make test`` runs this suite twice: as it is (the ranks of this host share
memory) and with ``MESHCOMM_SHM=0`` (every byte between ranks over TCP).
The second run means something only if the variable reaches the workers and
turns shared memory off there; this test checks that it does: a job's ranks
map a shared-memory segment exactly when ``MESHCOMM_SHM`` is not ``0``.
"""

import os

import numpy as np

import meshcomm
from mcutil import init


def _maps_shared_memory(rank, nprocs, port):
    init(rank, nprocs, port)
    x = np.full(1024, rank + 1.0)
    meshcomm.all_reduce(x)
    assert (x == nprocs * (nprocs + 1) / 2).all()
    # The segment's name is unlinked once every rank has mapped it, so it
    # shows only in the mappings (as "/dev/shm/meshcomm-... (deleted)").
    with open("/proc/self/maps") as maps:
        mapped = "/dev/shm/meshcomm-" in maps.read()
    meshcomm.destroy_process_group()
    return mapped


def test_the_environment_picks_the_transport(run_workers, free_port):
    want_shared_memory = os.environ.get("MESHCOMM_SHM", "1") != "0"
    assert run_workers(_maps_shared_memory, 2, (free_port,)) == [want_shared_memory] * 2

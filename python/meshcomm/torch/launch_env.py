"""The variables torch's env:// reads, from the launchers that do not set them.

torch's env:// takes RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT only;
torchrun and meshrun set all four. Open MPI's mpirun, MPICH's mpiexec and
Slurm's srun set their own (the ones meshcomm's own API reads, see
docs/launching.md), so an unchanged torch script would fail there. On
import, meshcomm.torch fills in RANK and WORLD_SIZE (and LOCAL_RANK,
LOCAL_WORLD_SIZE) from them, and MASTER_ADDR from Slurm's node list, when
they are unset; MASTER_PORT is the user's to export. Variables already set
are never changed, with one exception: under meshrun, MASTER_PORT is where
meshrun itself serves the job's meshcomm store (so the store outlives every
worker), and torch's env:// rank 0 would fail to listen there; torch's
rendezvous then uses the next port, MASTER_PORT + 1, on every rank alike
(meshcomm's own API finds meshrun's store through MESHCOMM_STORE_PORT, so a
script that uses both is unaffected).
The shift is made once per job: it is marked in the environment, so a
second call (the installed wheel calls this when torch starts, and again
when meshcomm.torch is imported) or a worker's own child process does not
move the port again.

Standard library only: _meshcomm_autoload loads this file when torch starts,
without importing the meshcomm package.
"""

import os
import re

__all__ = ["export_launcher_env"]

# Holds the MASTER_PORT this module moved to, once it has (see above).
_SHIFTED = "MESHCOMM_TORCH_MASTER_PORT"

# (rank, world size, local rank, local world size) per launcher, in the
# order meshcomm's own API looks for them.
_LAUNCHERS = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
)


def first_slurm_host(node_list):
    """The first host of a Slurm node list ("node[01-04],gpu7" -> "node01")."""
    m = re.match(r"([^,\[]*)(?:\[([^\]]*)\])?", node_list.strip())
    if not m or not m.group(1) and not m.group(2):
        return None
    prefix, ranges = m.group(1), m.group(2)
    if ranges is None:
        return prefix
    return prefix + re.split(r"[-,]", ranges)[0]


def export_launcher_env(environ=None):
    environ = os.environ if environ is None else environ
    if "RANK" not in environ or "WORLD_SIZE" not in environ:
        for rank, size, local_rank, local_size in _LAUNCHERS:
            if environ.get(rank, "").isdigit() and environ.get(size, "").isdigit():
                environ.setdefault("RANK", environ[rank])
                environ.setdefault("WORLD_SIZE", environ[size])
                if environ.get(local_rank, "").isdigit():
                    environ.setdefault("LOCAL_RANK", environ[local_rank])
                if environ.get(local_size, "").isdigit():
                    environ.setdefault("LOCAL_WORLD_SIZE", environ[local_size])
                break
    if "MASTER_ADDR" not in environ and environ.get("SLURM_JOB_NODELIST"):
        host = first_slurm_host(environ["SLURM_JOB_NODELIST"])
        if host:
            environ["MASTER_ADDR"] = host
    if (environ.get("MESHCOMM_LAUNCHER") == "meshrun" and environ.get("MASTER_PORT", "").isdigit()
            and environ.get(_SHIFTED) != environ["MASTER_PORT"]):
        environ["MASTER_PORT"] = str(int(environ["MASTER_PORT"]) + 1)
        environ[_SHIFTED] = environ["MASTER_PORT"]

"""meshcomm as a torch.distributed backend.

Importing this package registers the backend "meshcomm"::

    import torch.distributed as dist
    import meshcomm.torch                 # registers "meshcomm"
    dist.init_process_group("meshcomm")   # env:// (torchrun, meshrun, mpirun, srun), tcp://, store=

Every group rendezvouses through the store torch hands it, so nothing
beyond torch's own init method needs configuring. Under mpirun, mpiexec and
srun, importing this package also sets the RANK and WORLD_SIZE that torch's
env:// reads, from the launcher's variables (see launch_env.py). See docs/torch.md for
what is supported and how errors look.

For the smallest calls, ``meshcomm.torch.all_reduce_`` skips
torch.distributed's wrapper, and ``torch.ops.meshcomm.all_reduce_`` is the
same as a torch operator (see ops.py).
"""

import atexit

import torch
import torch.distributed as dist

_major = int(torch.__version__.split(".")[0])
if _major < 2:
    raise ImportError(
        f"meshcomm.torch needs torch 2.x; this is torch {torch.__version__} (Debian's "
        "python3-torch is 1.13). `make venv` installs torch 2.13 into build/venv; run "
        "build/venv/bin/python. See docs/torch.md.")

from .launch_env import export_launcher_env
from .ops import all_reduce_, group_handle
from .process_group import BACKEND_NAME, ProcessGroupMeshcomm, close_all, create
from .tensors import InvalidArgumentError

__all__ = ["BACKEND_NAME", "ProcessGroupMeshcomm", "InvalidArgumentError", "register",
           "group_handle", "all_reduce_"]


def register():
    """Registers the backend with torch.distributed (done on import; calling
    it again does nothing)."""
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    try:
        dist.Backend.register_backend(BACKEND_NAME, create, extended_api=True, devices=["cpu"])
    except TypeError:  # torch < 2.1 has no devices argument
        dist.Backend.register_backend(BACKEND_NAME, create, extended_api=True)


register()
export_launcher_env()  # RANK, WORLD_SIZE under mpirun, mpiexec and srun
atexit.register(close_all)

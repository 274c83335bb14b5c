"""Under meshrun, one script that uses the torch backend and meshcomm's own
API: importing meshcomm.torch moves MASTER_PORT to the next port for
torch's rendezvous (meshrun serves meshcomm's store on MASTER_PORT), and
meshcomm's own init must still find meshrun's store (MESHCOMM_STORE_PORT)."""

import numpy as np
import torch
import torch.distributed as dist

import meshcomm
import meshcomm.torch  # noqa: F401 - registers "meshcomm", moves MASTER_PORT

dist.init_process_group("meshcomm")
x = torch.ones(4)
dist.all_reduce(x)
meshcomm.init_process_group()
y = np.ones(4)
meshcomm.all_reduce(y)
rank, size = dist.get_rank(), dist.get_world_size()
assert meshcomm.get_rank() == rank
assert x.tolist() == [size] * 4 and y.tolist() == [size] * 4, (x, y)
meshcomm.destroy_process_group()
dist.destroy_process_group()
print(f"rank {rank} of {size}: ok on meshcomm", flush=True)

"""A torch script, unmodified but for the backend: run by test_launchers.py
under torchrun, meshrun and mpirun (env://)."""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import meshcomm.torch  # noqa: F401 - registers "meshcomm"

dist.init_process_group("meshcomm")
rank, size = dist.get_rank(), dist.get_world_size()
assert int(os.environ["LOCAL_RANK"]) == rank  # one host
torch.set_num_threads(1)
x = torch.full((5,), float(rank + 1))
dist.all_reduce(x)
assert x.tolist() == [size * (size + 1) / 2] * 5, x
sub = dist.new_group([0, size - 1])
y = torch.ones(3)
dist.all_reduce(y, group=sub)
assert y.tolist() == [2.0] * 3, y
torch.manual_seed(0)
model = DDP(torch.nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
weights = model.module.weight.detach().clone()
dist.broadcast(weights, src=0)
assert torch.equal(weights, model.module.weight.detach())
print(f"rank {rank} of {size}: ok on {dist.get_backend()}", flush=True)
dist.destroy_process_group()

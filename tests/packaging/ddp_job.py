"""A torch DDP job that never imports meshcomm: the installed wheel's
"torch.backends" entry point registers the backend when torch starts.
Run under torchrun; writes <out>/rank_<R>.json.

Usage: ddp_job.py OUT
"""

import json
import os
import sys

import torch
import torch.distributed as dist

# The hook named the backend without importing meshcomm (importing torch
# stays cheap for programs that never use it).
meshcomm_at_start = "meshcomm" in sys.modules


def main():
    out = sys.argv[1]
    dist.init_process_group("meshcomm")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(100 + rank)  # each rank its own data
    for _ in range(5):
        opt.zero_grad()
        model(torch.randn(16, 8)).square().sum().backward()
        opt.step()
    # DDP keeps the replicas equal: every rank's weights match rank 0's.
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    reference = weights.clone()
    dist.broadcast(reference, 0)
    meshcomm = sys.modules["meshcomm"]
    report = {
        "rank": rank,
        "size": size,
        "backend": dist.get_backend(),
        "replicas_equal": bool(torch.equal(weights, reference)),
        "meshcomm_at_start": meshcomm_at_start,
        "meshcomm_file": meshcomm.__file__,
    }
    dist.destroy_process_group()
    with open(os.path.join(out, f"rank_{rank}.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()

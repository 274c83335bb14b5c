"""Training through torch's own wrappers on the meshcomm backend, against
the same run on gloo: DDP (bucketing, find_unused_parameters, an fp16
compression hook), ZeroRedundancyOptimizer and FSDP2's fully_shard.

Each rank trains every configuration twice from the same seed and data,
once over a meshcomm group and once over a gloo group of the same ranks.
The parameters must agree across ranks, and with gloo's: bit for bit at 2
ranks (one addition per element, no order to differ in), within float32
rounding at 3 and 4 (the order of a sum of 3+ terms is the algorithm's).
"""

import pytest

from conftest import init, run_ranks

STEPS = 20


def _mlp(torch, unused_branch=False):
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                                            torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                            torch.nn.Linear(64, 4))
            self.unused = torch.nn.Linear(16, 4) if unused_branch else None

        def forward(self, x):
            return self.body(x)

    return Net()


def _batch(torch, rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def _flat(torch, module):
    return torch.cat([p.detach().reshape(-1).clone() for p in module.parameters()])


def _train_ddp(torch, dist, group, rank, config):
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = _mlp(torch, unused_branch=config == "unused")
    kwargs = {"process_group": group}
    if config == "buckets":
        kwargs["bucket_cap_mb"] = 0.004  # several buckets for this model
    if config == "unused":
        kwargs["find_unused_parameters"] = True
    ddp = DDP(model, **kwargs)
    if config == "fp16_hook":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(group, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        x, y = _batch(torch, rank, step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return _flat(torch, model)


def _train_zero(torch, dist, group, rank):
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = _mlp(torch)
    ddp = DDP(model, process_group=group)
    opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam,
                                  process_group=group, lr=0.01)
    for step in range(10):
        x, y = _batch(torch, rank, step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    opt.consolidate_state_dict(to=0)  # gathers every shard's state on rank 0
    return _flat(torch, model)


def _train_fsdp(torch, dist, group, rank):
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    model = _mlp(torch)
    mesh = DeviceMesh.from_group(group, "cpu")
    for layer in model.body:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(10):
        x, y = _batch(torch, rank, step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    # The full parameters, gathered from the shards.
    return torch.cat([p.full_tensor().detach().reshape(-1) for p in model.parameters()])


def training(rank, size, port):
    import torch
    import torch.distributed as dist
    init(rank, size, port)
    torch.set_num_threads(1)
    mc = dist.group.WORLD
    gl = dist.new_group(list(range(size)), backend="gloo")
    runs = {}
    for config in ("buckets", "unused", "fp16_hook"):
        runs[f"ddp {config}"] = (_train_ddp(torch, dist, mc, rank, config),
                                 _train_ddp(torch, dist, gl, rank, config))
    runs["zero"] = (_train_zero(torch, dist, mc, rank), _train_zero(torch, dist, gl, rank))
    runs["fsdp2"] = (_train_fsdp(torch, dist, mc, rank), _train_fsdp(torch, dist, gl, rank))
    report = {}
    for name, (mine, theirs) in runs.items():
        # Identical on every rank: compare with rank 0's copy.
        first = mine.clone()
        dist.broadcast(first, src=0, group=gl)
        report[name] = {
            "same_on_every_rank": bool(torch.equal(first, mine)),
            "bit_equal_to_gloo": bool(torch.equal(mine, theirs)),
            # the largest difference, relative to the largest parameter
            "max_rel_diff": float((mine - theirs).abs().max() / theirs.abs().max()),
        }
    dist.destroy_process_group()
    return report


@pytest.mark.parametrize("size", [2, 3, 4])
def test_training_matches_gloo(size):
    out = run_ranks(training, size, timeout=170)
    for rank, report in out.values.items():
        for name, r in report.items():
            assert r["same_on_every_rank"], f"rank {rank} {name}: {r}"
            if size == 2:
                assert r["bit_equal_to_gloo"], f"rank {rank} {name}: {r}"
            else:
                # fp16 compression rounds each partial sum to float16.
                bound = 1e-2 if name == "ddp fp16_hook" else 1e-5
                assert r["max_rel_diff"] < bound, f"rank {rank} {name}: {r}"

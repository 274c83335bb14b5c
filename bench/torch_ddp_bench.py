#!/usr/bin/env python3
"""DDP training step time on torch.distributed: meshcomm's backend
(meshcomm.torch) against gloo, same torch, same model, same data.

    PYTHONPATH=build/python build/venv/bin/python bench/torch_ddp_bench.py -n N
        [--models mlp,25m] [--steps S] [--time-limit SEC]

Models: "mlp", the small MLP of tests/torch/test_training.py (16-64-64-4,
about 5.6 K parameters: a step is all latency), and "25m", three linear
layers 1024-4096-4096-1024 (25.2 M parameters, 100 MB of float32 gradients
all-reduced per step: a step is mostly bandwidth). Batch 8, SGD, DDP's
default 25 MB buckets. Each configuration forks N ranks that join through
a FileStore; after warm-up steps, rank 0 times every step (forward,
backward with DDP's all_reduce, optimizer step) between barriers and the
median is printed as a markdown table, with gloo's time over meshcomm's.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist

MODELS = {
    "mlp": ([16, 64, 64, 4], 30, 200),    # widths, warm-up steps, timed steps
    "25m": ([1024, 4096, 4096, 1024], 3, 15),
}
BACKENDS = ("gloo", "meshcomm")


def build(widths):
    torch.manual_seed(0)
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def rank_main(rank, n, backend, model_name, steps, store_dir, out_path):
    from torch.nn.parallel import DistributedDataParallel as DDP
    if backend == "meshcomm":
        import meshcomm.torch  # noqa: F401 - registers the backend
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    store = dist.FileStore(os.path.join(store_dir, f"{backend}-{model_name}"), n)
    dist.init_process_group(backend, store=store, rank=rank, world_size=n)
    widths, warmup, timed = MODELS[model_name]
    timed = steps or timed
    model = DDP(build(widths))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8, widths[0])
    times = []
    for step in range(warmup + timed):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        elapsed = time.perf_counter() - t0
        if step >= warmup:
            times.append(elapsed)
    worst = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    params = sum(p.numel() for p in model.parameters())
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"ms": worst.item() * 1e3, "params": params, "steps": timed}, f)
    dist.barrier()
    dist.destroy_process_group()


def run(n, backend, model_name, steps, store_dir, time_limit):
    out_path = os.path.join(store_dir, f"result-{backend}-{model_name}.json")
    pids = []
    for rank in range(n):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                rank_main(rank, n, backend, model_name, steps, store_dir, out_path)
                code = 0
            except BaseException as e:  # noqa: B036 - reported, then the rank exits
                print(f"torch_ddp_bench: rank {rank} ({backend}, {model_name}): "
                      f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
            os._exit(code)
        pids.append(pid)
    deadline = time.monotonic() + time_limit
    failed = False
    alive = set(pids)
    while alive:
        for pid in list(alive):
            got, status = os.waitpid(pid, os.WNOHANG)
            if got == pid:
                alive.discard(pid)
                failed |= os.waitstatus_to_exitcode(status) != 0
        if alive and (failed or time.monotonic() > deadline):
            for pid in alive:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            return None
        time.sleep(0.01)
    if failed or not os.path.exists(out_path):
        return None
    with open(out_path) as f:
        return json.load(f)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", "--nranks", type=int, required=True)
    p.add_argument("--models", default="mlp,25m")
    p.add_argument("--steps", type=int, default=0, help="timed steps (0: the model's default)")
    p.add_argument("--time-limit", type=int, default=300, help="per configuration, seconds")
    args = p.parse_args(argv)
    models = args.models.split(",")
    for m in models:
        if m not in MODELS:
            p.error(f"unknown model {m!r} (have {', '.join(MODELS)})")
    store_dir = tempfile.mkdtemp(prefix="torch_ddp_bench.")
    rc = 0
    try:
        print(f"\n### DDP step time, {args.nranks} ranks (torch {torch.__version__}, "
              f"median ms per step, rank 0's view)\n")
        print("| model | parameters | gloo ms | meshcomm ms | gloo / meshcomm |")
        print("|---|---:|---:|---:|---:|")
        for m in models:
            got = {b: run(args.nranks, b, m, args.steps, store_dir, args.time_limit)
                   for b in BACKENDS}
            if any(v is None for v in got.values()):
                rc = 1
            g, mc = got["gloo"], got["meshcomm"]
            params = (g or mc or {}).get("params", 0)
            cell = lambda v: f"{v['ms']:.3f}" if v else "failed"  # noqa: E731
            ratio = f"{g['ms'] / mc['ms']:.2f}x" if g and mc else "-"
            print(f"| {m} | {params / 1e6:.3f} M | {cell(g)} | {cell(mc)} | {ratio} |",
                  flush=True)
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

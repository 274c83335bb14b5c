"""Data-parallel training of a two-layer MLP with meshcomm.

Every rank holds a shard of each global mini-batch. Rank 0's initial
weights are broadcast so all replicas start equal; after each backward pass
the gradients are all-reduced and averaged, so every replica takes the same
step. Per-epoch metrics are gathered to rank 0 with gather_object. At the
end rank 0 repeats the whole training in a single process and checks that
the distributed weights match it.

    meshrun --nproc-per-node 4 examples/data_parallel_train.py
"""

import sys

import numpy as np

import meshcomm as dist

FEATURES, HIDDEN, SAMPLES = 16, 32, 4096
BATCH, EPOCHS, LR = 256, 8, 0.5


def make_dataset():
    """A fixed synthetic two-class problem with a non-linear boundary."""
    rng = np.random.default_rng(1234)
    x = rng.normal(size=(SAMPLES, FEATURES)).astype(np.float64)
    w = rng.normal(size=FEATURES)
    y = ((x @ w) + 0.5 * np.sin(3 * x[:, 0]) > 0).astype(np.float64)
    return x, y


def init_params(seed):
    rng = np.random.default_rng(seed)
    return {
        "w1": rng.normal(scale=0.3, size=(FEATURES, HIDDEN)),
        "b1": np.zeros(HIDDEN),
        "w2": rng.normal(scale=0.3, size=HIDDEN),
        "b2": np.zeros(1),
    }


def forward_backward(params, x, y):
    """Mean binary cross-entropy over (x, y) and its gradients."""
    h_pre = x @ params["w1"] + params["b1"]
    h = np.tanh(h_pre)
    logits = h @ params["w2"] + params["b2"][0]
    p = 1.0 / (1.0 + np.exp(-logits))
    eps = 1e-12
    loss = -np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))
    d_logits = (p - y) / len(y)
    grads = {
        "w2": h.T @ d_logits,
        "b2": np.array([d_logits.sum()]),
    }
    d_h = np.outer(d_logits, params["w2"]) * (1 - h ** 2)
    grads["w1"] = x.T @ d_h
    grads["b1"] = d_h.sum(axis=0)
    accuracy = float(np.mean((p > 0.5) == (y > 0.5)))
    return loss, accuracy, grads


def batches(x, y, epoch):
    order = np.random.default_rng(epoch).permutation(SAMPLES)
    for start in range(0, SAMPLES, BATCH):
        idx = order[start:start + BATCH]
        yield x[idx], y[idx]


def train_distributed(x, y, rank, world):
    # Every rank draws its own random start; the broadcast makes rank 0's win.
    params = init_params(seed=100 + rank)
    for value in params.values():
        dist.broadcast(value, src=0)
    history = []
    for epoch in range(EPOCHS):
        losses, accs = [], []
        for bx, by in batches(x, y, epoch):
            shard = slice(rank * len(by) // world, (rank + 1) * len(by) // world)
            loss, acc, grads = forward_backward(params, bx[shard], by[shard])
            for name, g in grads.items():
                dist.all_reduce(g)          # sum over ranks, in place
                params[name] -= LR * g / world
            losses.append(loss)
            accs.append(acc)
        metrics = {"rank": rank, "loss": float(np.mean(losses)), "accuracy": float(np.mean(accs))}
        gathered = [None] * world if rank == 0 else None
        dist.gather_object(metrics, gathered, dst=0)
        if rank == 0:
            mean_loss = np.mean([m["loss"] for m in gathered])
            mean_acc = np.mean([m["accuracy"] for m in gathered])
            history.append(mean_loss)
            print(f"epoch {epoch + 1}/{EPOCHS}  loss {mean_loss:.4f}  accuracy {mean_acc:.3f}",
                  flush=True)
    return params, history


def train_single(x, y):
    """The same schedule in one process: each step's gradient is the mean of
    the shards' mean gradients, exactly what the replicas compute."""
    params = init_params(seed=100)
    world = dist.get_world_size()
    for epoch in range(EPOCHS):
        for bx, by in batches(x, y, epoch):
            total = {k: np.zeros_like(v) for k, v in params.items()}
            for r in range(world):
                shard = slice(r * len(by) // world, (r + 1) * len(by) // world)
                _, _, grads = forward_backward(params, bx[shard], by[shard])
                for k in total:
                    total[k] += grads[k]
            for k in params:
                params[k] -= LR * total[k] / world
    return params


def main():
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"training a {FEATURES}-{HIDDEN}-1 MLP on {SAMPLES} samples with {world} ranks",
              flush=True)
    x, y = make_dataset()
    params, history = train_distributed(x, y, rank, world)

    ok = np.array([1], dtype=np.int32)
    if rank == 0:
        reference = train_single(x, y)
        worst = max(float(np.max(np.abs(params[k] - reference[k]))) for k in params)
        matched = worst < 1e-9 and history[-1] < history[0]
        print(f"single-process check: largest weight difference {worst:.2e} -> "
              f"{'match' if matched else 'MISMATCH'}", flush=True)
        ok[0] = int(matched)
    dist.broadcast(ok, src=0)
    dist.destroy_process_group()
    return 0 if ok[0] else 1


if __name__ == "__main__":
    sys.exit(main())

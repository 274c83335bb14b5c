"""Data-parallel training that survives the loss of ranks (kill -9).

Every step, each rank computes the gradient of its shard of the global
mini-batch, the gradients are summed with all_reduce, and every replica
takes the same step. When a rank dies, the survivors' all_reduce fails
with DistPeerLostError; they shrink the world to the ranks that are left,
resynchronise (the interrupted step's result is undefined, so every
survivor restarts it from the new rank 0's state), re-shard the batch over
the smaller world and go on. The global batch stays the same, so the
result does not depend on how many ranks computed it: at the end the new
rank 0 replays the training in one process and checks that it matches.

    meshrun --nproc-per-node 4 --on-worker-failure continue \\
        examples/elastic_train.py --kill 2@40 --kill 3@90

``--kill R@S`` makes world rank R kill itself (SIGKILL) at step S, to
show the recovery without an outside hand; leave it out for a normal run.
docs/fault-tolerance.md walks through this loop.
"""

import argparse
import os
import signal
import time

import numpy as np

import meshcomm as dist

FEATURES, SAMPLES, BATCH, STEPS, LR = 32, 8192, 512, 150, 0.5


def make_dataset():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(SAMPLES, FEATURES))
    y = (x @ rng.normal(size=FEATURES) > 0).astype(np.float64)
    return x, y


def batch_of(step):
    """The global mini-batch of a step: the same on every rank."""
    return np.random.default_rng(step).choice(SAMPLES, BATCH, replace=False)


def gradient_sum(w, x, y):
    """Sum over the samples of the logistic loss's gradient."""
    p = 1.0 / (1.0 + np.exp(-(x @ w)))
    return x.T @ (p - y)


def train_alone(x, y):
    w = np.zeros(FEATURES)
    for step in range(STEPS):
        idx = batch_of(step)
        w -= LR * gradient_sum(w, x[idx], y[idx]) / BATCH
    return w


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kill", action="append", default=[], metavar="RANK@STEP")
    args = parser.parse_args()
    kills = {int(r): int(s) for r, s in (k.split("@") for k in args.kill)}

    dist.init_process_group()
    me = dist.get_rank()  # world rank: stays this rank's name for good
    x, y = make_dataset()
    w = np.zeros(FEATURES)
    step = 0
    while step < STEPS:
        if kills.get(me) == step:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            n, r = dist.get_world_size(), dist.get_rank()
            shard = batch_of(step)[r::n]  # re-sharded whenever n changes
            grad = gradient_sum(w, x[shard], y[shard])
            dist.all_reduce(grad)
            w -= LR * grad / BATCH
            step += 1
        except dist.DistError as e:
            lost_at = time.monotonic()
            print(f"world rank {me}: step {step} failed ({type(e).__name__}: {e})", flush=True)
            del e  # its traceback holds the old group
            dist.shrink_group()
            # The failed step's all_reduce may have finished on some
            # survivors and not on others: restart it everywhere from the
            # new rank 0's state.
            state = np.append(w, step)
            dist.broadcast(state, src=dist.get_global_rank(None, 0))
            w, step = state[:-1].copy(), int(state[-1])
            print(f"world rank {me}: now rank {dist.get_rank()} of {dist.get_world_size()}, "
                  f"resuming at step {step} ({time.monotonic() - lost_at:.3f} s after the "
                  "error)", flush=True)
    if dist.get_rank() == 0:
        ref = train_alone(x, y)
        ok = np.allclose(w, ref, rtol=1e-9, atol=1e-12)
        print(f"trained {STEPS} steps on {dist.get_world_size()} rank(s); one-process replay "
              f"-> {'match' if ok else 'MISMATCH'}", flush=True)
        if not ok:
            raise SystemExit(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Mixture-of-experts token routing with all_to_all_single: every rank
routes each of its tokens to the rank hosting that token's expert, the
experts process what they receive, and a second all_to_all_single brings
the results home in the original order.

    meshrun --nproc-per-node 4 examples/token_shuffle.py
"""

import sys

import numpy as np

import meshcomm as dist

TOKENS, HIDDEN = 1000, 8


def main():
    dist.init_process_group()
    rank, n = dist.get_rank(), dist.get_world_size()
    rng = np.random.default_rng(rank)
    tokens = rng.normal(size=(TOKENS, HIDDEN)).astype(np.float32)
    expert_of = rng.integers(0, n, size=TOKENS)        # one expert per rank

    # Group tokens by destination and tell every rank how many rows to expect.
    order = np.argsort(expert_of, kind="stable")
    send = np.ascontiguousarray(tokens[order])
    send_counts = np.bincount(expert_of, minlength=n).astype(np.int64)
    recv_counts = np.zeros(n, dtype=np.int64)
    dist.all_to_all_single(recv_counts, send_counts)

    received = np.empty((int(recv_counts.sum()), HIDDEN), dtype=np.float32)
    dist.all_to_all_single(received, send, output_split_sizes=recv_counts.tolist(),
                           input_split_sizes=send_counts.tolist())

    processed = received * np.float32(rank + 1)         # "expert" number rank

    back = np.empty_like(send)
    dist.all_to_all_single(back, processed, output_split_sizes=send_counts.tolist(),
                           input_split_sizes=recv_counts.tolist())
    restored = np.empty_like(back)
    restored[order] = back

    expected = tokens * (expert_of[:, None] + 1).astype(np.float32)
    ok = np.array([int(np.array_equal(restored, expected))], dtype=np.int32)
    dist.all_reduce(ok, op="min")
    if rank == 0:
        print(f"routed {TOKENS} tokens per rank through {n} experts and back: "
              f"{'all correct' if ok[0] else 'WRONG'}", flush=True)
    dist.destroy_process_group()
    return 0 if ok[0] else 1


if __name__ == "__main__":
    sys.exit(main())

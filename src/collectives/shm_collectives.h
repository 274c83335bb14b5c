// The collectives among the ranks of one host, run directly on the group's
// shared-memory segment (transport/shm/shm_domain.h) in rounds: each rank
// copies its contribution into its own slot, and every rank reads (and
// reduces) what it needs from the others' slots. Large buffers go through
// in slot-sized chunks, double-buffered, so copy-in of one chunk overlaps
// the readers of the previous one.
//
// Ranks are local ranks of the domain; buffers and sizes are as in
// collectives.h. The first round of every operation checks every rank's
// signature, so ranks that disagree on the call (or on its root) fail with
// Mismatch instead of waiting for each other.
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/scratch.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm::collectives::shm {

// kShmOneShot: every rank reduces all slots into its own buffer (one
// round per chunk; least latency). kShmReduceScatter: every rank reduces
// its slice of all slots, then copies the finished slices out (two rounds
// per chunk, 1/P of the reduction work each; most bandwidth).
// kShmSingleCopy: reduce-scatter + all-gather reading the peers' buffers
// directly (transport/shm/single_copy.h); kShmReduceScatter where the
// domain has no single copies.
void allReduce(ShmOp& op, void* data, size_t count, DType dtype, ReduceOp rop, Algorithm algo,
               ScratchArena& scratch);
void broadcast(ShmOp& op, void* data, size_t bytes, int root);
void reduce(ShmOp& op, void* data, size_t count, DType dtype, ReduceOp rop, int root);
void allGather(ShmOp& op, const void* input, size_t inputBytes, const std::vector<Block>& outputs);
void reduceScatter(ShmOp& op, const void* input, const std::vector<size_t>& blockCounts,
                   void* output, DType dtype, ReduceOp rop);
void gather(ShmOp& op, const void* input, size_t inputBytes, const std::vector<Block>& outputs,
            int root);
void scatter(ShmOp& op, const std::vector<Block>& inputs, void* output, size_t outputBytes,
             int root);
void allToAll(ShmOp& op, const std::vector<Block>& sends, const std::vector<Block>& recvs);
void barrier(ShmOp& op);

}  // namespace meshcomm::collectives::shm

// The shared-memory kind's collectives, one file per family, run on the
// group's segment in rounds (host/shm/rounds.h). ShmCollectives
// (shm_collectives.cc) offers them to the families through
// collectives/host_collectives.h.
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/blocks.h"
#include "collectives/host_collectives.h"
#include "collectives/scratch.h"
#include "collectives/tuning.h"
#include "meshcomm/types.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm::host::shm {

// all_reduce.cc. kShmOneShot: every rank reduces all slots into its own buffer
// (one round per chunk; least latency). kShmReduceScatter: every rank
// reduces its slice of all slots, then copies the finished slices out (two
// rounds per chunk, 1/P of the reduction work each; most bandwidth).
// kShmSingleCopy: reduce-scatter + all-gather reading the peers' buffers
// directly (transport/shm/single_copy.h); kShmReduceScatter where the
// domain has no single copies.
void allReduce(ShmOp& op, void* data, size_t count, DType dtype, ReduceOp rop, Algorithm algo,
               ScratchArena& scratch);

// broadcast.cc: every rank's data becomes the local rank `root`'s.
// `agreement`: as HostCollectives::broadcast (null: none).
void broadcast(ShmOp& op, void* data, size_t bytes, int root,
               const HostCollectives::Agreement* agreement);
// The same in rounds of up to `roundBytes` (at most the slot) instead of
// the chunk, without records.
void broadcast(ShmOp& op, void* data, size_t bytes, int root, size_t roundBytes);

// reduce.cc: the local rank `root`'s data becomes op over the domain's ranks:
// at 2 ranks with cores of their own reduceAtRoot in the rounds of a
// broadcast, else slice-parallel. `agreement`: as HostCollectives::reduce.
void reduce(ShmOp& op, void* data, size_t count, DType dtype, ReduceOp rop, int root,
            const HostCollectives::Agreement* agreement = nullptr);
// The same with the root's result in `result` (count elements, overlapping
// no input, or equal to the root's `data`; ignored on the other ranks), and
// every rank's `data` read only.
void reduce(ShmOp& op, const void* data, void* result, size_t count, DType dtype, ReduceOp rop,
            int root, const HostCollectives::Agreement* agreement = nullptr);
// The same, with the root reducing every rank's data itself while the
// others only copy theirs into their slots: one pass over the buffer on
// every rank, where the slices have the root copy half of it in, reduce
// its slice and copy the whole out. For a root that has other work (a
// hierarchical leader's network exchange) and few ranks beside it. Rounds
// are as wide as the slot: wider than the chunk only where the host's ranks
// outnumber its cores, and there every round costs context switches.
void reduceAtRoot(ShmOp& op, const void* data, void* result, size_t count, DType dtype,
                  ReduceOp rop, int root);
// The same in rounds of up to `roundBytes`, in as many parts of the slot
// area as they allow, so the leaves copy in ahead of the root's reduction.
void reduceAtRoot(ShmOp& op, const void* data, void* result, size_t count, DType dtype,
                  ReduceOp rop, int root, size_t roundBytes,
                  const HostCollectives::Agreement* agreement = nullptr);

// all_gather.cc: every rank publishes its input in its slot, chunk by chunk, and
// copies every other rank's out of theirs. `agreement`: records that ride
// the first round, judged before any output is written.
void allGather(ShmOp& op, const void* input, size_t inputBytes, std::span<const Block> outputs,
               const HostCollectives::Agreement* agreement = nullptr);

// reduce_scatter.cc: every rank publishes a chunk of every block per round, in the
// block's region of its slot, and reduces its own block out of every slot.
// `agreement`: as allGather's.
void reduceScatter(ShmOp& op, const void* input, std::span<const size_t> blockCounts,
                   void* output, DType dtype, ReduceOp rop,
                   const HostCollectives::Agreement* agreement = nullptr);

// gather_scatter.cc: every rank publishes its input chunk by chunk and the root
// copies them out.
void gather(ShmOp& op, const void* input, size_t inputBytes, std::span<const Block> outputs,
            int root, const HostCollectives::Agreement* agreement);
// gather_scatter.cc: the root publishes one region per rank and round, and every rank
// copies its own out.
void scatter(ShmOp& op, std::span<const Block> inputs, void* output, size_t outputBytes,
             int root, const HostCollectives::Agreement* agreement);

// all_to_all.cc: every rank publishes one region per peer and round, and every
// rank copies its region of every peer's slot out. `agreement`: as
// HostCollectives::allToAll (null: none).
void allToAll(ShmOp& op, std::span<const Block> sends, std::span<const Block> recvs,
              const HostCollectives::Agreement* agreement);

}  // namespace meshcomm::host::shm

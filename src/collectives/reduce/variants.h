// reduce's shared-memory and hierarchical variants, declared for its entry
// point (reduce.cc) and for the hierarchical all_reduce, which opens with
// the shared-memory reduce.
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>

#include "collectives/comm.h"
#include "meshcomm/types.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm::collectives {

namespace shm {
// shm.cc: the local rank `root`'s data becomes op over the domain's ranks.
void reduce(ShmOp& op, void* data, size_t count, DType dtype, ReduceOp rop, int root);
// The same with the root's result in `result` (count elements, overlapping
// no input, or equal to the root's `data`; ignored on the other ranks), and
// every rank's `data` read only.
void reduce(ShmOp& op, const void* data, void* result, size_t count, DType dtype, ReduceOp rop,
            int root);
// The same, with the root reducing every rank's data itself while the
// others only copy theirs into their slots: one pass over the buffer on
// every rank, where the slices have the root copy half of it in, reduce
// its slice and copy the whole out. For a root that has other work (a
// hierarchical leader's network exchange) and few ranks beside it. Rounds
// are as wide as the slot: wider than the chunk only where the host's ranks
// outnumber its cores, and there every round costs context switches.
void reduceAtRoot(ShmOp& op, const void* data, void* result, size_t count, DType dtype,
                  ReduceOp rop, int root);
}  // namespace shm

namespace hierarchical {
// hierarchical.cc. REQUIRES: comm.route() == Route::kHierarchical.
void reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root);
}  // namespace hierarchical

}  // namespace meshcomm::collectives

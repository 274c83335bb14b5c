// all_reduce's shared-memory and hierarchical variants, declared for its
// entry point (all_reduce.cc).
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>

#include "collectives/comm.h"
#include "collectives/scratch.h"
#include "collectives/tuning.h"
#include "meshcomm/types.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm::collectives {

namespace shm {
// shm.cc. kShmOneShot: every rank reduces all slots into its own buffer
// (one round per chunk; least latency). kShmReduceScatter: every rank
// reduces its slice of all slots, then copies the finished slices out (two
// rounds per chunk, 1/P of the reduction work each; most bandwidth).
// kShmSingleCopy: reduce-scatter + all-gather reading the peers' buffers
// directly (transport/shm/single_copy.h); kShmReduceScatter where the
// domain has no single copies.
void allReduce(ShmOp& op, void* data, size_t count, DType dtype, ReduceOp rop, Algorithm algo,
               ScratchArena& scratch);
}  // namespace shm

namespace hierarchical {
// hierarchical.cc. REQUIRES: comm.route() == Route::kHierarchical.
void allReduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op);
}  // namespace hierarchical

}  // namespace meshcomm::collectives

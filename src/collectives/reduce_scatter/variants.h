// reduce_scatter's shared-memory variant, declared for its entry point
// (reduce_scatter.cc).
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>
#include <vector>

#include "meshcomm/types.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm::collectives::shm {

// shm.cc: every rank publishes a chunk of every block per round, in the
// block's region of its slot, and reduces its own block out of every slot.
void reduceScatter(ShmOp& op, const void* input, const std::vector<size_t>& blockCounts,
                   void* output, DType dtype, ReduceOp rop);

}  // namespace meshcomm::collectives::shm

// gather's and scatter's shared-memory variants, declared for their entry
// points (gather_scatter.cc).
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/collectives.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm::collectives::shm {

// shm.cc: every rank publishes its input chunk by chunk and the root
// copies them out.
void gather(ShmOp& op, const void* input, size_t inputBytes, const std::vector<Block>& outputs,
            int root);
// shm.cc: the root publishes one region per rank and round, and every rank
// copies its own out.
void scatter(ShmOp& op, const std::vector<Block>& inputs, void* output, size_t outputBytes,
             int root);

}  // namespace meshcomm::collectives::shm

// all_gather's shared-memory variant, declared for its entry point
// (all_gather.cc).
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/collectives.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm::collectives::shm {

// shm.cc: every rank publishes its input in its slot, chunk by chunk, and
// copies every other rank's out of theirs.
void allGather(ShmOp& op, const void* input, size_t inputBytes, const std::vector<Block>& outputs);

}  // namespace meshcomm::collectives::shm

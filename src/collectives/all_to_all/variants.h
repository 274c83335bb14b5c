// all_to_all's shared-memory variant, declared for its entry point
// (all_to_all.cc).
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <vector>

#include "collectives/collectives.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm::collectives::shm {

// shm.cc: every rank publishes one region per peer and round, and every
// rank copies its region of every peer's slot out.
void allToAll(ShmOp& op, const std::vector<Block>& sends, const std::vector<Block>& recvs);

}  // namespace meshcomm::collectives::shm

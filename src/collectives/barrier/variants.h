// barrier's hierarchical variant, declared for its entry point
// (barrier.cc). Its shared-memory variant is the bare round of
// shm/rounds.h, shm::barrier.
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include "collectives/comm.h"

namespace meshcomm::collectives::hierarchical {

// hierarchical.cc. REQUIRES: comm.route() == Route::kHierarchical.
void barrier(Comm& comm);

}  // namespace meshcomm::collectives::hierarchical

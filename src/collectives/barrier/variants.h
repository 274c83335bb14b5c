// barrier's hierarchical variant, declared for its entry point
// (barrier.cc). On one host, the domain's barrier (host_collectives.h).
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include "collectives/comm.h"

namespace meshcomm::collectives::hierarchical {

// hierarchical.cc. REQUIRES: comm.route() == Route::kHierarchical.
void barrier(Comm& comm);

}  // namespace meshcomm::collectives::hierarchical

// broadcast's shared-memory and hierarchical variants, declared for its
// entry point (broadcast.cc) and for the hierarchical all_reduce, which
// ends with the shared-memory broadcast.
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>

#include "collectives/comm.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm::collectives {

namespace shm {
// shm.cc: every rank's data becomes the local rank `root`'s.
void broadcast(ShmOp& op, void* data, size_t bytes, int root);
// The same in rounds of up to `roundBytes` (at most the slot) instead of
// the chunk.
void broadcast(ShmOp& op, void* data, size_t bytes, int root, size_t roundBytes);
}  // namespace shm

namespace hierarchical {
// hierarchical.cc. REQUIRES: comm.route() == Route::kHierarchical.
void broadcast(Comm& comm, void* data, size_t bytes, int root);
}  // namespace hierarchical

}  // namespace meshcomm::collectives

// Hierarchical collectives for groups spread over several hosts with
// several ranks on some: shared memory among the ranks of each host, TCP
// among one leader per host. Only the leaders' traffic crosses the network,
// once per host instead of once per rank.
//
//   all_reduce: shm reduce to the leader, all_reduce among leaders, shm
//               broadcast from the leader;
//   broadcast:  broadcast among leaders (the root leads its host), then shm
//               broadcast within each host;
//   reduce:     shm reduce to each leader, reduce among leaders to the root;
//   barrier:    shm barrier, barrier among leaders, shm barrier.
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>

#include "collectives/comm.h"
#include "meshcomm/types.h"

namespace meshcomm::collectives::hierarchical {

// REQUIRES: comm.hierarchical().
void allReduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op);
void broadcast(Comm& comm, void* data, size_t bytes, int root);
void reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root);
void barrier(Comm& comm);

}  // namespace meshcomm::collectives::hierarchical

#include "collectives/hierarchical.h"

#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/shm_collectives.h"
#include "transport/subset_transport.h"

namespace meshcomm::collectives::hierarchical {
namespace {

// The leader of every host: `root` for the root's host, else its lowest rank.
std::vector<int> leadersFor(const Placement& placement, int root) {
  std::vector<int> leaders;
  for (const auto& members : placement.hosts) leaders.push_back(members.front());
  if (root >= 0) leaders[static_cast<size_t>(placement.hostOf[static_cast<size_t>(root)])] = root;
  return leaders;
}

// This host's leader as a local rank of its shared-memory domain.
int localLeader(const Comm& comm, const std::vector<int>& leaders) {
  const Placement& pl = comm.placement();
  return pl.localIndex(leaders[static_cast<size_t>(pl.hostOf[static_cast<size_t>(comm.rank())])]);
}

bool isLeader(const Comm& comm, const std::vector<int>& leaders) {
  const Placement& pl = comm.placement();
  return leaders[static_cast<size_t>(pl.hostOf[static_cast<size_t>(comm.rank())])] == comm.rank();
}

}  // namespace

void allReduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op) {
  const std::vector<int> leaders = leadersFor(comm.placement(), -1);
  const int leader = localLeader(comm, leaders);
  if (comm.hasShmDomain()) {
    ShmOp local = comm.shmOp();
    shm::reduce(local, data, count, dtype, op, leader);
  }
  if (isLeader(comm, leaders)) {
    SubsetTransport among(comm.transport(), leaders);
    Comm across = comm.subComm(among);
    collectives::allReduce(across, data, count, dtype, op,
                           defaultAllReduce(count * dtypeSize(dtype), across.size(), Route::kTcp));
  }
  if (comm.hasShmDomain()) {
    ShmOp local = comm.shmOp();
    shm::broadcast(local, data, count * dtypeSize(dtype), leader);
  }
}

void broadcast(Comm& comm, void* data, size_t bytes, int root) {
  const std::vector<int> leaders = leadersFor(comm.placement(), root);
  if (isLeader(comm, leaders)) {
    SubsetTransport among(comm.transport(), leaders);
    Comm across = comm.subComm(among);
    int rootHost = comm.placement().hostOf[static_cast<size_t>(root)];
    collectives::broadcast(across, data, bytes, rootHost,
                           defaultBroadcast(bytes, across.size(), Route::kTcp));
  }
  if (comm.hasShmDomain()) {
    ShmOp local = comm.shmOp();
    shm::broadcast(local, data, bytes, localLeader(comm, leaders));
  }
}

void reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root) {
  const std::vector<int> leaders = leadersFor(comm.placement(), root);
  const size_t bytes = count * dtypeSize(dtype);
  if (isLeader(comm, leaders) && comm.rank() != root && bytes > 0) {
    // Only the root's buffer may change: a leader sums its host elsewhere.
    uint8_t* partial = comm.scratch(Scratch::kHostPartial, bytes);
    std::memcpy(partial, data, bytes);
    data = partial;
  }
  if (comm.hasShmDomain()) {
    ShmOp local = comm.shmOp();
    shm::reduce(local, data, count, dtype, op, localLeader(comm, leaders));
  }
  if (isLeader(comm, leaders)) {
    SubsetTransport among(comm.transport(), leaders);
    Comm across = comm.subComm(among);
    int rootHost = comm.placement().hostOf[static_cast<size_t>(root)];
    collectives::reduce(across, data, count, dtype, op, rootHost,
                        defaultReduce(bytes, across.size(), Route::kTcp));
  }
}

void barrier(Comm& comm) {
  const std::vector<int> leaders = leadersFor(comm.placement(), -1);
  if (comm.hasShmDomain()) {
    ShmOp local = comm.shmOp();
    shm::barrier(local);
  }
  if (isLeader(comm, leaders)) {
    SubsetTransport among(comm.transport(), leaders);
    Comm across = comm.subComm(among);
    collectives::barrier(across);
  }
  if (comm.hasShmDomain()) {
    ShmOp local = comm.shmOp();
    shm::barrier(local);
  }
}

}  // namespace meshcomm::collectives::hierarchical

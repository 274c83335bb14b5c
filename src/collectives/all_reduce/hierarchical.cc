// all_reduce across hosts: shm reduce to the leader, all_reduce among
// leaders, shm broadcast from the leader.
#include <vector>

#include "collectives/all_reduce/variants.h"
#include "collectives/broadcast/variants.h"
#include "collectives/collectives.h"
#include "collectives/hierarchical/leaders.h"
#include "collectives/reduce/variants.h"
#include "transport/subset_transport.h"

namespace meshcomm::collectives::hierarchical {

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
    collectives::allReduce(across, data, count, dtype, op);
  }
  if (comm.hasShmDomain()) {
    ShmOp local = comm.shmOp();
    shm::broadcast(local, data, count * dtypeSize(dtype), leader);
  }
}

}  // namespace meshcomm::collectives::hierarchical

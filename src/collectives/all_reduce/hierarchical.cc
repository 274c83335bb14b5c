// all_reduce across hosts: shm reduce to the leader, all_reduce among
// leaders, shm broadcast from the leader.
//
// A leader sums its host in scratch and copies the result to its output
// only once the leaders' all_reduce succeeded: that exchange is where ranks
// on different hosts first compare signatures, so a rank elsewhere that
// disagrees (a different op or count) leaves every output as it was. The
// other ranks of a host write their outputs only in the final broadcast,
// which starts after their leader's exchange succeeded.
#include <cstring>
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
  const bool leads = isLeader(comm, leaders);
  const size_t bytes = count * dtypeSize(dtype);
  void* host = data;
  if (leads && bytes > 0) {
    host = comm.scratch(Scratch::kHostPartial, bytes);
    std::memcpy(host, data, bytes);
  }
  if (comm.hasShmDomain()) {
    ShmOp local = comm.shmOp();
    shm::reduce(local, host, count, dtype, op, leader);
  }
  if (leads) {
    SubsetTransport among(comm.transport(), leaders);
    Comm across = comm.subComm(among);
    collectives::allReduce(across, host, count, dtype, op);
    if (host != data) std::memcpy(data, host, bytes);
  }
  if (comm.hasShmDomain()) {
    ShmOp local = comm.shmOp();
    shm::broadcast(local, data, bytes, leader);
  }
}

}  // namespace meshcomm::collectives::hierarchical

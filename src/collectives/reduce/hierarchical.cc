// reduce across hosts: the host's reduce to each leader, reduce among leaders to
// the root.
#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/hierarchical/leaders.h"
#include "collectives/reduce/variants.h"
#include "transport/subset_transport.h"

namespace meshcomm::collectives::hierarchical {

void reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root) {
  const std::vector<int> leaders = leadersFor(comm.placement(), root);
  const size_t bytes = count * dtypeSize(dtype);
  if (isLeader(comm, leaders) && comm.rank() != root && bytes > 0) {
    // Only the root's buffer may change: a leader sums its host elsewhere.
    uint8_t* partial = comm.scratch(Scratch::kHostPartial, bytes);
    std::memcpy(partial, data, bytes);
    data = partial;
  }
  if (comm.hasHostDomain()) {
    comm.host().reduce(comm.hostCall(), data, count, dtype, op, localLeader(comm, leaders), nullptr);
  }
  if (isLeader(comm, leaders)) {
    SubsetTransport among(comm.transport(), leaders);
    Comm across = comm.subComm(
        among, chooseStepAlgorithm(Opcode::kReduce, count * dtypeSize(dtype), among.size(),
                                   Route::kFlat));
    int rootHost = comm.placement().hostOf[static_cast<size_t>(root)];
    collectives::reduce(across, data, count, dtype, op, rootHost);
  }
}

}  // namespace meshcomm::collectives::hierarchical

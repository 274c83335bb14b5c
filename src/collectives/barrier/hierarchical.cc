// barrier across hosts: the host's barrier, barrier among leaders, the
// host's barrier.
#include <vector>

#include "collectives/barrier/variants.h"
#include "collectives/collectives.h"
#include "collectives/hierarchical/leaders.h"
#include "transport/subset_transport.h"

namespace meshcomm::collectives::hierarchical {

void barrier(Comm& comm) {
  const std::vector<int> leaders = leadersFor(comm.placement(), -1);
  if (comm.hasHostDomain()) {
    comm.host().barrier(comm.hostCall());
  }
  if (isLeader(comm, leaders)) {
    SubsetTransport among(comm.transport(), leaders);
    Comm across = comm.subComm(
        among, chooseStepAlgorithm(Opcode::kBarrier, 0, among.size(), Route::kFlat));
    collectives::barrier(across);
  }
  if (comm.hasHostDomain()) {
    comm.host().barrier(comm.hostCall());
  }
}

}  // namespace meshcomm::collectives::hierarchical

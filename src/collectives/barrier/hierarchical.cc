// barrier across hosts: shm barrier, barrier among leaders, shm barrier.
#include <vector>

#include "collectives/barrier/variants.h"
#include "collectives/collectives.h"
#include "collectives/hierarchical/leaders.h"
#include "collectives/shm/rounds.h"
#include "transport/subset_transport.h"

namespace meshcomm::collectives::hierarchical {

void barrier(Comm& comm) {
  const std::vector<int> leaders = leadersFor(comm.placement(), -1);
  if (comm.hasShmDomain()) {
    ShmOp local = comm.shmOp();
    shm::barrier(local);
  }
  if (isLeader(comm, leaders)) {
    SubsetTransport among(comm.transport(), leaders);
    Comm across = comm.subComm(
        among, chooseStepAlgorithm(Opcode::kBarrier, 0, among.size(), Route::kTcp));
    collectives::barrier(across);
  }
  if (comm.hasShmDomain()) {
    ShmOp local = comm.shmOp();
    shm::barrier(local);
  }
}

}  // namespace meshcomm::collectives::hierarchical

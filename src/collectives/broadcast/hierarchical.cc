// broadcast across hosts: broadcast among leaders (the root leads its
// host), then the host's broadcast within each host.
#include <vector>

#include "collectives/broadcast/variants.h"
#include "collectives/collectives.h"
#include "collectives/hierarchical/leaders.h"
#include "transport/subset_transport.h"

namespace meshcomm::collectives::hierarchical {

void broadcast(Comm& comm, void* data, size_t bytes, int root) {
  const std::vector<int> leaders = leadersFor(comm.placement(), root);
  if (isLeader(comm, leaders)) {
    SubsetTransport among(comm.transport(), leaders);
    Comm across = comm.subComm(
        among, chooseStepAlgorithm(Opcode::kBroadcast, bytes, among.size(), Route::kFlat));
    int rootHost = comm.placement().hostOf[static_cast<size_t>(root)];
    collectives::broadcast(across, data, bytes, rootHost);
  }
  if (comm.hasHostDomain()) {
    comm.host().broadcast(comm.hostCall(), data, bytes, localLeader(comm, leaders), nullptr);
  }
}

}  // namespace meshcomm::collectives::hierarchical

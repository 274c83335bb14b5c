// barrier: over messages dissemination; on one host, the host domain's
// barrier (host_collectives.h); across hosts, hierarchical (hierarchical.cc).
//
// Dissemination schedule: in round k (distance 1, 2, 4, ...) every rank
// signals r+d and waits for r-d; after ceil(log2 P) rounds each rank has
// heard, directly or transitively, from every other.
#include "collectives/barrier/variants.h"
#include "collectives/blocks.h"
#include "collectives/collectives.h"

namespace meshcomm::collectives {

void barrier(Comm& comm) {
  const Algorithm algo = comm.algorithm();
  if (algo == Algorithm::kOnHost) {
    comm.host().barrier(comm.hostCall());
    return;
  }
  if (algo == Algorithm::kHierarchical) {
    hierarchical::barrier(comm);
    return;
  }
  const int p = comm.size();
  const int r = comm.rank();
  uint32_t step = 0;
  for (int d = 1; d < p; d <<= 1, ++step) {
    comm.sendRecv(wrap(r, d, p), nullptr, 0, wrap(r, -d, p), nullptr, 0, step);
  }
}

}  // namespace meshcomm::collectives

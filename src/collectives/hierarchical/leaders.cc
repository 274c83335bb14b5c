#include "collectives/hierarchical/leaders.h"

namespace meshcomm::collectives::hierarchical {

std::vector<int> leadersFor(const Placement& placement, int root) {
  std::vector<int> leaders;
  for (const auto& members : placement.hosts) leaders.push_back(members.front());
  if (root >= 0) leaders[static_cast<size_t>(placement.hostOf[static_cast<size_t>(root)])] = root;
  return leaders;
}

int localLeader(const Comm& comm, const std::vector<int>& leaders) {
  const Placement& pl = comm.placement();
  return pl.localIndex(leaders[static_cast<size_t>(pl.hostOf[static_cast<size_t>(comm.rank())])]);
}

bool isLeader(const Comm& comm, const std::vector<int>& leaders) {
  const Placement& pl = comm.placement();
  return leaders[static_cast<size_t>(pl.hostOf[static_cast<size_t>(comm.rank())])] == comm.rank();
}

}  // namespace meshcomm::collectives::hierarchical

// Which rank leads each host in the hierarchical variants. Those run on
// groups spread over several hosts with several ranks on some: shared
// memory among the ranks of each host, TCP among one leader per host. Only
// the leaders' traffic crosses the network, once per host instead of once
// per rank. The variants themselves live with their families (all_reduce/,
// broadcast/, reduce/, barrier/), each opening with its schedule.
//
// Thread-safety: pure functions of the group's placement.
#pragma once

#include <vector>

#include "collectives/comm.h"

namespace meshcomm::collectives::hierarchical {

// The leader of every host: `root` for the root's host, else its lowest
// rank (pass root = -1 for a collective without a root).
std::vector<int> leadersFor(const Placement& placement, int root);

// This host's leader as a local rank of its host domain.
int localLeader(const Comm& comm, const std::vector<int>& leaders);

// Whether this rank leads its host.
bool isLeader(const Comm& comm, const std::vector<int>& leaders);

}  // namespace meshcomm::collectives::hierarchical

#include "transport/placement.h"

#include <fstream>
#include <map>

#include "common/env.h"
#include "common/socket.h"

namespace meshcomm {

Placement Placement::fromHostIds(const std::vector<std::string>& hostIdOfRank) {
  Placement p;
  std::map<std::string, int> indexOf;  // host id -> host index, in order of appearance
  for (const std::string& id : hostIdOfRank) {
    auto [it, fresh] = indexOf.emplace(id, static_cast<int>(p.hosts.size()));
    if (fresh) p.hosts.emplace_back();
    p.hosts[static_cast<size_t>(it->second)].push_back(static_cast<int>(p.hostOf.size()));
    p.hostOf.push_back(it->second);
  }
  return p;
}

int Placement::localIndex(int groupRank) const {
  const auto& members = hosts[static_cast<size_t>(hostOf[static_cast<size_t>(groupRank)])];
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == groupRank) return static_cast<int>(i);
  }
  return -1;
}

Route routeOf(const Placement& placement, bool hostDomains) {
  if (!hostDomains || placement.hostOf.size() <= 1) return Route::kFlat;
  if (placement.singleHost()) return Route::kOnHost;
  return placement.onePerHost() ? Route::kFlat : Route::kHierarchical;
}

const char* routeName(Route route) {
  // In the order of Route's values.
  static constexpr const char* kNames[] = {
      "messages between every rank (no two share a host, or no host domain)",
      "the domain of the one host they share",
      "each host's domain within hosts and messages between them"};
  return kNames[static_cast<size_t>(route)];
}

std::string localHostId() {
  if (auto id = envString("MESHCOMM_HOST_ID"); id && !id->empty()) return *id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string bootId;
  std::getline(boot, bootId);
  return hostName() + "/" + bootId;
}

}  // namespace meshcomm

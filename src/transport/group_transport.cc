#include "transport/group_transport.h"

#include "meshcomm/error.h"
#include "transport/registry.h"
#include "transport/routed_transport.h"

namespace meshcomm {

GroupTransport createGroupTransport(const LinkSetup& groupSetup) {
  // One matcher for all the links: a receive from any peer must see the
  // messages of every link, and the buffering limit is the group's.
  LinkSetup setup = groupSetup;
  setup.matcher = std::make_shared<ReceiveMatcher>(setup.maxUnexpectedBytes);
  GroupTransport group;
  group.placement = setup.placement;
  const size_t members = setup.worldRanks.size();

  std::vector<std::unique_ptr<Transport>> links;
  // Index into `links` of each peer's transport; -1 while none reaches it.
  std::vector<int> linkOf(members, -1);
  bool hostDomainsInUse = false;
  for (const TransportKind& kind : transportKinds()) {
    Link link = kind.setUp(setup);
    hostDomainsInUse = hostDomainsInUse || link.hostDomainsInUse;
    if (link.hostDomain) {
      if (group.hostDomain) {
        throw Error("creating group " + setup.groupName + ": two transport kinds (" +
                    group.hostDomain->kind() + " and " + link.hostDomain->kind() +
                    ") offer this host's domain; turn one of them off");
      }
      group.hostDomain = std::move(link.hostDomain);
    }
    if (!link.transport) continue;
    for (size_t peer = 0; peer < members; ++peer) {
      if (link.reaches[peer]) linkOf[peer] = static_cast<int>(links.size());
    }
    links.push_back(std::move(link.transport));
  }
  for (size_t peer = 0; peer < members; ++peer) {
    if (linkOf[peer] < 0 && static_cast<int>(peer) != setup.groupRank) {
      throw Error("creating group " + setup.groupName + ": no transport reaches rank " +
                  std::to_string(peer));
    }
  }
  if (links.empty()) throw Error("creating group " + setup.groupName + ": no transport set up");
  group.route = routeOf(group.placement, hostDomainsInUse);
  group.transport = links.size() == 1
                        ? std::move(links.front())
                        : std::make_unique<RoutedTransport>(std::move(links), std::move(linkOf),
                                                            setup.matcher);
  return group;
}

}  // namespace meshcomm

// Link: one kind of transport set up for one group — this rank's end of it,
// reaching some of the group's ranks. Each kind (a folder under
// src/transport/) provides a function that sets up its link;
// transport/registry.cc lists the kinds and transport/group_transport.cc
// composes their links into the one Transport a group uses. Besides
// messages, a link may offer a capability: a domain of this host's ranks
// on which the group's collectives run directly (transport/host_domain.h).
//
// Thread-safety: setting up a link is collective over the group's members
// (each calls it once, from one thread); the Link is then owned by the group.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "meshcomm/store.h"
#include "transport/inbox.h"
#include "transport/peer_monitor.h"
#include "transport/placement.h"
#include "transport/host_domain.h"
#include "transport/transport.h"

namespace meshcomm {

// Everything a kind may need to set up its link.
struct LinkSetup {
  std::string groupName;
  int groupRank = 0;
  std::vector<int> worldRanks;  // by group rank
  Placement placement;
  std::shared_ptr<Store> groupStore;  // keys private to this incarnation of the group
  std::shared_ptr<PeerMonitor> monitor;
  std::chrono::milliseconds timeout{0};  // for the set-up's own waits
  std::string advertiseHost;             // where peers on other hosts reach this rank
  std::string authToken;                 // empty: connections are not authenticated
  std::chrono::microseconds spin{50};    // busy-wait before sleeping
  size_t maxUnexpectedBytes = kDefaultMaxUnexpectedBytes;
  // Shared by the inboxes of every link of the group; made by
  // createGroupTransport from maxUnexpectedBytes.
  std::shared_ptr<ReceiveMatcher> matcher;
  bool oversubscribed = false;  // this host's ranks of the job outnumber its cores
  Inbox::Describe describeSignature;
};

struct Link {
  // Set by a kind that offers an on-host domain: this host's domain (null
  // on a host with one member), and whether the group runs its collectives
  // on such domains at all (the same on every rank).
  // Declared before `transport`, which may refer to it.
  std::unique_ptr<HostDomain> hostDomain;
  bool hostDomainsInUse = false;
  // Null when this rank reaches no peer through this kind.
  std::unique_ptr<Transport> transport;
  // By group rank: whether `transport` carries messages to that rank.
  std::vector<bool> reaches;
};

using LinkSetUp = Link (*)(const LinkSetup& setup);

}  // namespace meshcomm

// The factory of a group's transport: sets up every registered kind's link
// (transport/registry.h) for the group's placement and composes them into
// one Transport that reaches every member, computing the group's route once.
//
// Thread-safety: createGroupTransport is collective over the group's
// members; the result is owned by the group.
#pragma once

#include <memory>

#include "transport/link.h"
#include "transport/placement.h"
#include "transport/host_domain.h"
#include "transport/transport.h"

namespace meshcomm {

struct GroupTransport {
  Placement placement;
  Route route = Route::kFlat;
  // This host's domain, for the collectives that run on it directly; null
  // when no kind offers one or this host has one member. Declared before
  // `transport`, which may refer to it, so it is destroyed after.
  std::unique_ptr<HostDomain> hostDomain;
  std::unique_ptr<Transport> transport;
};

// Collective over the group's members. Throws what a kind's set-up throws
// (Timeout when a member never sets up its part, Error when no kind
// reaches a member).
GroupTransport createGroupTransport(const LinkSetup& setup);

}  // namespace meshcomm

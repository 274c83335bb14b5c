// The registry of on-host kinds: the collectives each kind of host domain
// (transport/host_domain.h) runs. Adding an on-host kind is a folder under
// src/transport/ whose link offers the domain (transport/link.h), one line
// in transport/registry.cc, a folder under src/host/ implementing
// collectives/host_collectives.h, and one line in host/registry.cc
// (docs/ARCHITECTURE.md).
//
// Thread-safety: the registry is a constant table.
#pragma once

#include "collectives/host_collectives.h"
#include "transport/host_domain.h"

namespace meshcomm::host {

// The collectives of `domain`'s kind. Throws Error if no kind of that name
// is registered.
const HostCollectives& collectivesFor(const HostDomain& domain);

}  // namespace meshcomm::host

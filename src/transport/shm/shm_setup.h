// Setting up a group's shared memory: the segment each host's members map,
// and the shared-memory link (transport/link.h) through it.
//
// On every host with two or more members, the member with the lowest group
// rank creates the segment and publishes its name in the group's store;
// the others map it. If any host fails to create one (or has
// MESHCOMM_SHM=0), no host uses shared memory, so every rank picks the same
// algorithms.
//
// Thread-safety: plain functions; safe to call concurrently for different
// groups.
#pragma once

#include "transport/link.h"

namespace meshcomm {

// Collective over the group's members (every one calls it). The link
// reaches the other ranks of this host and carries the host's domain.
// Throws Timeout if a host's first member never publishes its segment,
// InvalidArgument for unusable MESHCOMM_SHM_* settings.
Link setUpSharedMemoryLink(const LinkSetup& setup);

}  // namespace meshcomm

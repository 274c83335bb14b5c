// Setting up a group's shared memory: which members share a host, and the
// segment each such host's members map.
//
// A host is identified by MESHCOMM_HOST_ID if set (tests that emulate
// several hosts on one machine set it), else by hostname and boot id. On
// every host with two or more members, the member with the lowest group
// rank creates the segment and publishes its name in the group's store;
// the others map it. If any host fails to create one (or has
// MESHCOMM_SHM=0), no host uses shared memory, so every rank picks the same
// algorithms.
//
// Thread-safety: plain functions; safe to call concurrently for different
// groups.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/placement.h"
#include "meshcomm/store.h"
#include "transport/peer_monitor.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm {

// This machine's identity for placement purposes.
std::string localHostId();

struct ShmSetupOptions {
  std::string groupName;
  int groupRank = 0;
  std::vector<int> worldRanks;  // by group rank
  Placement placement;
  std::shared_ptr<Store> groupStore;
  std::shared_ptr<PeerMonitor> monitor;
  std::chrono::milliseconds timeout{0};
  // Ranks of the whole job on this host outnumber its usable CPUs.
  bool oversubscribed = false;
  std::function<std::string(const MessageSignature&, uint64_t)> describeSignature;
};

struct ShmSetup {
  bool enabled = false;                // the group-wide decision
  std::unique_ptr<ShmDomain> domain;   // this host's, when enabled and it has >= 2 members
};

// Collective over the group's members (every one calls it). Throws Timeout
// if a host's first member never publishes its segment.
ShmSetup setUpSharedMemory(const ShmSetupOptions& options);

}  // namespace meshcomm

// Placement: which ranks of a group share a host, and the route that
// follows from it and from the links' capabilities: on-host when the whole
// group is on one host with a domain (transport/host_domain.h),
// hierarchical (the host's domain within hosts, messages between them)
// when several hosts have several ranks, flat (messages between every
// rank) otherwise. A group's
// placement and route are computed once, when its transport is built
// (transport/group_transport.h), the same on every rank.
//
// Thread-safety: immutable after construction; localHostId() is a pure
// function of the environment and the machine.
#pragma once

#include <string>
#include <vector>

namespace meshcomm {

struct Placement {
  // Host index of each group rank. Hosts are numbered in order of their
  // lowest group rank, so every rank derives the same numbering.
  std::vector<int> hostOf;
  // Group ranks of each host, ascending.
  std::vector<std::vector<int>> hosts;

  // From any host identity per group rank (equal strings: same host).
  static Placement fromHostIds(const std::vector<std::string>& hostIdOfRank);

  int hostCount() const { return static_cast<int>(hosts.size()); }
  bool singleHost() const { return hosts.size() == 1; }
  bool onePerHost() const { return hosts.size() == hostOf.size(); }
  // Index of `groupRank` among the ranks of its host.
  int localIndex(int groupRank) const;
};

// How a group's collectives can reach its ranks.
enum class Route {
  kFlat,          // messages between every rank: no two share a host, or no domain
  kOnHost,        // every rank on this host, in its domain
  kHierarchical,  // several hosts, several ranks on some
};

// The route of a group with this placement. `hostDomains`: every host with
// several members has a domain (a group-wide decision).
Route routeOf(const Placement& placement, bool hostDomains);
const char* routeName(Route route);

// This machine's identity for placement: MESHCOMM_HOST_ID if set (tests
// emulate several hosts on one machine with it), else hostname and boot id.
std::string localHostId();

}  // namespace meshcomm

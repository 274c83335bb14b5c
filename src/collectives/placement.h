// Placement: which ranks of a group share a host. It decides between the
// shared-memory algorithms (one host), the hierarchical ones (several hosts
// with several ranks on some) and the flat TCP ones (one rank per host).
//
// Thread-safety: immutable after construction.
#pragma once

#include <vector>

namespace meshcomm {

struct Placement {
  // Host index of each group rank. Hosts are numbered in order of their
  // lowest group rank, so every rank derives the same numbering.
  std::vector<int> hostOf;
  // Group ranks of each host, ascending.
  std::vector<std::vector<int>> hosts;

  static Placement fromHostIds(const std::vector<int>& hostIdOfRank);

  int hostCount() const { return static_cast<int>(hosts.size()); }
  bool singleHost() const { return hosts.size() == 1; }
  bool onePerHost() const { return hosts.size() == hostOf.size(); }
  // Index of `groupRank` among the ranks of its host.
  int localIndex(int groupRank) const;
};

inline Placement Placement::fromHostIds(const std::vector<int>& hostIdOfRank) {
  Placement p;
  std::vector<int> indexOfId;  // host id -> host index, grown as ids appear
  for (int id : hostIdOfRank) {
    if (id >= static_cast<int>(indexOfId.size())) indexOfId.resize(static_cast<size_t>(id) + 1, -1);
    int& index = indexOfId[static_cast<size_t>(id)];
    if (index < 0) {
      index = static_cast<int>(p.hosts.size());
      p.hosts.emplace_back();
    }
    p.hosts[static_cast<size_t>(index)].push_back(static_cast<int>(p.hostOf.size()));
    p.hostOf.push_back(index);
  }
  return p;
}

inline int Placement::localIndex(int groupRank) const {
  const auto& members = hosts[static_cast<size_t>(hostOf[static_cast<size_t>(groupRank)])];
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == groupRank) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace meshcomm

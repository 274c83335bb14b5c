// Agreeing, through the store, on which members of a group survive, so
// that every survivor builds the same smaller group (World::shrinkGroup).
//
// Each survivor posts "alive/<world rank>" (with the ranks it was asked to
// leave out) under the attempt's key prefix. A survivor proposes once every
// member is accounted for (posted, lost, departed or left out) or the
// deadline passes: its proposal is the posted ranks minus every rank any
// poster asked to leave out. The first proposal is written with
// compare-and-set to one decision key and every survivor adopts that one,
// so a failure racing with the shrink (a rank dying after it posted, one
// posting late) can change which set wins, never that all agree on it.
//
// Thread-safety: a free function; concurrent calls for the same attempt
// come from different processes.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "meshcomm/process_group.h"
#include "meshcomm/store.h"

namespace meshcomm {

struct SurvivorQuery {
  std::string groupName;           // for messages
  std::vector<int> members;        // world ranks of the group being shrunk
  int worldRank = 0;               // this rank
  std::vector<int> excludeRanks;   // world ranks this rank wants left out
  std::chrono::milliseconds timeout{0};
};

// jobStore: the job's keys (lost and departed ranks live there);
// attemptStore: keys private to this shrink attempt of this group.
// Returns the agreed world ranks, sorted. Throws Aborted when this rank is
// not among them (left out, or it posted after the decision), StoreError
// when the store is gone.
std::vector<int> agreeOnSurvivors(Store& jobStore, Store& attemptStore,
                                  const SurvivorQuery& query);

// One attempt at shrinking a group, as World::shrinkGroup sets it up.
struct ShrinkAttempt {
  std::string keyPrefix;          // job-store prefix private to this attempt
  int worldRank = 0;              // this rank
  std::vector<int> excludeRanks;  // world ranks; checked to be members
  std::chrono::milliseconds timeout{0};  // 0: the group's
};

// The part of World::shrinkGroup that needs no World internals: checks
// the excluded ranks (InvalidArgument), agrees on the survivors and aborts
// the old group, saying why, so a member left out but alive learns from its
// next operation on it that the others moved on. Returns the agreed world
// ranks; rethrows agreeOnSurvivors' Aborted on a rank left out.
std::vector<int> agreeToShrink(ProcessGroup& group, const std::shared_ptr<Store>& jobStore,
                               const ShrinkAttempt& attempt);

// The shrunk group's name, "<root>#<generation>[.<attempt>]": the same on
// every survivor, and never the name of a group created otherwise.
std::string shrunkGroupName(const std::string& oldName, int attempt);

}  // namespace meshcomm

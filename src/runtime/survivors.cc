#include "runtime/survivors.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <thread>

#include "common/deadline.h"
#include "meshcomm/error.h"
#include "runtime/group.h"
#include "transport/peer_monitor.h"

namespace meshcomm {
namespace {

constexpr auto kPollEvery = std::chrono::milliseconds(2);
constexpr char kDecisionKey[] = "decision";

std::string joinRanks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += std::to_string(r) + ",";
  return out;
}

std::vector<int> parseRanks(const Bytes& value) {
  std::vector<int> ranks;
  std::stringstream ss(std::string(value.begin(), value.end()));
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) ranks.push_back(std::stoi(item));
  }
  return ranks;
}

Bytes toBytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

std::string aliveKey(int worldRank) { return "alive/" + std::to_string(worldRank); }

// Ranks the job's store lists under `key` ("<rank>," each).
std::set<int> listedRanks(Store& jobStore, const std::string& key) {
  if (!jobStore.check({key})) return {};
  auto ranks = parseRanks(jobStore.get(key));
  return {ranks.begin(), ranks.end()};
}

std::string describe(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) {
    if (!out.empty()) out += ", ";
    out += std::to_string(r);
  }
  return "[" + out + "]";
}

}  // namespace

std::vector<int> agreeOnSurvivors(Store& jobStore, Store& attemptStore,
                                  const SurvivorQuery& query) {
  attemptStore.set(aliveKey(query.worldRank), toBytes(joinRanks(query.excludeRanks)));
  const std::set<int> excludedHere(query.excludeRanks.begin(), query.excludeRanks.end());
  const Deadline deadline = Deadline::after(query.timeout);
  for (;;) {
    if (attemptStore.check({kDecisionKey})) break;
    std::set<int> gone = listedRanks(jobStore, PeerMonitor::lostRanksKey());
    for (int r : listedRanks(jobStore, PeerMonitor::departedRanksKey())) gone.insert(r);
    bool everyoneAccounted = true;
    for (int m : query.members) {
      if (gone.count(m) != 0 || excludedHere.count(m) != 0) continue;
      if (!attemptStore.check({aliveKey(m)})) {
        everyoneAccounted = false;
        break;
      }
    }
    if (everyoneAccounted || deadline.expired()) {
      // Propose what is known now: the posted members, minus what any
      // poster wants left out and what the store knows is gone.
      std::vector<int> posted;
      std::set<int> leftOut;
      for (int m : query.members) {
        if (gone.count(m) != 0 || !attemptStore.check({aliveKey(m)})) continue;
        posted.push_back(m);
        for (int r : parseRanks(attemptStore.get(aliveKey(m)))) leftOut.insert(r);
      }
      std::vector<int> proposal;
      for (int m : posted) {
        if (leftOut.count(m) == 0) proposal.push_back(m);
      }
      attemptStore.compareSet(kDecisionKey, Bytes{}, toBytes(joinRanks(proposal)));
      break;
    }
    std::this_thread::sleep_for(kPollEvery);
  }
  std::vector<int> agreed = parseRanks(attemptStore.get(kDecisionKey));
  std::sort(agreed.begin(), agreed.end());
  if (!std::binary_search(agreed.begin(), agreed.end(), query.worldRank)) {
    throw Aborted("shrinking group " + query.groupName + ": world rank " +
                  std::to_string(query.worldRank) +
                  " is not in the new group, which the survivors agreed is world ranks " +
                  describe(agreed) +
                  " (this rank was excluded, or answered after the set was closed); it can no "
                  "longer communicate with them");
  }
  if (agreed.empty()) throw Aborted("shrinking group " + query.groupName + ": no survivor");
  return agreed;
}

std::vector<int> agreeToShrink(ProcessGroup& group, const std::shared_ptr<Store>& jobStore,
                               const ShrinkAttempt& attempt) {
  for (int r : attempt.excludeRanks) {
    if (group.toGroupRank(r) < 0) {
      throw InvalidArgument("shrink_group: exclude_ranks holds world rank " + std::to_string(r) +
                            ", which is not a member of group " + group.name());
    }
  }
  SurvivorQuery query;
  query.groupName = group.name();
  query.members = group.worldRanks();
  query.worldRank = attempt.worldRank;
  query.excludeRanks = attempt.excludeRanks;
  query.timeout = attempt.timeout.count() > 0 ? attempt.timeout : group.timeout();
  PrefixStore attemptStore(attempt.keyPrefix, jobStore);
  std::vector<int> survivors;
  try {
    survivors = agreeOnSurvivors(*jobStore, attemptStore, query);
  } catch (const Aborted&) {
    group.impl()->abort("it was left out when the group shrank");
    throw;
  }
  group.impl()->abort("the group shrank to world ranks " + describe(survivors));
  return survivors;
}

std::string shrunkGroupName(const std::string& oldName, int attempt) {
  const size_t mark = oldName.rfind('#');
  const std::string root = oldName.substr(0, mark);
  const int generation = mark == std::string::npos ? 1 : std::stoi(oldName.substr(mark + 1)) + 1;
  // Built by appending: GCC 12 warns falsely (-Wrestrict) about some
  // inlined literal + std::string concatenations.
  std::string name = root;
  name += '#';
  name += std::to_string(generation);
  if (attempt > 0) {
    name += '.';
    name += std::to_string(attempt);
  }
  return name;
}

}  // namespace meshcomm

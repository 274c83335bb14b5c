#include "runtime/arrival.h"

#include <algorithm>
#include <vector>

#include "common/deadline.h"
#include "meshcomm/error.h"

namespace meshcomm {
namespace {

// How often a waiting rank looks for the store host's verdict.
constexpr auto kSlice = std::chrono::milliseconds(200);
// How long the store host keeps the store up for the others to read it.
constexpr auto kLinger = std::chrono::seconds(3);

constexpr char kArrived[] = "join/arrived";
constexpr char kVerdict[] = "join/verdict";

std::string rankKey(int r) { return "rank/" + std::to_string(r); }
std::string seenKey(int r) { return "join/seen/" + std::to_string(r); }
std::string refusedKey(int r) { return "join/refused/" + std::to_string(r); }

std::string text(const Bytes& b) { return std::string(b.begin(), b.end()); }
Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

// "1 of 3 ranks did not arrive within 3000 ms (missing: 2)", and the ranks
// that did arrive.
std::string missingRanks(Store& store, int size, std::chrono::milliseconds timeout,
                         std::vector<int>* arrived) {
  std::string missing;
  int count = 0;
  for (int r = 0; r < size; ++r) {
    if (store.check({rankKey(r)})) {
      arrived->push_back(r);
      continue;
    }
    if (++count <= 16) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  if (count > 16) missing += ", ...";
  return "joining the job: " + std::to_string(count) + " of " + std::to_string(size) +
         " ranks did not arrive within " + std::to_string(timeout.count()) + " ms (missing: " +
         missing + "); start every rank, with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE";
}

}  // namespace

void awaitEveryRank(Store& jobStore, int rank, int size, bool hostsStore,
                    const std::string& storeHost, std::chrono::milliseconds timeout) {
  const Deadline deadline = Deadline::after(timeout);
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(rankKey(r));
  int64_t arrivedSoFar = jobStore.add(kArrived, 1);
  auto storeGone = [&](const StoreError& e, int64_t arrived) {
    throw StoreError("joining the job: the store host (" + storeHost + ") is gone: " +
                     std::string(e.what()) + ". Its process ended or its host became unreachable while " +
                     std::to_string(arrived) + " of " + std::to_string(size) +
                     " ranks had arrived; look at " + storeHost + "'s output first");
  };
  for (;;) {
    const auto slice = std::max(std::chrono::milliseconds(1), std::min(kSlice, deadline.remaining()));
    try {
      jobStore.wait(keys, slice);
      return;
    } catch (const Timeout&) {
      // Not everyone yet: look for a verdict, then wait again.
    } catch (const StoreError& e) {
      if (hostsStore) throw;
      storeGone(e, arrivedSoFar);
    }
    try {
      if (!hostsStore && jobStore.check({kVerdict})) {
        const std::string verdict = text(jobStore.get(kVerdict));
        jobStore.set(seenKey(rank), bytes("1"));
        throw Timeout(verdict);
      }
      arrivedSoFar = jobStore.add(kArrived, 0);
      if (!deadline.expired()) continue;
      std::vector<int> arrived;
      const std::string verdict = missingRanks(jobStore, size, timeout, &arrived);
      if (!hostsStore) {
        // The store host need not wait for this rank to read its verdict.
        jobStore.set(seenKey(rank), bytes("1"));
        throw Timeout(verdict);
      }
      jobStore.set(kVerdict, bytes(verdict));
      std::vector<std::string> readers;
      for (int r : arrived) {
        if (r != rank) readers.push_back(seenKey(r));
      }
      try {
        if (!readers.empty()) jobStore.wait(readers, kLinger);
      } catch (const Timeout&) {
        // A rank that came but no longer looks: it failed on its own.
      }
      throw Timeout(verdict);
    } catch (const StoreError& e) {
      if (hostsStore) throw;
      storeGone(e, arrivedSoFar);
    }
  }
}

void refuseJoin(Store& jobStore, int rank, int size, bool hostsStore, const std::string& why) {
  try {
    if (!hostsStore) {
      jobStore.set(refusedKey(rank), bytes("1"));
    } else {
      std::vector<std::string> others;
      for (int r = 0; r < size; ++r) {
        if (r != rank) others.push_back(refusedKey(r));
      }
      if (!others.empty()) jobStore.wait(others, kLinger);
    }
  } catch (const Error&) {
    // A rank that no longer answers, or a store already gone: the verdict
    // below is this rank's either way.
  }
  throw InvalidArgument(why);
}

}  // namespace meshcomm

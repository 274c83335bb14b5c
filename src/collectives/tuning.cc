#include "collectives/tuning.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "common/env.h"
#include "meshcomm/error.h"

namespace meshcomm {
namespace {

struct Named {
  const char* name;
  Algorithm algo;
};
constexpr Named kNames[] = {
    {"auto", Algorithm::kAuto},
    {"ring", Algorithm::kRing},
    {"recursive_doubling", Algorithm::kRecursiveDoubling},
    {"binomial_tree", Algorithm::kBinomialTree},
    {"chain", Algorithm::kChain},
    {"reduce_scatter_gather", Algorithm::kReduceScatterGather},
    {"shm_oneshot", Algorithm::kShmOneShot},
    {"shm_rsag", Algorithm::kShmReduceScatter},
    {"shm_single_copy", Algorithm::kShmSingleCopy},
    {"shm", Algorithm::kShm},
    {"hierarchical", Algorithm::kHierarchical},
};

bool runsOn(Algorithm algo, Route route) {
  switch (algo) {
    case Algorithm::kShmOneShot:
    case Algorithm::kShmReduceScatter:
    case Algorithm::kShmSingleCopy:
    case Algorithm::kShm: return route == Route::kShm;
    case Algorithm::kHierarchical: return route == Route::kHierarchical;
    default: return true;  // the TCP algorithms run anywhere
  }
}

// The forced algorithm for `op` from MESHCOMM_ALGO_<OP>, checked against
// the algorithms that implement it.
// `value` is the variable's value, read once per process by the caller
// (scanning the environment on every call would cost a small collective a
// tenth of its time).
Algorithm forced(const char* variable, const std::optional<std::string>& value,
                 std::initializer_list<Algorithm> allowed, Route route, int groupSize) {
  if (!value || value->empty()) return Algorithm::kAuto;
  for (const auto& n : kNames) {
    if (*value != n.name) continue;
    if (n.algo == Algorithm::kAuto) return n.algo;
    for (Algorithm a : allowed) {
      if (a != n.algo) continue;
      // A group of one runs nothing, so any choice is moot there.
      if (groupSize > 1 && !runsOn(a, route)) {
        throw InvalidArgument(std::string(variable) + "='" + *value + "' cannot run here: this " +
                              "group's ranks use " + routeName(route));
      }
      return a;
    }
  }
  std::string choices = "auto";
  for (Algorithm a : allowed) choices += std::string(", ") + algorithmName(a);
  throw InvalidArgument(std::string(variable) + "='" + *value + "' is not one of: " + choices);
}

}  // namespace

const char* algorithmName(Algorithm algo) {
  for (const auto& n : kNames) {
    if (n.algo == algo) return n.name;
  }
  return "unknown";
}

Algorithm chooseAllReduce(size_t bytes, int groupSize, Route route) {
  static const std::optional<std::string> kValue = envString("MESHCOMM_ALGO_ALLREDUCE");
  Algorithm f = forced("MESHCOMM_ALGO_ALLREDUCE", kValue,
                       {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kShmOneShot,
                        Algorithm::kShmReduceScatter, Algorithm::kShmSingleCopy,
                        Algorithm::kHierarchical},
                       route, groupSize);
  return f != Algorithm::kAuto ? f : defaultAllReduce(bytes, groupSize, route);
}

Algorithm defaultAllReduce(size_t bytes, int groupSize, Route route) {
  if (route == Route::kHierarchical) return Algorithm::kHierarchical;
  if (route == Route::kShm) {
    // One-shot reads P slots per rank but needs one round; reduce-scatter
    // reads one, in two rounds. docs/tuning.md has the crossover.
    size_t oneShotUpTo = groupSize <= 2 ? size_t{256} << 10 : groupSize <= 4 ? 64 << 10 : 16 << 10;
    // Single copies (kShmSingleCopy) lose to the segment on the machine of
    // docs/tuning.md, where pinning the peer's pages is expensive; they
    // stay available by name.
    return bytes <= oneShotUpTo ? Algorithm::kShmOneShot : Algorithm::kShmReduceScatter;
  }
  // Recursive doubling moves the whole buffer log2(P) times but needs only
  // log2(P) latencies; the ring moves 2(P-1)/P of it in 2(P-1) steps.
  if (groupSize <= 2) return bytes <= (size_t{1} << 20) ? Algorithm::kRecursiveDoubling
                                                         : Algorithm::kRing;
  return bytes <= 64 * 1024 ? Algorithm::kRecursiveDoubling : Algorithm::kRing;
}

Algorithm chooseBroadcast(size_t bytes, int groupSize, Route route) {
  static const std::optional<std::string> kValue = envString("MESHCOMM_ALGO_BROADCAST");
  Algorithm f = forced("MESHCOMM_ALGO_BROADCAST", kValue,
                       {Algorithm::kBinomialTree, Algorithm::kChain, Algorithm::kShm,
                        Algorithm::kHierarchical},
                       route, groupSize);
  return f != Algorithm::kAuto ? f : defaultBroadcast(bytes, groupSize, route);
}

Algorithm defaultBroadcast(size_t bytes, int groupSize, Route route) {
  if (route == Route::kShm) return Algorithm::kShm;
  if (route == Route::kHierarchical) return Algorithm::kHierarchical;
  // A pipelined chain keeps every link busy once the pipe is full; the
  // tree wins while latency dominates.
  return (bytes >= (size_t{1} << 20) && groupSize > 2) ? Algorithm::kChain
                                                       : Algorithm::kBinomialTree;
}

Algorithm chooseReduce(size_t bytes, int groupSize, Route route) {
  static const std::optional<std::string> kValue = envString("MESHCOMM_ALGO_REDUCE");
  Algorithm f = forced("MESHCOMM_ALGO_REDUCE", kValue,
                       {Algorithm::kBinomialTree, Algorithm::kReduceScatterGather, Algorithm::kShm,
                        Algorithm::kHierarchical},
                       route, groupSize);
  return f != Algorithm::kAuto ? f : defaultReduce(bytes, groupSize, route);
}

Algorithm defaultReduce(size_t bytes, int groupSize, Route route) {
  if (route == Route::kShm) return Algorithm::kShm;
  if (route == Route::kHierarchical) return Algorithm::kHierarchical;
  return (bytes >= 256 * 1024 && groupSize > 2) ? Algorithm::kReduceScatterGather
                                                : Algorithm::kBinomialTree;
}

size_t pipelineChunkBytes(size_t bytes) {
  static const size_t configured = static_cast<size_t>(
      std::max<int64_t>(4096, envIntOr("MESHCOMM_CHUNK_BYTES", 1024 * 1024)));
  return std::min(std::max<size_t>(bytes, 1), configured);
}

bool streamOutput(size_t bytes) {
  // Below this the output may still be in cache when the caller reads it,
  // and streaming gains nothing measurable (docs/tuning.md).
  static const int64_t from = std::max<int64_t>(0, envIntOr("MESHCOMM_SHM_STREAM_BYTES", 4 << 20));
  return bytes >= static_cast<uint64_t>(from);
}

}  // namespace meshcomm

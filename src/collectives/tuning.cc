#include "collectives/tuning.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <string>

#include "common/check.h"
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
    {"halving_doubling", Algorithm::kHalvingDoubling},
    {"recursive_halving", Algorithm::kRecursiveHalving},
    {"binomial_tree", Algorithm::kBinomialTree},
    {"chain", Algorithm::kChain},
    {"reduce_scatter_gather", Algorithm::kReduceScatterGather},
    {"linear", Algorithm::kLinear},
    {"pairwise", Algorithm::kPairwise},
    {"dissemination", Algorithm::kDissemination},
    {"bruck", Algorithm::kBruck},
    {"shm_oneshot", Algorithm::kShmOneShot},
    {"shm_rsag", Algorithm::kShmReduceScatter},
    {"shm_single_copy", Algorithm::kShmSingleCopy},
    {"shm", Algorithm::kOnHost},
    {"hierarchical", Algorithm::kHierarchical},
};

bool runsOn(Algorithm algo, Route route) {
  switch (algo) {
    case Algorithm::kShmOneShot:
    case Algorithm::kShmReduceScatter:
    case Algorithm::kShmSingleCopy:
    case Algorithm::kOnHost: return route == Route::kOnHost;
    case Algorithm::kHierarchical: return route == Route::kHierarchical;
    default: return true;  // the TCP algorithms run anywhere
  }
}

// A set of algorithms, one bit each.
using AlgorithmSet = uint32_t;
template <class... Algorithms>
constexpr AlgorithmSet setOf(Algorithms... algos) {
  return ((AlgorithmSet{1} << static_cast<int>(algos)) | ...);
}
constexpr bool contains(AlgorithmSet set, Algorithm algo) {
  return ((set >> static_cast<int>(algo)) & 1) != 0;
}

// ---- The defaults, one rule per family -------------------------------------

Algorithm defaultAllReduce(size_t bytes, int groupSize, Route route) {
  if (route == Route::kHierarchical) return Algorithm::kHierarchical;
  if (route == Route::kOnHost) {
    // One-shot reads P slots per rank but needs one round; reduce-scatter
    // reads one, in two rounds. docs/tuning.md has the crossover.
    size_t oneShotUpTo = groupSize <= 2 ? size_t{256} << 10 : groupSize <= 4 ? 64 << 10 : 16 << 10;
    // Single copies (kShmSingleCopy) lose to the segment on the machine of
    // docs/tuning.md, where pinning the peer's pages is expensive; they
    // stay available by name.
    return bytes <= oneShotUpTo ? Algorithm::kShmOneShot : Algorithm::kShmReduceScatter;
  }
  // Recursive doubling moves the whole buffer log2(P) times but needs only
  // log2(P) latencies; the ring moves 2(P-1)/P of it in 2(P-1) steps, its
  // reduction overlapping the transfer chunk by chunk; halving-doubling
  // moves what the ring moves in 2 log2(P) steps, but needs a power of two
  // (the fold of the others costs two whole-buffer transfers). Crossovers
  // measured over loopback in docs/tuning.md.
  const bool powerOfTwo = (groupSize & (groupSize - 1)) == 0;
  const size_t doublingUpTo = groupSize <= 2 ? size_t{512} << 10 : size_t{64} << 10;
  const size_t halvingBelow = groupSize <= 4 ? size_t{4} << 20 : size_t{512} << 10;
  if (bytes <= doublingUpTo) return Algorithm::kRecursiveDoubling;
  if (powerOfTwo && bytes < halvingBelow) return Algorithm::kHalvingDoubling;
  return Algorithm::kRing;
}

Algorithm defaultBroadcast(size_t bytes, int groupSize, Route route) {
  if (route == Route::kOnHost) return Algorithm::kOnHost;
  if (route == Route::kHierarchical) return Algorithm::kHierarchical;
  // A pipelined chain keeps every link busy once the pipe is full; the
  // tree wins while latency dominates.
  return (bytes >= (size_t{1} << 20) && groupSize > 2) ? Algorithm::kChain
                                                       : Algorithm::kBinomialTree;
}

Algorithm defaultReduce(size_t bytes, int groupSize, Route route) {
  if (route == Route::kOnHost) return Algorithm::kOnHost;
  if (route == Route::kHierarchical) return Algorithm::kHierarchical;
  return (bytes >= 256 * 1024 && groupSize > 2) ? Algorithm::kReduceScatterGather
                                                : Algorithm::kBinomialTree;
}

Algorithm defaultAllGather(size_t bytes, int, Route route) {
  if (route == Route::kOnHost) return Algorithm::kOnHost;
  // Bruck's log2(P) steps move the same bytes as the ring's P-1; past
  // 1 MiB the steps' latency no longer shows, and the ring keeps one
  // neighbour's stream busy (docs/tuning.md).
  return bytes <= (size_t{1} << 20) ? Algorithm::kBruck : Algorithm::kRing;
}

Algorithm defaultReduceScatter(size_t bytes, int groupSize, Route route) {
  if (route == Route::kOnHost) return Algorithm::kOnHost;
  // Recursive halving moves what the ring moves in log2(P) steps instead
  // of P-1, on a power of two; the ring, which overlaps each chunk's
  // reduction with the next one's transfer, catches up from a few MiB of
  // input (docs/tuning.md).
  const bool powerOfTwo = (groupSize & (groupSize - 1)) == 0;
  const size_t halvingUpTo = groupSize <= 4 ? (size_t{4} << 20) - 1 : size_t{1} << 20;
  return powerOfTwo && groupSize > 2 && bytes <= halvingUpTo ? Algorithm::kRecursiveHalving
                                                              : Algorithm::kRing;
}

// The families with one algorithm per route: shared memory on one host,
// else their TCP algorithm over the whole group (only the barrier has a
// hierarchical form).
template <Algorithm kOverTcp>
Algorithm onHostOr(size_t, int, Route route) {
  return route == Route::kOnHost ? Algorithm::kOnHost : kOverTcp;
}

Algorithm defaultBarrier(size_t, int, Route route) {
  switch (route) {
    case Route::kOnHost: return Algorithm::kOnHost;
    case Route::kHierarchical: return Algorithm::kHierarchical;
    case Route::kFlat: break;
  }
  return Algorithm::kDissemination;
}

// ---- The table ---------------------------------------------------------------

struct Family {
  Opcode collective;
  // MESHCOMM_ALGO_<OP>, or null where the family has no choice to force.
  const char* variable;
  // Every algorithm the family implements: what the variable may name.
  AlgorithmSet algorithms;
  // The choice when nothing is forced.
  Algorithm (*byDefault)(size_t bytes, int groupSize, Route route);
};

// One row per collective, in opcode order.
using A = Algorithm;
constexpr Family kFamilies[] = {
    {Opcode::kAllReduce, "MESHCOMM_ALGO_ALLREDUCE",
     setOf(A::kRing, A::kRecursiveDoubling, A::kHalvingDoubling, A::kShmOneShot, A::kShmReduceScatter,
           A::kShmSingleCopy, A::kHierarchical),
     defaultAllReduce},
    {Opcode::kBroadcast, "MESHCOMM_ALGO_BROADCAST",
     setOf(A::kBinomialTree, A::kChain, A::kOnHost, A::kHierarchical), defaultBroadcast},
    {Opcode::kReduce, "MESHCOMM_ALGO_REDUCE",
     setOf(A::kBinomialTree, A::kReduceScatterGather, A::kOnHost, A::kHierarchical), defaultReduce},
    {Opcode::kAllGather, "MESHCOMM_ALGO_ALLGATHER", setOf(A::kRing, A::kBruck, A::kOnHost),
     defaultAllGather},
    {Opcode::kReduceScatter, "MESHCOMM_ALGO_REDUCESCATTER", setOf(A::kRing, A::kRecursiveHalving, A::kOnHost),
     defaultReduceScatter},
    {Opcode::kGather, nullptr, setOf(A::kLinear, A::kOnHost), onHostOr<A::kLinear>},
    {Opcode::kScatter, nullptr, setOf(A::kLinear, A::kOnHost), onHostOr<A::kLinear>},
    {Opcode::kAllToAll, nullptr, setOf(A::kPairwise, A::kOnHost), onHostOr<A::kPairwise>},
    {Opcode::kBarrier, nullptr, setOf(A::kDissemination, A::kOnHost, A::kHierarchical),
     defaultBarrier},
};
constexpr size_t kFamilyCount = std::size(kFamilies);

// The rows are in opcode order, so a call finds its row by index.
constexpr bool inOpcodeOrder() {
  for (size_t i = 0; i < kFamilyCount; ++i) {
    if (static_cast<size_t>(kFamilies[i].collective) != i + 1) return false;
  }
  return true;
}
static_assert(inOpcodeOrder(), "kFamilies must list the collectives in opcode order");

// The failures are out of line, so that the lookups every collective makes
// stay a few instructions.
[[noreturn, gnu::noinline, gnu::cold]] void noSuchCollective(Opcode collective) {
  MESHCOMM_CHECK(false, "no collective has opcode " << static_cast<int>(collective));
  std::abort();  // unreachable: the check throws
}

[[noreturn, gnu::noinline, gnu::cold]] void refuse(const std::string& what) {
  throw InvalidArgument(what);
}

[[noreturn, gnu::noinline, gnu::cold]] void refuseRoute(const Family& family, Algorithm forced,
                                                       Route route) {
  refuse(std::string(family.variable) + "='" + algorithmName(forced) +
         "' cannot run here: this group's ranks use " + routeName(route));
}

size_t familyIndex(Opcode collective) {
  const size_t index = static_cast<size_t>(collective) - 1;
  if (index >= kFamilyCount) [[unlikely]] noSuchCollective(collective);
  return index;
}

// What MESHCOMM_ALGO_<OP> forces.
struct Forced {
  Algorithm algo = Algorithm::kAuto;  // kAuto: nothing
  std::string error;                  // set: the value names no algorithm of the family
  std::string invalid;                // then: the value as written
};

Forced parse(const Family& family) {
  Forced out;
  if (family.variable == nullptr) return out;
  const std::optional<std::string> value = envString(family.variable);
  if (!value || value->empty()) return out;
  for (const auto& n : kNames) {
    if (*value != n.name) continue;
    if (n.algo == Algorithm::kAuto || contains(family.algorithms, n.algo)) {
      out.algo = n.algo;
      return out;
    }
  }
  std::string choices = "auto";
  for (const auto& n : kNames) {
    if (contains(family.algorithms, n.algo)) choices += std::string(", ") + n.name;
  }
  out.error = std::string(family.variable) + "='" + *value + "' is not one of: " + choices;
  out.invalid = *value;
  return out;
}

// The forced algorithm of the family at `index`, kAuto for none. The
// variables are parsed once per process: scanning the environment on
// every call would cost a small collective a tenth of its time.
const std::array<Forced, kFamilyCount>& forcedByFamily() {
  static const std::array<Forced, kFamilyCount> kForced = [] {
    std::array<Forced, kFamilyCount> out;
    for (size_t i = 0; i < kFamilyCount; ++i) out[i] = parse(kFamilies[i]);
    return out;
  }();
  return kForced;
}

Algorithm forcedAlgorithm(size_t index) {
  const Forced& forced = forcedByFamily()[index];
  if (!forced.error.empty()) [[unlikely]] refuse(forced.error);
  return forced.algo;
}

constexpr int64_t kDefaultChunkBytes = 1 << 20;
constexpr int64_t kDefaultPieceBytes = 4 << 20;

size_t configuredChunkBytes() {
  static const size_t configured = static_cast<size_t>(
      std::max<int64_t>(4096, envIntOr("MESHCOMM_CHUNK_BYTES", kDefaultChunkBytes)));
  return configured;
}

// Pieces of 4 MiB fit in the sockets' buffers as the kernel sizes them, so
// a leader's exchange moves while it works in shared memory; smaller ones
// add rounds, larger ones leave the link idle longer at the start and the
// end (docs/tuning.md). 0: no pieces.
size_t configuredPieceBytes() {
  static const size_t configured = static_cast<size_t>(
      std::max<int64_t>(0, envIntOr("MESHCOMM_HIER_PIECE_BYTES", kDefaultPieceBytes)));
  return configured;
}

// A value as it may travel in the join record: no spaces, no commas.
std::string plainText(std::string value) {
  for (char& c : value) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '_' || c == '.' || c == '-';
    if (!plain) c = '?';
  }
  return value;
}

}  // namespace

std::string settingsRanksMustShare() {
  std::string out;
  auto add = [&out](const char* variable, const std::string& value) {
    if (!out.empty()) out += ',';
    out.append(variable).append("=").append(value);
  };
  for (size_t i = 0; i < kFamilyCount; ++i) {
    const Forced& forced = forcedByFamily()[i];
    if (!forced.invalid.empty()) {
      add(kFamilies[i].variable, plainText(forced.invalid));
    } else if (forced.algo != Algorithm::kAuto) {
      add(kFamilies[i].variable, algorithmName(forced.algo));
    }
  }
  if (configuredChunkBytes() != static_cast<size_t>(kDefaultChunkBytes)) {
    add("MESHCOMM_CHUNK_BYTES", std::to_string(configuredChunkBytes()));
  }
  if (configuredPieceBytes() != static_cast<size_t>(kDefaultPieceBytes)) {
    add("MESHCOMM_HIER_PIECE_BYTES", std::to_string(configuredPieceBytes()));
  }
  return out;
}

const char* algorithmName(Algorithm algo) {
  for (const auto& n : kNames) {
    if (n.algo == algo) return n.name;
  }
  return "unknown";
}

Algorithm chooseAlgorithm(Opcode collective, size_t bytes, int groupSize, Route route) {
  const size_t index = familyIndex(collective);
  const Algorithm forced = forcedAlgorithm(index);
  if (forced == Algorithm::kAuto) [[likely]] {
    return kFamilies[index].byDefault(bytes, groupSize, route);
  }
  if (runsOn(forced, route)) return forced;
  // A group of one runs nothing, so any choice is moot there.
  if (groupSize > 1) refuseRoute(kFamilies[index], forced, route);
  return kFamilies[index].byDefault(bytes, groupSize, route);
}

Algorithm chooseStepAlgorithm(Opcode collective, size_t bytes, int groupSize, Route route) {
  const size_t index = familyIndex(collective);
  const Algorithm forced = forcedAlgorithm(index);
  return forced != Algorithm::kAuto && runsOn(forced, route)
             ? forced
             : kFamilies[index].byDefault(bytes, groupSize, route);
}

size_t pipelineChunkBytes(size_t bytes) {
  return std::min(std::max<size_t>(bytes, 1), configuredChunkBytes());
}

size_t hierarchicalPieceBytes(size_t bytes) {
  const size_t configured = configuredPieceBytes();
  if (configured == 0 || bytes <= configured) return 0;
  return configured;
}

bool streamOutput(size_t bytes) {
  // Below this the output may still be in cache when the caller reads it,
  // and streaming gains nothing measurable (docs/tuning.md).
  static const int64_t from = std::max<int64_t>(0, envIntOr("MESHCOMM_SHM_STREAM_BYTES", 4 << 20));
  return bytes >= static_cast<uint64_t>(from);
}

}  // namespace meshcomm

#include "collectives/tuning.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <string>

#include "collectives/all_gather/defaults.h"
#include "collectives/all_reduce/defaults.h"
#include "collectives/all_to_all/defaults.h"
#include "collectives/barrier/defaults.h"
#include "collectives/broadcast/defaults.h"
#include "collectives/family_tuning.h"
#include "collectives/gather_scatter/defaults.h"
#include "collectives/reduce/defaults.h"
#include "collectives/reduce_scatter/defaults.h"
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

// ---- The table: one row per collective, in opcode order --------------------

// Each family states its row in its folder's defaults.h.
constexpr FamilyTuning kFamilies[] = {
    kAllReduceTuning,
    kBroadcastTuning,
    kReduceTuning,
    kAllGatherTuning,
    kReduceScatterTuning,
    kGatherTuning,
    kScatterTuning,
    kAllToAllTuning,
    kBarrierTuning,
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

[[noreturn, gnu::noinline, gnu::cold]] void refuseRoute(const FamilyTuning& family, Algorithm forced,
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

Forced parse(const FamilyTuning& family) {
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

// all_gather's row of the tuning table (docs/tuning.md).
#pragma once

#include "collectives/family_tuning.h"

namespace meshcomm {

constexpr Algorithm allGatherDefault(size_t bytes, int, Route route) {
  if (route == Route::kOnHost) return Algorithm::kOnHost;
  // Bruck's log2(P) steps move the same bytes as the ring's P-1; past
  // 1 MiB the steps' latency no longer shows, and the ring keeps one
  // neighbour's stream busy.
  return bytes <= (size_t{1} << 20) ? Algorithm::kBruck : Algorithm::kRing;
}

inline constexpr FamilyTuning kAllGatherTuning{
    Opcode::kAllGather, "MESHCOMM_ALGO_ALLGATHER",
    setOf(Algorithm::kRing, Algorithm::kBruck, Algorithm::kOnHost), allGatherDefault};

}  // namespace meshcomm

// broadcast's row of the tuning table (docs/tuning.md).
#pragma once

#include "collectives/family_tuning.h"

namespace meshcomm {

constexpr Algorithm broadcastDefault(size_t bytes, int groupSize, Route route) {
  if (route == Route::kOnHost) return Algorithm::kOnHost;
  if (route == Route::kHierarchical) return Algorithm::kHierarchical;
  // A pipelined chain keeps every link busy once the pipe is full; the
  // tree wins while latency dominates.
  return bytes >= (size_t{1} << 20) && groupSize > 2 ? Algorithm::kChain
                                                     : Algorithm::kBinomialTree;
}

inline constexpr FamilyTuning kBroadcastTuning{
    Opcode::kBroadcast, "MESHCOMM_ALGO_BROADCAST",
    setOf(Algorithm::kBinomialTree, Algorithm::kChain, Algorithm::kOnHost,
          Algorithm::kHierarchical),
    broadcastDefault};

}  // namespace meshcomm

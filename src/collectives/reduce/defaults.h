// reduce's row of the tuning table (docs/tuning.md).
#pragma once

#include "collectives/family_tuning.h"

namespace meshcomm {

constexpr Algorithm reduceDefault(size_t bytes, int groupSize, Route route) {
  if (route == Route::kOnHost) return Algorithm::kOnHost;
  if (route == Route::kHierarchical) return Algorithm::kHierarchical;
  // The tree's root takes in and reduces the whole buffer once per level;
  // a reduce-scatter and then a gather at the root spread the reduction
  // over every rank, which wins once the buffer is large.
  return bytes >= size_t{256} << 10 && groupSize > 2 ? Algorithm::kReduceScatterGather
                                                     : Algorithm::kBinomialTree;
}

inline constexpr FamilyTuning kReduceTuning{
    Opcode::kReduce, "MESHCOMM_ALGO_REDUCE",
    setOf(Algorithm::kBinomialTree, Algorithm::kReduceScatterGather, Algorithm::kOnHost,
          Algorithm::kHierarchical),
    reduceDefault};

}  // namespace meshcomm

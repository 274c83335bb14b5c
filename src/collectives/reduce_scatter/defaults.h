// reduce_scatter's row of the tuning table (docs/tuning.md).
#pragma once

#include "collectives/family_tuning.h"

namespace meshcomm {

constexpr Algorithm reduceScatterDefault(size_t bytes, int groupSize, Route route) {
  if (route == Route::kOnHost) return Algorithm::kOnHost;
  // Recursive halving moves what the ring moves in log2(P) steps instead
  // of P-1, on a power of two; the ring, which overlaps each chunk's
  // reduction with the next one's transfer, catches up from a few MiB of
  // input.
  const size_t halvingUpTo = groupSize <= 4 ? (size_t{4} << 20) - 1 : size_t{1} << 20;
  return isPowerOfTwo(groupSize) && groupSize > 2 && bytes <= halvingUpTo
             ? Algorithm::kRecursiveHalving
             : Algorithm::kRing;
}

inline constexpr FamilyTuning kReduceScatterTuning{
    Opcode::kReduceScatter, "MESHCOMM_ALGO_REDUCESCATTER",
    setOf(Algorithm::kRing, Algorithm::kRecursiveHalving, Algorithm::kOnHost),
    reduceScatterDefault};

}  // namespace meshcomm

// all_reduce's row of the tuning table: what it may run and its default
// (the measurements behind the thresholds: docs/tuning.md).
#pragma once

#include "collectives/family_tuning.h"

namespace meshcomm {

constexpr Algorithm allReduceDefault(size_t bytes, int groupSize, Route route) {
  if (route == Route::kHierarchical) return Algorithm::kHierarchical;
  if (route == Route::kOnHost) {
    // One-shot reads P slots per rank but needs one round; reduce-scatter
    // reads one, in two rounds: the crossover falls with P. Single copies
    // (kShmSingleCopy) lose to the segment where pinning the peer's pages
    // is expensive, as on the machine of docs/tuning.md; they stay
    // available by name.
    const size_t oneShotUpTo =
        groupSize <= 2 ? size_t{256} << 10 : groupSize <= 4 ? size_t{64} << 10 : size_t{16} << 10;
    return bytes <= oneShotUpTo ? Algorithm::kShmOneShot : Algorithm::kShmReduceScatter;
  }
  // Recursive doubling moves the whole buffer log2(P) times but needs only
  // log2(P) latencies; the ring moves 2(P-1)/P of it in 2(P-1) steps, its
  // reduction overlapping the transfer chunk by chunk; halving-doubling
  // moves what the ring moves in 2 log2(P) steps, but needs a power of two
  // (the fold of the others costs two whole-buffer transfers).
  const size_t doublingUpTo = groupSize <= 2 ? size_t{512} << 10 : size_t{64} << 10;
  const size_t halvingBelow = groupSize <= 4 ? size_t{4} << 20 : size_t{512} << 10;
  if (bytes <= doublingUpTo) return Algorithm::kRecursiveDoubling;
  if (isPowerOfTwo(groupSize) && bytes < halvingBelow) return Algorithm::kHalvingDoubling;
  return Algorithm::kRing;
}

inline constexpr FamilyTuning kAllReduceTuning{
    Opcode::kAllReduce, "MESHCOMM_ALGO_ALLREDUCE",
    setOf(Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling,
          Algorithm::kShmOneShot, Algorithm::kShmReduceScatter, Algorithm::kShmSingleCopy,
          Algorithm::kHierarchical),
    allReduceDefault};

}  // namespace meshcomm

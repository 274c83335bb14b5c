// barrier's row of the tuning table: the host domain's on one host, the
// hierarchical form across hosts, else dissemination over messages.
#pragma once

#include "collectives/family_tuning.h"

namespace meshcomm {

constexpr Algorithm barrierDefault(size_t, int, Route route) {
  switch (route) {
    case Route::kOnHost: return Algorithm::kOnHost;
    case Route::kHierarchical: return Algorithm::kHierarchical;
    case Route::kFlat: break;
  }
  return Algorithm::kDissemination;
}

inline constexpr FamilyTuning kBarrierTuning{
    Opcode::kBarrier, nullptr,
    setOf(Algorithm::kDissemination, Algorithm::kOnHost, Algorithm::kHierarchical),
    barrierDefault};

}  // namespace meshcomm

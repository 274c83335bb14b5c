// all_to_all's row of the tuning table: the host domain's on one host,
// else pairwise exchanges over messages.
#pragma once

#include "collectives/family_tuning.h"

namespace meshcomm {

inline constexpr FamilyTuning kAllToAllTuning{Opcode::kAllToAll, nullptr,
                                              setOf(Algorithm::kPairwise, Algorithm::kOnHost),
                                              onHostOr<Algorithm::kPairwise>};

}  // namespace meshcomm

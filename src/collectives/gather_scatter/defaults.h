// gather's and scatter's rows of the tuning table: the host domain's on
// one host, else the root exchanging with every rank at once.
#pragma once

#include "collectives/family_tuning.h"

namespace meshcomm {

inline constexpr FamilyTuning kGatherTuning{Opcode::kGather, nullptr,
                                            setOf(Algorithm::kLinear, Algorithm::kOnHost),
                                            onHostOr<Algorithm::kLinear>};
inline constexpr FamilyTuning kScatterTuning{Opcode::kScatter, nullptr,
                                             setOf(Algorithm::kLinear, Algorithm::kOnHost),
                                             onHostOr<Algorithm::kLinear>};

}  // namespace meshcomm

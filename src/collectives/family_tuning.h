// One family's row of the tuning table (tuning.h): the algorithms it
// implements, the variable that forces one, and its default by size,
// group size and route. Each family states its row in <family>/defaults.h;
// tuning.cc lists the rows.
//
// Thread-safety: constant data and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/operations.h"
#include "collectives/tuning.h"
#include "transport/placement.h"

namespace meshcomm {

// A set of algorithms, one bit each.
using AlgorithmSet = uint32_t;
template <class... Algorithms>
constexpr AlgorithmSet setOf(Algorithms... algos) {
  return ((AlgorithmSet{1} << static_cast<int>(algos)) | ...);
}
constexpr bool contains(AlgorithmSet set, Algorithm algo) {
  return ((set >> static_cast<int>(algo)) & 1) != 0;
}

struct FamilyTuning {
  Opcode collective;
  // MESHCOMM_ALGO_<OP>, or null where the family has no choice to force.
  const char* variable;
  // Every algorithm the family implements: what the variable may name.
  AlgorithmSet algorithms;
  // The choice when nothing is forced; `bytes` as chooseAlgorithm takes it.
  Algorithm (*byDefault)(size_t bytes, int groupSize, Route route);
};

// The default of the families with one algorithm per route: the host
// domain's on one host, else their algorithm over messages.
template <Algorithm kOverMessages>
constexpr Algorithm onHostOr(size_t, int, Route route) {
  return route == Route::kOnHost ? Algorithm::kOnHost : kOverMessages;
}

constexpr bool isPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace meshcomm

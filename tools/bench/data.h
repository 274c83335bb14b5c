// Deterministic buffer contents for meshcomm-bench and the reference results
// that --check compares collective outputs against.
//
// Every element is a function of (rank that produced it, element index in
// that rank's logical input), so any rank can compute what any other rank
// sent, and what a reduction over all ranks must give, without
// communicating. The values are small integers chosen per value class so
// that every result is exact in every dtype (see data.cc), which lets the
// check compare values for equality rather than within a tolerance.
//
// Thread-safety: pure functions over caller-owned buffers.
#pragma once

#include <cstdint>
#include <string>

#include "meshcomm/types.h"

namespace meshcomm::bench {

// Which range the generated values come from.
enum class ValueClass {
  kMove,    // copies only: wide range, so misplaced blocks are noticed
  kSum,     // small signed values; partial sums stay exact
  kProd,    // values from {1, 1, 2, -1}; products stay exact powers of two
  kMinMax,  // values in [-8, 7]
};

// The class for a collective that reduces with `op`, or kMove when it only
// moves data.
ValueClass valueClassFor(bool reduces, ReduceOp op);

// dst[i] = value(rank, firstIndex + i) for i in [0, dst.numel).
void fillValues(TensorRef dst, ValueClass cls, int rank, int64_t firstIndex);

// Fills dst with a pattern that no class generates in bulk, so an output the
// collective never wrote does not pass the check by accident.
void poison(TensorRef dst);

// The outcome of comparing one buffer: how many elements were wrong and a
// description of the first one.
struct CheckResult {
  int64_t wrong = 0;
  std::string firstError;
  void merge(const CheckResult& other);
};

// Compares actual[i] with value(srcRank, firstIndex + i).
CheckResult expectValues(TensorRef actual, ValueClass cls, int srcRank, int64_t firstIndex);

// Compares actual[i] with op folded over ranks 0..nranks-1 of
// value(r, firstIndex + i), using the library's documented semantics
// (integers wrap, bool sum/max is "or", float16/bfloat16 reduce in float32).
CheckResult expectReduced(TensorRef actual, ValueClass cls, ReduceOp op, int nranks,
                          int64_t firstIndex);

}  // namespace meshcomm::bench

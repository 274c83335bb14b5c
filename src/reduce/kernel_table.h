// The function table each ISA level exports to the dispatcher (reduce.cc).
//
// Each level's translation unit (reduce_scalar.cc, reduce_avx2.cc,
// reduce_avx512.cc) instantiates src/reduce/kernels.h in its own namespace
// and hands out a pointer to a constant table. Only the dispatcher calls
// these functions, after checking arguments and CPU support, so the kernels
// themselves validate nothing.
//
// Thread-safety: the tables are immutable constant data.
#pragma once

#include <cstddef>

#include "meshcomm/types.h"

namespace meshcomm::reduce {

// out[i] = op(inputs[0][i], ..., inputs[numInputs-1][i]).
// REQUIRES: numInputs >= 1, valid aligned buffers, out == inputs[0] or no
// overlap with any input.
using ReduceFn = void (*)(void* out, const void* const* inputs, size_t numInputs, size_t count);
// 16-bit float (float16 or bfloat16 bits) <-> float32, count elements.
using ToFloatFn = void (*)(float* out, const void* in, size_t count);
using FromFloatFn = void (*)(void* out, const float* in, size_t count);

// Index into KernelTable::toFloat/fromFloat.
inline constexpr int kHalfFloat16 = 0;
inline constexpr int kHalfBFloat16 = 1;

struct KernelTable {
  // [op][dtype]; nullptr where the op is undefined for the dtype.
  ReduceFn reduce[kNumReduceOps][kNumDTypes];
  ToFloatFn toFloat[2];
  FromFloatFn fromFloat[2];
};

// The table's code may only run on a CPU that supports the level.
namespace scalar {
const KernelTable* kernelTable();
}
#if defined(__x86_64__) || defined(__i386__)
namespace avx2 {
const KernelTable* kernelTable();
}
namespace avx512 {
const KernelTable* kernelTable();
}
#else
// The vector levels are x86 code: elsewhere their files compile to nothing
// and the dispatcher finds no table.
namespace avx2 {
inline const KernelTable* kernelTable() { return nullptr; }
}
namespace avx512 {
inline const KernelTable* kernelTable() { return nullptr; }
}
#endif

}  // namespace meshcomm::reduce

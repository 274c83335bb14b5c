// Elementwise reductions (sum, prod, min, max) over N equally long buffers,
// for every meshcomm dtype, with SIMD kernels chosen at run time by CPUID.
//
// The collectives call reduceInto/reduceInPlace; tests and benchmarks may
// pick an ISA level explicitly with the *With variants. docs/reductions.md
// describes the semantics per dtype and op, the NaN rule, the accumulation
// precision and the dispatch (including MESHCOMM_REDUCE_ISA).
//
// Semantics in short:
//   - integers wrap around (two's complement), never trap or saturate;
//   - bool: sum and max are logical or, prod and min logical and; any nonzero
//     input byte counts as true and outputs are exactly 0 or 1;
//   - float16/bfloat16 inputs are widened to float32, reduced in float32
//     across all inputs of the call, and rounded back once (nearest-even);
//   - min/max on floating types PROPAGATE NaN: if any input element is NaN
//     the result is NaN (numpy.minimum/maximum, not fmin/fmax). On ties
//     (including -0.0 vs +0.0) the earlier input wins;
//   - inputs are folded left to right, so every ISA level gives the same
//     bits (except which NaN payload a NaN result carries);
//   - complex64/complex128 support sum and prod (plain (ac-bd, ad+bc)
//     product, no C99 Annex G Inf/NaN recovery); min/max are rejected.
//
// Thread-safety: all functions are thread-safe. The ISA level is chosen once,
// on first use, and never changes afterwards. Concurrent calls may share
// inputs but must not write memory another call reads or writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "meshcomm/types.h"

namespace meshcomm::reduce {

// Instruction-set levels, lowest first. Each level is a separately compiled
// copy of the same kernels (src/reduce/kernels.h).
enum class IsaLevel : uint8_t {
  kScalar,  // baseline x86-64 (SSE2) or whatever the target's baseline is
  kAvx2,    // AVX2 + FMA + F16C
  kAvx512,  // AVX-512 F/BW/VL/DQ (+ AVX2, FMA, F16C)
};
inline constexpr int kNumIsaLevels = 3;

// Environment variable that forces a level: scalar, avx2, avx512 or auto.
inline constexpr const char* kIsaEnvVar = "MESHCOMM_REDUCE_ISA";

// "scalar", "avx2", "avx512".
const char* isaName(IsaLevel level);

// Whether this build contains the level and this CPU (and OS) can run it.
// kScalar is always supported.
bool isaSupported(IsaLevel level);

// The highest supported level.
IsaLevel bestIsa();

// Turns a requested level name into a level: nullopt, "" and "auto" give
// bestIsa(). Throws InvalidArgument for an unknown name or for a level this
// CPU or build cannot run; the message names kIsaEnvVar.
IsaLevel resolveIsa(std::optional<std::string_view> requested);

// The level every call without an explicit level uses:
// resolveIsa(getenv(kIsaEnvVar)), evaluated on first use and then fixed.
// Throws InvalidArgument (on this and every later call) if the variable is
// set to something this machine cannot honour.
IsaLevel activeIsa();

// out[i] = op(inputs[0][i], inputs[1][i], ..., inputs[numInputs-1][i]) for
// i < count, folded left to right in one fused pass over all inputs (the
// output is processed in cache-sized blocks, each block reduced across all
// inputs before the next). With numInputs == 1 the input is copied (bool is
// normalised to 0/1). The caller keeps ownership of every buffer.
// REQUIRES: numInputs >= 1; every buffer holds count elements of dtype and
//   is aligned to the element's natural alignment (a complex type: that of
//   its real part); out either equals inputs[0] or overlaps no input;
//   inputs may overlap each other.
// Throws InvalidArgument when op is not defined for dtype (min/max on
// complex), numInputs == 0, a pointer is null or misaligned while count > 0,
// or out overlaps an input without being exactly inputs[0]. Nothing is
// written when it throws.
void reduceInto(ReduceOp op, DType dtype, void* out, const void* const* inputs, size_t numInputs,
                size_t count);

// inout[i] = op(inout[i], in[i]) for i < count. Same rules as reduceInto
// with inputs {inout, in}; in must not overlap inout.
void reduceInPlace(ReduceOp op, DType dtype, void* inout, const void* in, size_t count);

// reduceInto on an explicit level. Throws InvalidArgument if
// !isaSupported(level), besides reduceInto's errors.
void reduceIntoWith(IsaLevel level, ReduceOp op, DType dtype, void* out, const void* const* inputs,
                    size_t numInputs, size_t count);

// Conversions between float32 and the 16-bit float types, using the same
// routines the kernels use. Float32 -> 16 bit rounds to nearest-even,
// overflows to +-Inf, keeps subnormals (no flush to zero), and turns NaN into
// a quiet NaN with the same sign and the top payload bits. 16 bit -> float32
// is exact (a float16 signalling NaN comes back quiet).
// `half` is kFloat16 or kBFloat16 (otherwise InvalidArgument); buffers hold
// count elements and must not overlap.
void floatToHalf(DType half, void* out, const float* in, size_t count);
void halfToFloat(DType half, float* out, const void* in, size_t count);
void floatToHalfWith(IsaLevel level, DType half, void* out, const float* in, size_t count);
void halfToFloatWith(IsaLevel level, DType half, float* out, const void* in, size_t count);

}  // namespace meshcomm::reduce

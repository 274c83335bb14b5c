// Reduction kernels, written once and compiled once per ISA level.
//
// Not an ordinary header: each of reduce_scalar.cc, reduce_avx2.cc and
// reduce_avx512.cc defines MESHCOMM_REDUCE_NS (scalar, avx2, avx512) and
// includes this file exactly once, under that file's target flags (see the
// CMakeLists.txt block after the source glob). The level-specific pieces are
// selected by the compiler's own macros (__AVX512F__, __AVX2__, __F16C__), so
// the same text yields a scalar, an AVX2 and an AVX-512 build.
//
// Why everything sits in meshcomm::reduce::<level> and an unnamed namespace:
// inline functions and template instances are emitted as weak symbols, and
// the linker keeps one arbitrary copy. Were these functions shared between
// levels, a copy compiled with -mavx512f could end up serving the scalar
// path and crash a CPU without AVX-512. For the same reason this file calls
// no standard-library function templates (std::min, std::bit_cast, ...):
// only builtins, intrinsics, operators and functions defined here. The only
// external symbol of each level is its kernelTable().
//
// Shape of every kernel: the output is processed in blocks (kBlockBytes, or
// kHalfBlock float32 accumulators for the 16-bit types); each block is
// reduced across all inputs, two inputs per pass over the block so that it
// stays in L1, before the next block starts. Inputs are folded left to
// right, never reassociated, so all levels produce the same bits.
//
// Most loops are plain C++ left to the vectorizer: they run in chunks of
// kChunk elements with a fixed trip count plus a scalar tail, which GCC
// vectorizes at -O2 (whose cheap cost model refuses loops of unknown trip
// count) as well as at -O3. Pointers are __restrict__ so no alias checks are
// needed; out == inputs[0] goes through the separate accumulate* loops
// rather than through aliasing restrict pointers. Intrinsics are used where
// the vectorizer falls short: float16 conversion (F16C / AVX-512), bfloat16
// packing, and the complex product.
//
// Thread-safety: the kernels are pure functions of their arguments.
#pragma once

#ifndef MESHCOMM_REDUCE_NS
#error "define MESHCOMM_REDUCE_NS (scalar, avx2 or avx512) before including reduce/kernels.h"
#endif

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#if defined(__AVX2__) || defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "meshcomm/types.h"
#include "reduce/kernel_table.h"

namespace meshcomm::reduce::MESHCOMM_REDUCE_NS {
namespace {

constexpr size_t kBlockBytes = 8192;
constexpr size_t kChunk = 64;
// Up to this many bytes of output, reduceDirect skips its blocks.
constexpr size_t kFewBytes = 64;
// float32 accumulator block for the 16-bit types (three such buffers live on
// the stack: 12 KiB).
constexpr size_t kHalfBlock = 1024;

// ---- element types ----------------------------------------------------------

template <typename T>
struct Complex {
  T re;
  T im;
};
static_assert(sizeof(Complex<float>) == 8 && sizeof(Complex<double>) == 16);

// Storage type per dtype, indexed by the DType value (the order of
// meshcomm/types.h). bool is one byte; float16/bfloat16 are their raw bits.
using StorageTypes =
    std::tuple<uint8_t /*bool*/, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t,
               uint64_t, uint16_t /*float16*/, uint16_t /*bfloat16*/, float, double, Complex<float>,
               Complex<double>>;
static_assert(std::tuple_size_v<StorageTypes> == kNumDTypes);

template <DType D>
using Storage = std::tuple_element_t<static_cast<size_t>(D), StorageTypes>;

constexpr bool isHalf(DType d) { return d == DType::kFloat16 || d == DType::kBFloat16; }
constexpr bool isComplex(DType d) { return d == DType::kComplex64 || d == DType::kComplex128; }

// ---- element operations -----------------------------------------------------

// Integer sum/prod run in an unsigned type at least as wide as unsigned int:
// signed overflow is undefined, and narrow unsigned types would be promoted
// to (signed) int, where uint16 * uint16 can overflow too. Converting the
// result back is modular (C++20).
template <typename T>
using WrapInt =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <ReduceOp Op, typename T>
struct IntOp {
  static T apply(T a, T b) {
    using U = WrapInt<T>;
    if constexpr (Op == ReduceOp::kSum) {
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else if constexpr (Op == ReduceOp::kProd) {
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else if constexpr (Op == ReduceOp::kMin) {
      return b < a ? b : a;
    } else {
      return a < b ? b : a;
    }
  }
};

// Any nonzero byte is true; results are exactly 0 or 1.
template <ReduceOp Op>
struct BoolOp {
  static uint8_t apply(uint8_t a, uint8_t b) {
    if constexpr (Op == ReduceOp::kSum || Op == ReduceOp::kMax) {
      return static_cast<uint8_t>((a != 0) | (b != 0));
    } else {
      return static_cast<uint8_t>((a != 0) & (b != 0));
    }
  }
};

// min/max propagate NaN: `b < a ? b : a` alone returns a when b is NaN, so a
// NaN b is picked explicitly; a NaN a survives because every comparison with
// it is false. On ties (-0.0 vs +0.0) the earlier operand a wins.
template <ReduceOp Op, typename T>
struct FloatOp {
  static T apply(T a, T b) {
    if constexpr (Op == ReduceOp::kSum) {
      return a + b;
    } else if constexpr (Op == ReduceOp::kProd) {
      return a * b;
    } else if constexpr (Op == ReduceOp::kMin) {
      return b != b ? b : (b < a ? b : a);
    } else {
      return b != b ? b : (a < b ? b : a);
    }
  }
};

// ---- loops ------------------------------------------------------------------

// out = op(a, b)
template <typename F, typename T>
void combine2(T* __restrict__ out, const T* __restrict__ a, const T* __restrict__ b, size_t n) {
  size_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    for (size_t j = i; j < i + kChunk; ++j) out[j] = F::apply(a[j], b[j]);
  }
  for (; i < n; ++i) out[i] = F::apply(a[i], b[i]);
}

// out = op(op(a, b), c)
template <typename F, typename T>
void combine3(T* __restrict__ out, const T* __restrict__ a, const T* __restrict__ b,
              const T* __restrict__ c, size_t n) {
  size_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    for (size_t j = i; j < i + kChunk; ++j) out[j] = F::apply(F::apply(a[j], b[j]), c[j]);
  }
  for (; i < n; ++i) out[i] = F::apply(F::apply(a[i], b[i]), c[i]);
}

// acc = op(acc, b)
template <typename F, typename T>
void accumulate1(T* __restrict__ acc, const T* __restrict__ b, size_t n) {
  size_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    for (size_t j = i; j < i + kChunk; ++j) acc[j] = F::apply(acc[j], b[j]);
  }
  for (; i < n; ++i) acc[i] = F::apply(acc[i], b[i]);
}

// acc = op(op(acc, b), c)
template <typename F, typename T>
void accumulate2(T* __restrict__ acc, const T* __restrict__ b, const T* __restrict__ c, size_t n) {
  size_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    for (size_t j = i; j < i + kChunk; ++j) acc[j] = F::apply(F::apply(acc[j], b[j]), c[j]);
  }
  for (; i < n; ++i) acc[i] = F::apply(F::apply(acc[i], b[i]), c[i]);
}

// Types reduced in their own storage type: integers, bool, float32/64 and
// complex (whose sum runs as a real sum over twice the count).
// REQUIRES: numInputs >= 2.
template <typename F, typename T>
void reduceDirect(T* out, const void* const* inputs, size_t numInputs, size_t count) {
  auto in = [inputs](size_t k) { return static_cast<const T*>(inputs[k]); };
  // A cache line or less (the inline round of a small all_reduce): one
  // pass, without the blocks' set-up, combining the inputs in the same
  // order they do (left to right), so every path rounds alike.
  if (count * sizeof(T) <= kFewBytes) {
    for (size_t i = 0; i < count; ++i) {
      T acc = F::apply(in(0)[i], in(1)[i]);
      for (size_t k = 2; k < numInputs; ++k) acc = F::apply(acc, in(k)[i]);
      out[i] = acc;
    }
    return;
  }
  const bool inPlace = out == in(0);
  constexpr size_t kBlock = kBlockBytes / sizeof(T);
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t len = count - start < kBlock ? count - start : kBlock;
    T* o = out + start;
    size_t k;
    if (numInputs >= 3) {
      if (inPlace) {
        accumulate2<F>(o, in(1) + start, in(2) + start, len);
      } else {
        combine3<F>(o, in(0) + start, in(1) + start, in(2) + start, len);
      }
      k = 3;
    } else {
      if (inPlace) {
        accumulate1<F>(o, in(1) + start, len);
      } else {
        combine2<F>(o, in(0) + start, in(1) + start, len);
      }
      k = 2;
    }
    for (; k + 1 < numInputs; k += 2) accumulate2<F>(o, in(k) + start, in(k + 1) + start, len);
    if (k < numInputs) accumulate1<F>(o, in(k) + start, len);
  }
}

void normalizeBool(uint8_t* __restrict__ out, const uint8_t* __restrict__ in, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = in[i] != 0;
}

void normalizeBoolInPlace(uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = p[i] != 0;
}

// ---- complex product ------------------------------------------------------------
// out = a * b elementwise, (ac - bd, ad + bc) with each product rounded on
// its own. Written with intrinsics on the vector levels because GCC 12's
// SLP complex-multiply pattern emits vfmaddsub even under -ffp-contract=off,
// which would make those levels round differently from the scalar one.
// Processing is element by element in order, so out may equal a (then each
// vector is loaded before it is stored); it must not partially overlap.

template <typename R>
void complexMul(Complex<R>* out, const Complex<R>* a, const Complex<R>* b, size_t n) {
  size_t i = 0;
  R* o = reinterpret_cast<R*>(out);
  const R* x = reinterpret_cast<const R*>(a);
  const R* y = reinterpret_cast<const R*>(b);
  const size_t lanes = 2 * n;  // real values
#if defined(__AVX2__)
  // Also the AVX-512 level's path: the product is memory-bound, so 256-bit
  // vectors lose nothing. addsub: even lanes (real parts) t1 - t2, odd lanes
  // t1 + t2. Tails use masked loads/stores so no scalar loop is left for the
  // vectorizer to fuse.
  if constexpr (sizeof(R) == 4) {
    auto mul = [](__m256 va, __m256 vb) {
      const __m256 t1 = _mm256_mul_ps(va, _mm256_moveldup_ps(vb));
      const __m256 t2 = _mm256_mul_ps(_mm256_permute_ps(va, 0xB1), _mm256_movehdup_ps(vb));
      return _mm256_addsub_ps(t1, t2);
    };
    for (; i + 8 <= lanes; i += 8) {
      _mm256_storeu_ps(o + i, mul(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    }
    if (i < lanes) {
      const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(lanes - i)), idx);
      _mm256_maskstore_ps(o + i, m,
                          mul(_mm256_maskload_ps(x + i, m), _mm256_maskload_ps(y + i, m)));
    }
  } else {
    auto mul = [](__m256d va, __m256d vb) {
      const __m256d t1 = _mm256_mul_pd(va, _mm256_movedup_pd(vb));
      const __m256d t2 = _mm256_mul_pd(_mm256_permute_pd(va, 0x5), _mm256_permute_pd(vb, 0xF));
      return _mm256_addsub_pd(t1, t2);
    };
    for (; i + 4 <= lanes; i += 4) {
      _mm256_storeu_pd(o + i, mul(_mm256_loadu_pd(x + i), _mm256_loadu_pd(y + i)));
    }
    if (i < lanes) {
      const __m256i idx = _mm256_setr_epi64x(0, 1, 2, 3);
      const __m256i m =
          _mm256_cmpgt_epi64(_mm256_set1_epi64x(static_cast<long long>(lanes - i)), idx);
      _mm256_maskstore_pd(o + i, m,
                          mul(_mm256_maskload_pd(x + i, m), _mm256_maskload_pd(y + i, m)));
    }
  }
#else
  // Baseline x86-64 has no FMA, so nothing can fuse here.
  for (; i < lanes; i += 2) {
    const R ar = x[i], ai = x[i + 1], br = y[i], bi = y[i + 1];
    o[i] = ar * br - ai * bi;
    o[i + 1] = ar * bi + ai * br;
  }
#endif
}

// Same block structure as reduceDirect, one input per pass.
// REQUIRES: numInputs >= 2.
template <typename R>
void reduceComplexProd(Complex<R>* out, const void* const* inputs, size_t numInputs, size_t count) {
  auto in = [inputs](size_t k) { return static_cast<const Complex<R>*>(inputs[k]); };
  constexpr size_t kBlock = kBlockBytes / sizeof(Complex<R>);
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t len = count - start < kBlock ? count - start : kBlock;
    Complex<R>* o = out + start;
    complexMul(o, in(0) + start, in(1) + start, len);  // in place when out == inputs[0]
    for (size_t k = 2; k < numInputs; ++k) complexMul(o, o, in(k) + start, len);
  }
}

// ---- float16 / bfloat16 <-> float32 ----------------------------------------
// The scalar routines reproduce the F16C instructions bit for bit (NaN
// payloads included), so every level converts identically; they also serve
// the AVX2 tails. Hardware bfloat16 conversion (AVX512_BF16 vcvtneps2bf16)
// is not used because it flushes subnormal inputs to zero.

inline uint32_t floatBits(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
}

inline float bitsFloat(uint32_t u) {
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}

inline float f16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) {  // Inf, or NaN made quiet as vcvtph2ps does
    return bitsFloat(sign | 0x7F800000u | (mant << 13) | (mant != 0 ? 0x400000u : 0u));
  }
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact (and normal) in float32
    return bitsFloat(sign | floatBits(static_cast<float>(mant) * 0x1p-24f));
  }
  return bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t floatToF16(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) {  // NaN: quiet, top payload bits kept (as vcvtps2ph)
    return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  }
  if (a >= 0x477FF000u) {  // >= 65520, the midpoint above the largest half: Inf
    return static_cast<uint16_t>(sign | 0x7C00u);
  }
  if (a >= 0x38800000u) {  // normal half (>= 2^-14): rebias and round 13 bits
    uint32_t r = a - 0x38000000u;
    r += 0xFFFu + ((r >> 13) & 1u);  // nearest-even; a carry bumps the exponent
    return static_cast<uint16_t>(sign | (r >> 13));
  }
  const uint32_t exp = a >> 23;
  if (exp < 102) {  // < 2^-25: rounds to zero (exactly 2^-25 ties to even zero)
    return static_cast<uint16_t>(sign);
  }
  // Subnormal half: the result counts units of 2^-24.
  const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126 - exp;  // 14..24
  uint32_t m = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  m += (rem > halfway || (rem == halfway && (m & 1u))) ? 1u : 0u;
  return static_cast<uint16_t>(sign | m);
}

inline float bf16ToFloat(uint16_t h) { return bitsFloat(static_cast<uint32_t>(h) << 16); }

// Adding 0x7FFF plus the kept lsb rounds to nearest-even; a carry moves into
// the exponent, which makes overflow produce Inf. NaN would carry into the
// sign, so it is handled apart (quiet, payload truncated).
inline uint16_t floatToBf16(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quietNan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? quietNan : rounded);
}

void widenF16(float* __restrict__ out, const uint16_t* __restrict__ in, size_t n) {
  size_t i = 0;
#if defined(__AVX512F__)
  // maskz forms throughout: GCC 12's unmasked _mm512_cvtph_ps and
  // _mm512_cvtps_ph trip -Wmaybe-uninitialized inside their own header.
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    _mm512_storeu_ps(out + i, _mm512_maskz_cvtph_ps(0xFFFF, h));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 f = _mm512_maskz_cvtph_ps(m, _mm256_maskz_loadu_epi16(m, in + i));
    _mm512_mask_storeu_ps(out + i, m, f);
  }
  return;
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) out[i] = f16ToFloat(in[i]);
}

void narrowF16(uint16_t* __restrict__ out, const float* __restrict__ in, size_t n) {
  size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm512_maskz_cvtps_ph(0xFFFF, _mm512_loadu_ps(in + i),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), h);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    __m256i h = _mm512_maskz_cvtps_ph(m, _mm512_maskz_loadu_ps(m, in + i),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(out + i, m, h);
  }
  return;
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
#endif
  for (; i < n; ++i) out[i] = floatToF16(in[i]);
}

// bfloat16 needs only integer shifts and adds (floatToBf16's recipe). The
// vectorizer handles the scalar routines, but its packing of 32-bit lanes
// into 16-bit ones costs several times the explicit code below. The AVX-512
// level uses these 256-bit loops too: GCC 12's unmasked 512-bit integer
// intrinsics trip -Wmaybe-uninitialized in its own headers, and L1 bandwidth,
// not vector width, bounds these loops.
void widenBf16(float* __restrict__ out, const uint16_t* __restrict__ in, size_t n) {
  size_t i = 0;
#if defined(__AVX2__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
#else
  for (; i + kChunk <= n; i += kChunk) {
    for (size_t j = i; j < i + kChunk; ++j) out[j] = bf16ToFloat(in[j]);
  }
#endif
  for (; i < n; ++i) out[i] = bf16ToFloat(in[i]);
}

void narrowBf16(uint16_t* __restrict__ out, const float* __restrict__ in, size_t n) {
  size_t i = 0;
#if defined(__AVX2__)
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF);
  const __m256i absMask = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  auto round = [&](__m256i u) {
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(hi, one))), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absMask), inf);
    return _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
  };
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = round(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    const __m256i hi = round(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 8)));
    // Lanes hold values <= 0xFFFF, so the saturating pack is exact; it packs
    // within 128-bit halves, hence the qword permute.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
#else
  for (; i + kChunk <= n; i += kChunk) {
    for (size_t j = i; j < i + kChunk; ++j) out[j] = floatToBf16(in[j]);
  }
#endif
  for (; i < n; ++i) out[i] = floatToBf16(in[i]);
}

template <DType D>
void widen(float* out, const uint16_t* in, size_t n) {
  if constexpr (D == DType::kFloat16) {
    widenF16(out, in, n);
  } else {
    widenBf16(out, in, n);
  }
}

template <DType D>
void narrow(uint16_t* out, const float* in, size_t n) {
  if constexpr (D == DType::kFloat16) {
    narrowF16(out, in, n);
  } else {
    narrowBf16(out, in, n);
  }
}

// float16/bfloat16: each block is widened input by input into float32
// scratch, reduced in float32 across all inputs, and rounded once. out may
// equal inputs[0]: that block is read into acc before out is written.
// REQUIRES: numInputs >= 2.
template <ReduceOp Op, DType D>
void reduceHalf(uint16_t* out, const void* const* inputs, size_t numInputs, size_t count) {
  using F = FloatOp<Op, float>;
  auto in = [inputs](size_t k) { return static_cast<const uint16_t*>(inputs[k]); };
  alignas(64) float acc[kHalfBlock];
  alignas(64) float b[kHalfBlock];
  alignas(64) float c[kHalfBlock];
  for (size_t start = 0; start < count; start += kHalfBlock) {
    const size_t len = count - start < kHalfBlock ? count - start : kHalfBlock;
    widen<D>(acc, in(0) + start, len);
    size_t k = 1;
    for (; k + 1 < numInputs; k += 2) {
      widen<D>(b, in(k) + start, len);
      widen<D>(c, in(k + 1) + start, len);
      accumulate2<F>(acc, b, c, len);
    }
    if (k < numInputs) {
      widen<D>(b, in(k) + start, len);
      accumulate1<F>(acc, b, len);
    }
    narrow<D>(out + start, acc, len);
  }
}

// ---- per (op, dtype) entry points --------------------------------------------

template <ReduceOp Op, DType D>
void reduceKernel(void* outRaw, const void* const* inputs, size_t numInputs, size_t count) {
  using T = Storage<D>;
  T* out = static_cast<T*>(outRaw);
  if (numInputs == 1) {
    const T* in = static_cast<const T*>(inputs[0]);
    if constexpr (D == DType::kBool) {
      if (out == in) {
        normalizeBoolInPlace(out, count);
      } else {
        normalizeBool(out, in, count);
      }
    } else if (out != in) {
      __builtin_memcpy(out, in, count * sizeof(T));
    }
    return;
  }
  if constexpr (isHalf(D)) {
    reduceHalf<Op, D>(out, inputs, numInputs, count);
  } else if constexpr (isComplex(D)) {
    using R = decltype(T::re);
    if constexpr (Op == ReduceOp::kSum) {
      reduceDirect<FloatOp<ReduceOp::kSum, R>>(reinterpret_cast<R*>(out), inputs, numInputs,
                                               count * 2);
    } else {
      static_assert(Op == ReduceOp::kProd, "min/max are not defined for complex");
      reduceComplexProd<R>(out, inputs, numInputs, count);
    }
  } else if constexpr (D == DType::kBool) {
    reduceDirect<BoolOp<Op>>(out, inputs, numInputs, count);
  } else if constexpr (std::is_integral_v<T>) {
    reduceDirect<IntOp<Op, T>>(out, inputs, numInputs, count);
  } else {
    reduceDirect<FloatOp<Op, T>>(out, inputs, numInputs, count);
  }
}

template <size_t I>
constexpr ReduceFn tableEntry() {
  constexpr auto op = static_cast<ReduceOp>(I / kNumDTypes);
  constexpr auto dtype = static_cast<DType>(I % kNumDTypes);
  if constexpr (isComplex(dtype) && (op == ReduceOp::kMin || op == ReduceOp::kMax)) {
    return nullptr;
  } else {
    return &reduceKernel<op, dtype>;
  }
}

void f16ToFloatBulk(float* out, const void* in, size_t n) {
  widenF16(out, static_cast<const uint16_t*>(in), n);
}
void bf16ToFloatBulk(float* out, const void* in, size_t n) {
  widenBf16(out, static_cast<const uint16_t*>(in), n);
}
void floatToF16Bulk(void* out, const float* in, size_t n) {
  narrowF16(static_cast<uint16_t*>(out), in, n);
}
void floatToBf16Bulk(void* out, const float* in, size_t n) {
  narrowBf16(static_cast<uint16_t*>(out), in, n);
}

template <size_t... I>
constexpr KernelTable makeTable(std::index_sequence<I...>) {
  KernelTable t{};
  ((t.reduce[I / kNumDTypes][I % kNumDTypes] = tableEntry<I>()), ...);
  t.toFloat[kHalfFloat16] = &f16ToFloatBulk;
  t.toFloat[kHalfBFloat16] = &bf16ToFloatBulk;
  t.fromFloat[kHalfFloat16] = &floatToF16Bulk;
  t.fromFloat[kHalfBFloat16] = &floatToBf16Bulk;
  return t;
}

}  // namespace

const KernelTable* kernelTable() {
  static constexpr KernelTable kTable =
      makeTable(std::make_index_sequence<kNumReduceOps * kNumDTypes>());
  return &kTable;
}

}  // namespace meshcomm::reduce::MESHCOMM_REDUCE_NS

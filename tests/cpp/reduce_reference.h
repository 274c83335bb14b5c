// A plain scalar reference for the reduction kernels and the test data they
// are checked with, shared by reduce_test.cc and reduce_semantics_test.cc.
// Written independently of src/reduce: conversions go through double and
// ldexp/nearbyint rather than bit tricks, integer arithmetic through uint64.
//
// Thread-safety: pure functions (fillRandom mutates only its generator).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "meshcomm/types.h"
#include "reduce/reduce.h"

namespace meshcomm::reduce::reference {

inline constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin,
                                    ReduceOp::kMax};
inline constexpr size_t kInputCounts[] = {1, 2, 3, 5, 8};

inline std::vector<IsaLevel> supportedLevels() {
  std::vector<IsaLevel> levels;
  for (int i = 0; i < kNumIsaLevels; ++i) {
    if (isaSupported(static_cast<IsaLevel>(i))) levels.push_back(static_cast<IsaLevel>(i));
  }
  return levels;
}

inline std::vector<size_t> testCounts() {
  std::vector<size_t> counts;
  for (size_t c = 0; c <= 67; ++c) counts.push_back(c);
  // Around the 64-element chunk and the blocks (1024 floats for the 16-bit
  // types, 8 KiB otherwise), and past several blocks for every dtype.
  for (size_t c : {100, 255, 1000, 1023, 1024, 1025, 4099, 20011}) counts.push_back(c);
  return counts;
}

template <typename T>
T load(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void store(void* p, size_t i, T v) {
  std::memcpy(static_cast<uint8_t*>(p) + i * sizeof(T), &v, sizeof(T));
}

inline uint32_t bitsOf(float f) { return load<uint32_t>(&f, 0); }
inline float floatOf(uint32_t u) { return load<float>(&u, 0); }

// ---- reference float16/bfloat16 conversions (via double and ldexp) ----------

struct HalfFormat {
  int mantBits;
  int bias;
  uint16_t expMask;
};
inline constexpr HalfFormat kF16Format{10, 15, 0x7C00};
inline constexpr HalfFormat kBf16Format{7, 127, 0x7F80};

inline const HalfFormat& formatOf(DType d) {
  return d == DType::kFloat16 ? kF16Format : kBf16Format;
}

inline bool isHalfNan(uint16_t h, const HalfFormat& f) {
  return (h & f.expMask) == f.expMask && (h & ((1u << f.mantBits) - 1)) != 0;
}

inline float refToFloat(uint16_t h, const HalfFormat& f) {
  const uint32_t e = (h & f.expMask) >> f.mantBits;
  const uint32_t m = h & ((1u << f.mantBits) - 1);
  double v;
  if (e == static_cast<uint32_t>(f.expMask >> f.mantBits)) {
    v = m != 0 ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.mantBits);
  } else {
    v = std::ldexp(static_cast<double>(m + (1u << f.mantBits)),
                   static_cast<int>(e) - f.bias - f.mantBits);
  }
  return static_cast<float>(std::copysign(v, (h & 0x8000) != 0 ? -1.0 : 1.0));
}

// Rounds |x| to a multiple of the format's quantum at x's binade (clamped to
// the subnormal binade) with nearbyint, i.e. ties to even; the encoding is
// then (binade index << mantBits) + units, a carry landing in the exponent.
inline uint16_t refFromFloat(float x, const HalfFormat& f) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return static_cast<uint16_t>(sign | f.expMask | (1u << (f.mantBits - 1)));
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return static_cast<uint16_t>(sign | f.expMask);
  if (a == 0) return sign;
  const int emin = 1 - f.bias;
  const int e = std::max(std::ilogb(a), emin);
  const double units = std::nearbyint(std::ldexp(a, f.mantBits - e));
  const double bits = std::ldexp(static_cast<double>(e - emin), f.mantBits) + units;
  if (bits >= f.expMask) return static_cast<uint16_t>(sign | f.expMask);
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(bits));
}

// ---- reference reduction -----------------------------------------------------

template <typename T>
T refInt(ReduceOp op, T a, T b) {
  // uint64 arithmetic truncated to T is arithmetic modulo 2^bits(T).
  switch (op) {
    case ReduceOp::kSum:
      return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    case ReduceOp::kProd:
      return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
  }
  return a;
}

template <typename F>
F refFloat(ReduceOp op, F a, F b) {
  switch (op) {
    case ReduceOp::kSum:
      return a + b;
    case ReduceOp::kProd:
      return a * b;
    case ReduceOp::kMin:
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return b < a ? b : a;
    case ReduceOp::kMax:
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return a < b ? b : a;
  }
  return a;
}

// Products come from a separate function so this file's compiler cannot
// fuse them with the following add/sub (the library is built without
// contraction), whatever flags the tests are built with.
template <typename F>
[[gnu::noinline]] F mulApart(F a, F b) {
  return a * b;
}

template <typename F>
struct Cplx {
  F re;
  F im;
};

template <typename F>
Cplx<F> refComplex(ReduceOp op, Cplx<F> a, Cplx<F> b) {
  if (op == ReduceOp::kSum) return {a.re + b.re, a.im + b.im};
  return {mulApart(a.re, b.re) - mulApart(a.im, b.im), mulApart(a.re, b.im) + mulApart(a.im, b.re)};
}

// want[i] = fold over inputs of toAcc(input) with combine, then fromAcc.
template <typename T, typename Acc, typename ToAcc, typename Combine, typename FromAcc>
inline void refFold(void* want, const std::vector<const void*>& ins, size_t count, ToAcc toAcc,
                    Combine combine, FromAcc fromAcc) {
  for (size_t i = 0; i < count; ++i) {
    Acc acc = toAcc(load<T>(ins[0], i));
    for (size_t k = 1; k < ins.size(); ++k) acc = combine(acc, toAcc(load<T>(ins[k], i)));
    store<T>(want, i, fromAcc(acc));
  }
}

// The fold in the element type itself: integers, float32/64 and complex.
template <typename T>
inline void refInOwnType(ReduceOp op, void* want, const std::vector<const void*>& ins,
                         size_t count) {
  auto same = [](T v) { return v; };
  auto combine = [op](T a, T b) {
    if constexpr (std::is_integral_v<T>) return refInt(op, a, b);
    else if constexpr (std::is_floating_point_v<T>) return refFloat(op, a, b);
    else return refComplex(op, a, b);
  };
  refFold<T, T>(want, ins, count, same, combine, same);
}

inline void refBools(ReduceOp op, void* want, const std::vector<const void*>& ins, size_t count) {
  const bool isOr = op == ReduceOp::kSum || op == ReduceOp::kMax;
  refFold<uint8_t, bool>(
      want, ins, count, [](uint8_t v) { return v != 0; },
      [isOr](bool a, bool b) { return isOr ? (a || b) : (a && b); },
      [](bool v) { return static_cast<uint8_t>(v ? 1 : 0); });
}

inline void refHalves(ReduceOp op, DType dtype, void* want, const std::vector<const void*>& ins,
                      size_t count) {
  const HalfFormat& f = formatOf(dtype);
  if (ins.size() == 1) {  // a copy, not a round trip through float32
    if (count != 0) std::memcpy(want, ins[0], count * 2);
    return;
  }
  refFold<uint16_t, float>(
      want, ins, count, [&f](uint16_t h) { return refToFloat(h, f); },
      [op](float a, float b) { return refFloat(op, a, b); },
      [&f](float acc) { return refFromFloat(acc, f); });
}

inline void referenceReduce(ReduceOp op, DType dtype, void* want,
                            const std::vector<const void*>& ins, size_t count) {
  switch (dtype) {
    case DType::kBool:
      return refBools(op, want, ins, count);
    case DType::kInt8:
      return refInOwnType<int8_t>(op, want, ins, count);
    case DType::kUInt8:
      return refInOwnType<uint8_t>(op, want, ins, count);
    case DType::kInt16:
      return refInOwnType<int16_t>(op, want, ins, count);
    case DType::kUInt16:
      return refInOwnType<uint16_t>(op, want, ins, count);
    case DType::kInt32:
      return refInOwnType<int32_t>(op, want, ins, count);
    case DType::kUInt32:
      return refInOwnType<uint32_t>(op, want, ins, count);
    case DType::kInt64:
      return refInOwnType<int64_t>(op, want, ins, count);
    case DType::kUInt64:
      return refInOwnType<uint64_t>(op, want, ins, count);
    case DType::kFloat16:
    case DType::kBFloat16:
      return refHalves(op, dtype, want, ins, count);
    case DType::kFloat32:
      return refInOwnType<float>(op, want, ins, count);
    case DType::kFloat64:
      return refInOwnType<double>(op, want, ins, count);
    case DType::kComplex64:
      return refInOwnType<Cplx<float>>(op, want, ins, count);
    case DType::kComplex128:
      return refInOwnType<Cplx<double>>(op, want, ins, count);
  }
}

// ---- comparison and data -----------------------------------------------------

template <typename F>
bool sameFloat(F a, F b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(F)) == 0;
}

// Whether element i matches: bit for bit, except that any NaN matches any
// NaN (which NaN's payload survives a fold is not specified).
inline bool sameElement(DType dtype, const void* got, const void* want, size_t i) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16: {
      const uint16_t g = load<uint16_t>(got, i), w = load<uint16_t>(want, i);
      return g == w || (isHalfNan(g, formatOf(dtype)) && isHalfNan(w, formatOf(dtype)));
    }
    case DType::kFloat32:
      return sameFloat(load<float>(got, i), load<float>(want, i));
    case DType::kFloat64:
      return sameFloat(load<double>(got, i), load<double>(want, i));
    case DType::kComplex64:
      return sameFloat(load<float>(got, 2 * i), load<float>(want, 2 * i)) &&
             sameFloat(load<float>(got, 2 * i + 1), load<float>(want, 2 * i + 1));
    case DType::kComplex128:
      return sameFloat(load<double>(got, 2 * i), load<double>(want, 2 * i)) &&
             sameFloat(load<double>(got, 2 * i + 1), load<double>(want, 2 * i + 1));
    default: {
      const size_t size = dtypeSize(dtype);
      return std::memcmp(static_cast<const uint8_t*>(got) + i * size,
                         static_cast<const uint8_t*>(want) + i * size, size) == 0;
    }
  }
}

inline std::string hexElement(DType dtype, const void* p, size_t i) {
  std::ostringstream os;
  const size_t size = dtypeSize(dtype);
  os << "0x";
  for (size_t b = size; b-- > 0;) {  // little-endian: most significant byte last
    char buf[3];
    std::snprintf(buf, sizeof buf, "%02x", static_cast<const uint8_t*>(p)[i * size + b]);
    os << buf;
  }
  return os.str();
}

// Mostly moderate values (so 8-input products stay finite and min/max are
// not all NaN) plus a sprinkling of every special: NaN of both signs, Inf,
// signed zeros, subnormals, extremes.
template <typename F>
F randomFloat(std::mt19937_64& rng) {
  using L = std::numeric_limits<F>;
  const uint64_t r = rng() % 100;
  if (r < 85) return std::uniform_real_distribution<F>(-4, 4)(rng);
  const F specials[] = {
      L::quiet_NaN(), -L::quiet_NaN(), L::infinity(),   -L::infinity(),
      F(0),           -F(0),           L::denorm_min(), -L::denorm_min(),
      L::min(),       L::max(),        L::lowest(),     L::denorm_min() * F(rng() % 100000 + 1)};
  return specials[rng() % (sizeof specials / sizeof specials[0])];
}

inline void fillRandom(DType dtype, void* p, size_t count, std::mt19937_64& rng) {
  switch (dtype) {
    case DType::kBool: {
      const uint8_t values[] = {0, 0, 0, 0, 1, 1, 2, 0x80, 0xFF};
      for (size_t i = 0; i < count; ++i) store<uint8_t>(p, i, values[rng() % sizeof values]);
      return;
    }
    case DType::kFloat16:
    case DType::kBFloat16:
      for (size_t i = 0; i < count; ++i) {
        // One in five is an arbitrary bit pattern (NaN, Inf, subnormal, huge).
        const uint16_t h = rng() % 5 == 0 ? static_cast<uint16_t>(rng())
                                          : refFromFloat(randomFloat<float>(rng), formatOf(dtype));
        store<uint16_t>(p, i, h);
      }
      return;
    case DType::kFloat32:
    case DType::kComplex64: {
      const size_t n = dtype == DType::kComplex64 ? 2 * count : count;
      for (size_t i = 0; i < n; ++i) store<float>(p, i, randomFloat<float>(rng));
      return;
    }
    case DType::kFloat64:
    case DType::kComplex128: {
      const size_t n = dtype == DType::kComplex128 ? 2 * count : count;
      for (size_t i = 0; i < n; ++i) store<double>(p, i, randomFloat<double>(rng));
      return;
    }
    default:  // integers: every bit pattern, so sums and products wrap
      for (size_t i = 0; i < count * dtypeSize(dtype); ++i) {
        store<uint8_t>(p, i, static_cast<uint8_t>(rng()));
      }
  }
}

// The library's conversions at one level, as vectors.
inline std::vector<float> convertToFloat(IsaLevel level, DType half, const std::vector<uint16_t>& in) {
  std::vector<float> out(in.size());
  halfToFloatWith(level, half, out.data(), in.data(), in.size());
  return out;
}

inline std::vector<uint16_t> convertFromFloat(IsaLevel level, DType half, const std::vector<float>& in) {
  std::vector<uint16_t> out(in.size());
  floatToHalfWith(level, half, out.data(), in.data(), in.size());
  return out;
}

}  // namespace meshcomm::reduce::reference

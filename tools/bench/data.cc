#include "data.h"

#include <cmath>
#include <complex>
#include <cstring>
#include <sstream>
#include <type_traits>

namespace meshcomm::bench {
namespace {

// splitmix64: a cheap, well-mixed hash, so neighbouring elements and ranks
// get unrelated values and a block delivered to the wrong place is caught.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The integer behind element `index` of `rank`. The ranges keep every
// reduction exact: sums of up to 64 ranks of [-2, 1] fit bfloat16's 8-bit
// significand at every partial step (rings round after every hop), and
// products are powers of two (with sign) until they overflow, which every
// implementation then does identically.
int64_t code(ValueClass cls, bool narrowFloat, int rank, int64_t index) {
  uint64_t h = mix((static_cast<uint64_t>(rank) << 40) ^ static_cast<uint64_t>(index));
  switch (cls) {
    case ValueClass::kMove:
      return static_cast<int64_t>(h % 65536) - 32768;
    case ValueClass::kSum:
      return narrowFloat ? static_cast<int64_t>(h % 4) - 2 : static_cast<int64_t>(h % 8) - 4;
    case ValueClass::kProd: {
      static constexpr int64_t kChoices[4] = {1, 1, 2, -1};
      return kChoices[h % 4];
    }
    case ValueClass::kMinMax:
      return static_cast<int64_t>(h % 16) - 8;
  }
  return 0;
}

// ---- float16 / bfloat16 conversions (round to nearest even) ----

uint32_t floatBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}
float bitsFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7FFFFFu;
  int exp = static_cast<int>((x >> 23) & 0xFFu);
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0u));
  int e = exp - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into inf
  return static_cast<uint16_t>(sign | h);
}

float halfToFloat(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bitsFloat(sign | 0x7F800000u | (mant << 13));
  return bitsFloat(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bf16ToFloat(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }

// ---- per-dtype element behaviour ----
// Each traits type says how a code becomes an element, how two elements
// combine under an op, how they compare and how one is shown.

struct BoolTraits {
  using Storage = uint8_t;
  static constexpr bool kNarrow = false;
  static Storage make(int64_t k) { return static_cast<Storage>(k & 1); }
  static Storage combine(ReduceOp op, Storage a, Storage b) {
    bool x = a != 0, y = b != 0;
    bool r = (op == ReduceOp::kSum || op == ReduceOp::kMax) ? (x || y) : (x && y);
    return r ? 1 : 0;
  }
  static bool same(Storage a, Storage b) { return a == b; }
  static std::string show(Storage a) { return std::to_string(a); }
};

// combine() for a real type S, sums and products computed in Arith:
// uint64_t for the integers, which wraps like the library's two's
// complement kernels and avoids the undefined overflow of promoted signed
// arithmetic; S itself for the floating types.
template <class S, class Arith>
struct RealCombine {
  static S combine(ReduceOp op, S a, S b) {
    switch (op) {
      case ReduceOp::kSum: return static_cast<S>(static_cast<Arith>(a) + static_cast<Arith>(b));
      case ReduceOp::kProd: return static_cast<S>(static_cast<Arith>(a) * static_cast<Arith>(b));
      case ReduceOp::kMin: return b < a ? b : a;
      case ReduceOp::kMax: return a < b ? b : a;
    }
    return a;
  }
};

template <class I>
struct IntTraits : RealCombine<I, uint64_t> {
  using Storage = I;
  static constexpr bool kNarrow = false;
  // Conversion to a narrower or unsigned type is modular (C++20).
  static Storage make(int64_t k) { return static_cast<Storage>(k); }
  static bool same(Storage a, Storage b) { return a == b; }
  static std::string show(Storage a) { return std::to_string(a); }
};

template <class F>
struct FloatTraits : RealCombine<F, F> {
  using Storage = F;
  static constexpr bool kNarrow = false;
  static Storage make(int64_t k) { return static_cast<F>(k); }
  static bool same(Storage a, Storage b) { return a == b || (std::isnan(a) && std::isnan(b)); }
  static std::string show(Storage a) {
    std::ostringstream os;
    os << a;
    return os.str();
  }
};

// float16 and bfloat16: stored as 16 bits, computed in float32.
template <uint16_t (*ToBits)(float), float (*FromBits)(uint16_t)>
struct NarrowTraits {
  using Storage = uint16_t;
  static constexpr bool kNarrow = true;
  static Storage make(int64_t k) { return ToBits(static_cast<float>(k)); }
  static Storage combine(ReduceOp op, Storage a, Storage b) {
    return ToBits(FloatTraits<float>::combine(op, FromBits(a), FromBits(b)));
  }
  static bool same(Storage a, Storage b) { return FloatTraits<float>::same(FromBits(a), FromBits(b)); }
  static std::string show(Storage a) { return FloatTraits<float>::show(FromBits(a)); }
};
using HalfTraits = NarrowTraits<floatToHalf, halfToFloat>;
using Bf16Traits = NarrowTraits<floatToBf16, bf16ToFloat>;

template <class F>
struct ComplexTraits {
  using Storage = std::complex<F>;
  static constexpr bool kNarrow = false;
  // The imaginary part in {-1, 0, 1} keeps products of up to ~20 ranks exact.
  static Storage make(int64_t k) {
    return {static_cast<F>(k), static_cast<F>(((k % 3) + 3) % 3 - 1)};
  }
  static Storage combine(ReduceOp op, Storage a, Storage b) {
    if (op == ReduceOp::kProd) {
      return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
    }
    return a + b;  // min/max are rejected for complex before anything runs
  }
  static bool same(Storage a, Storage b) {
    return FloatTraits<F>::same(a.real(), b.real()) && FloatTraits<F>::same(a.imag(), b.imag());
  }
  static std::string show(Storage a) {
    std::ostringstream os;  // not string +: GCC 12 raises a false -Wrestrict on it
    os << '(' << a.real() << ',' << a.imag() << ')';
    return os.str();
  }
};

// Calls fn(Traits{}) for the dtype: the one place that maps dtypes to types.
template <class Fn>
auto withTraits(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kBool: return fn(BoolTraits{});
    case DType::kInt8: return fn(IntTraits<int8_t>{});
    case DType::kUInt8: return fn(IntTraits<uint8_t>{});
    case DType::kInt16: return fn(IntTraits<int16_t>{});
    case DType::kUInt16: return fn(IntTraits<uint16_t>{});
    case DType::kInt32: return fn(IntTraits<int32_t>{});
    case DType::kUInt32: return fn(IntTraits<uint32_t>{});
    case DType::kInt64: return fn(IntTraits<int64_t>{});
    case DType::kUInt64: return fn(IntTraits<uint64_t>{});
    case DType::kFloat16: return fn(HalfTraits{});
    case DType::kBFloat16: return fn(Bf16Traits{});
    case DType::kFloat32: return fn(FloatTraits<float>{});
    case DType::kFloat64: return fn(FloatTraits<double>{});
    case DType::kComplex64: return fn(ComplexTraits<float>{});
    case DType::kComplex128: return fn(ComplexTraits<double>{});
  }
  return fn(IntTraits<uint8_t>{});
}

template <class T>
typename T::Storage* elements(TensorRef t) {
  return static_cast<typename T::Storage*>(t.data);
}

// Counts a wrong element; only the first is described.
template <class T>
void noteWrong(CheckResult& result, int64_t index, typename T::Storage got,
               typename T::Storage want) {
  if (result.wrong++ == 0) {
    std::ostringstream os;
    os << "element " << index << ": got " << T::show(got) << ", expected " << T::show(want);
    result.firstError = os.str();
  }
}

}  // namespace

ValueClass valueClassFor(bool reduces, ReduceOp op) {
  if (!reduces) return ValueClass::kMove;
  switch (op) {
    case ReduceOp::kSum: return ValueClass::kSum;
    case ReduceOp::kProd: return ValueClass::kProd;
    case ReduceOp::kMin:
    case ReduceOp::kMax: return ValueClass::kMinMax;
  }
  return ValueClass::kMove;
}

void CheckResult::merge(const CheckResult& other) {
  if (wrong == 0 && other.wrong > 0) firstError = other.firstError;
  wrong += other.wrong;
}

void fillValues(TensorRef dst, ValueClass cls, int rank, int64_t firstIndex) {
  withTraits(dst.dtype, [&](auto traits) {
    using T = decltype(traits);
    auto* out = elements<T>(dst);
    for (int64_t i = 0; i < dst.numel; ++i) {
      out[i] = T::make(code(cls, T::kNarrow, rank, firstIndex + i));
    }
  });
}

void poison(TensorRef dst) {
  if (dst.bytes() > 0) std::memset(dst.data, 0x7B, dst.bytes());
}

CheckResult expectValues(TensorRef actual, ValueClass cls, int srcRank, int64_t firstIndex) {
  CheckResult result;
  withTraits(actual.dtype, [&](auto traits) {
    using T = decltype(traits);
    const auto* got = elements<T>(actual);
    for (int64_t i = 0; i < actual.numel; ++i) {
      auto want = T::make(code(cls, T::kNarrow, srcRank, firstIndex + i));
      if (!T::same(got[i], want)) noteWrong<T>(result, i, got[i], want);
    }
  });
  return result;
}

CheckResult expectReduced(TensorRef actual, ValueClass cls, ReduceOp op, int nranks,
                          int64_t firstIndex) {
  CheckResult result;
  withTraits(actual.dtype, [&](auto traits) {
    using T = decltype(traits);
    const auto* got = elements<T>(actual);
    for (int64_t i = 0; i < actual.numel; ++i) {
      auto want = T::make(code(cls, T::kNarrow, 0, firstIndex + i));
      for (int r = 1; r < nranks; ++r) {
        want = T::combine(op, want, T::make(code(cls, T::kNarrow, r, firstIndex + i)));
      }
      if (!T::same(got[i], want)) noteWrong<T>(result, i, got[i], want);
    }
  });
  return result;
}

}  // namespace meshcomm::bench

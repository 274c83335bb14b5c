// Shared machinery for the multi-process collective, point-to-point, group
// and fault tests: start P ranks (forked children) that each join one
// World, deterministic per-rank test data for every dtype, and a serial
// reference reduction to check results against.
//
// Starting a job: WorldJob forks P children. Rank 0's child hosts a TCPStore
// server on a free port and posts the port over a PipeChannel; every child
// then connects, waits until all are connected, and calls World::init. The
// test body runs in every child and returns an exit code (CHILD_CHECK inside
// it exits with kExitCheckFailed). Afterwards each child destroys its World
// and reports in through the store; rank 0 keeps the store up until the
// expected number of ranks have reported (bounded), so no rank loses the
// store while it is still shutting down.
//
// Test data: element i of rank r's input for a call identified by `salt`
// is a pure function of (dtype, domain, salt, r, i), so every rank can
// compute every other rank's input and the exact expected output locally.
// Domains keep reductions exact in any order of evaluation:
//   - integers: uniformly random bits (sum and prod wrap modulo 2^bits,
//     which is associative and commutative, so any schedule is exact);
//     for prod the values are mostly odd so products do not collapse to 0;
//   - bool: 0/1 bytes, biased so that or/and results are not constant;
//   - float16/bfloat16/float32/float64: sum uses integers small enough that
//     every partial sum over up to 8 ranks is exactly representable; prod
//     uses +-2^k, k in {-1, 0, 1}; min/max use multiples of 1/4 (never -0.0,
//     never NaN, so tie rules do not matter);
//   - complex: sum uses integer parts, prod Gaussian integers from
//     {1, -1, i, -i, 1+i, 1-i} (all partial products exact);
//   - raw (data-movement collectives): arbitrary bit patterns, any dtype,
//     compared bitwise (NaN payloads included).
// Every comparison in these tests is bitwise (memcmp), with one documented
// exception: the sign of an exactly-zero component of a complex product
// (see canonicalizeComplexZeros).
//
// The 16-bit float encodings are written here from the bit layouts and
// only handle the exactly representable values the generators produce;
// they are independent of src/reduce's conversions.
//
// Thread-safety: everything here is used from one thread per process.
#pragma once

#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "meshcomm/error.h"
#include "meshcomm/process_group.h"
#include "meshcomm/store.h"
#include "meshcomm/types.h"
#include "caught_error.h"
#include "multiprocess.h"
#include "process_stats.h"

namespace meshcomm::test {

// ---- dtypes and ops -----------------------------------------------------------

inline constexpr DType kAllDTypes[] = {
    DType::kBool,      DType::kInt8,      DType::kUInt8,    DType::kInt16,
    DType::kUInt16,    DType::kInt32,     DType::kUInt32,   DType::kInt64,
    DType::kUInt64,    DType::kFloat16,   DType::kBFloat16, DType::kFloat32,
    DType::kFloat64,   DType::kComplex64, DType::kComplex128};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin,
                                       ReduceOp::kMax};

// ---- time -----------------------------------------------------------------------

// CLOCK_MONOTONIC is one clock for the whole machine, so timestamps taken in
// different processes can be compared directly.
inline uint64_t monoNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline double msBetween(uint64_t fromNs, uint64_t toNs) {
  return (static_cast<double>(toNs) - static_cast<double>(fromNs)) / 1e6;
}

// ---- 16-bit float encodings (exact values only) -------------------------------------

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The float16 or bfloat16 encoding of v. REQUIRES: v is exactly
// representable and, for float16, zero or normal.
inline uint16_t encodeHalfExact(DType d, double v) {
  const float f = static_cast<float>(v);
  CHILD_CHECK(static_cast<double>(f) == v, "value " << v << " is not a float32");
  const uint32_t u = floatBits(f);
  if (d == DType::kBFloat16) {
    CHILD_CHECK((u & 0xFFFFu) == 0, "value " << v << " is not a bfloat16");
    return static_cast<uint16_t>(u >> 16);
  }
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const int e = static_cast<int>((u >> 23) & 0xFFu);
  const uint32_t m = u & 0x7FFFFFu;
  if (e == 0 && m == 0) return sign;
  const int he = e - 127 + 15;
  CHILD_CHECK(he >= 1 && he <= 30 && (m & 0x1FFFu) == 0, "value " << v << " is not a float16");
  return static_cast<uint16_t>(sign | (he << 10) | (m >> 13));
}

inline double decodeHalfSlow(DType d, uint16_t h) {
  if (d == DType::kBFloat16) return bitsFloat(static_cast<uint32_t>(h) << 16);
  const double sign = (h & 0x8000u) ? -1.0 : 1.0;
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  if (e == 0) return sign * std::ldexp(m, -24);
  if (e == 31) return m ? std::nan("") : sign * INFINITY;
  return sign * std::ldexp(1024 + m, e - 25);
}

// decodeHalfSlow through a table for float16 (the references decode
// millions of elements per job).
inline double decodeHalf(DType d, uint16_t h) {
  if (d == DType::kBFloat16) return bitsFloat(static_cast<uint32_t>(h) << 16);
  static const std::vector<double> table = [] {
    std::vector<double> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = decodeHalfSlow(DType::kFloat16, static_cast<uint16_t>(i));
    return t;
  }();
  return table[h];
}

// ---- deterministic data -------------------------------------------------------------

inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// What the data is for: a reduction op's exact domain, or raw bits.
enum class Domain { kSum, kProd, kMin, kMax, kRaw };
inline Domain domainOf(ReduceOp op) { return static_cast<Domain>(static_cast<int>(op)); }

namespace detail {

// One key per (call, rank), then a cheap per-element mix of key and index:
// the generators run over tens of millions of elements per job.
inline uint64_t rankKey(uint64_t salt, int rank) {
  return mix64(mix64(salt) ^ (static_cast<uint64_t>(rank) + 1) * 0xD1B54A32D192ED03ull);
}
inline uint64_t elementHash(uint64_t key, uint64_t i) {
  uint64_t x = key + i * 0x9E3779B97F4A7C15ull;
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ull;
  return x ^ (x >> 32);
}

template <typename T>
void put(void* base, size_t i, const T& v) {
  std::memcpy(static_cast<uint8_t*>(base) + i * sizeof(T), &v, sizeof(T));
}

// Each codec: Store (the element's bytes), Acc (what the reference reduces
// in), make<domain>(hash), toAcc/fromAcc and combine<op>.
template <typename T>
struct IntCodec {
  using Store = T;
  using Acc = T;
  template <Domain D>
  static T make(uint64_t h) {
    T v = static_cast<T>(h);
    if constexpr (D == Domain::kProd) {
      if ((h >> 61) != 0) v = static_cast<T>(v | T{1});
    }
    return v;
  }
  static Acc toAcc(Store s) { return s; }
  static Store fromAcc(Acc a) { return a; }
  template <ReduceOp Op>
  static Acc combine(Acc a, Acc b) {
    if constexpr (Op == ReduceOp::kSum) return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    if constexpr (Op == ReduceOp::kProd) return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    if constexpr (Op == ReduceOp::kMin) return std::min(a, b);
    if constexpr (Op == ReduceOp::kMax) return std::max(a, b);
  }
};

struct BoolCodec {
  using Store = uint8_t;
  using Acc = uint8_t;
  template <Domain D>
  static uint8_t make(uint64_t h) {
    if constexpr (D == Domain::kRaw) return static_cast<uint8_t>(h);
    if constexpr (D == Domain::kProd || D == Domain::kMin) return (h % 8) != 0 ? 1 : 0;  // "and" stays interesting
    if constexpr (D == Domain::kSum || D == Domain::kMax) return (h % 8) == 0 ? 1 : 0;   // "or" stays interesting
  }
  static Acc toAcc(Store s) { return s != 0 ? 1 : 0; }
  static Store fromAcc(Acc a) { return a; }
  template <ReduceOp Op>
  static Acc combine(Acc a, Acc b) {
    if constexpr (Op == ReduceOp::kSum || Op == ReduceOp::kMax) return a | b;
    else return a & b;
  }
};

// Exact values for the floating types, by (format, domain).
template <DType Dt, Domain D>
double exactFloatValue(uint64_t h) {
  if constexpr (D == Domain::kSum) {
    constexpr int64_t range = Dt == DType::kFloat64   ? (int64_t{1} << 40)
                              : Dt == DType::kFloat32 ? (int64_t{1} << 17)
                              : Dt == DType::kFloat16 ? 64
                                                      : 16;
    return static_cast<double>(static_cast<int64_t>(h % static_cast<uint64_t>(2 * range + 1)) - range);
  } else if constexpr (D == Domain::kProd) {
    constexpr double kValues[] = {1, -1, 2, -2, 0.5, -0.5};
    return kValues[h % 6];
  } else {
    constexpr int64_t k = Dt == DType::kFloat16 ? 1000 : Dt == DType::kBFloat16 ? 255 : (1 << 20);
    return static_cast<double>(static_cast<int64_t>(h % static_cast<uint64_t>(2 * k + 1)) - k) / 4;
  }
}

template <ReduceOp Op>
double refCombine(double a, double b) {
  if constexpr (Op == ReduceOp::kSum) return a + b;
  if constexpr (Op == ReduceOp::kProd) return a * b;
  if constexpr (Op == ReduceOp::kMin) return b < a ? b : a;
  if constexpr (Op == ReduceOp::kMax) return a < b ? b : a;
}

template <DType Dt>
struct HalfCodec {
  using Store = uint16_t;
  using Acc = double;
  template <Domain D>
  static Store make(uint64_t h) {
    if constexpr (D == Domain::kRaw) return static_cast<uint16_t>(h);
    else return encodeHalfExact(Dt, exactFloatValue<Dt, D>(h));
  }
  static Acc toAcc(Store s) { return decodeHalf(Dt, s); }
  static Store fromAcc(Acc a) { return encodeHalfExact(Dt, a); }
  template <ReduceOp Op>
  static Acc combine(Acc a, Acc b) { return refCombine<Op>(a, b); }
};

template <typename F, DType Dt>
struct FloatCodec {
  using Store = F;
  using Acc = double;
  template <Domain D>
  static Store make(uint64_t h) {
    if constexpr (D == Domain::kRaw) {
      F f;
      std::memcpy(&f, &h, sizeof(F));
      return f;
    } else {
      return static_cast<F>(exactFloatValue<Dt, D>(h));
    }
  }
  static Acc toAcc(Store s) { return s; }
  static Store fromAcc(Acc a) {
    CHILD_CHECK(static_cast<double>(static_cast<F>(a)) == a, "inexact reference " << a);
    return static_cast<F>(a);
  }
  template <ReduceOp Op>
  static Acc combine(Acc a, Acc b) { return refCombine<Op>(a, b); }
};

template <typename F>
struct Cplx {
  F re;
  F im;
};

template <typename F>
struct ComplexCodec {
  using Store = Cplx<F>;
  using Acc = Cplx<double>;
  template <Domain D>
  static Store make(uint64_t h) {
    if constexpr (D == Domain::kRaw) {
      Store s;
      uint64_t h2 = mix64(h);
      std::memcpy(&s.re, &h, sizeof(F));
      std::memcpy(&s.im, &h2, sizeof(F));
      return s;
    } else if constexpr (D == Domain::kProd) {
      constexpr double kRe[] = {1, -1, 0, 0, 1, 1};
      constexpr double kIm[] = {0, 0, 1, -1, 1, -1};
      return {static_cast<F>(kRe[h % 6]), static_cast<F>(kIm[h % 6])};
    } else {
      auto part = [](uint64_t x) { return static_cast<F>(static_cast<int64_t>(x % 2001) - 1000); };
      return {part(h), part(h >> 32)};
    }
  }
  static Acc toAcc(Store s) { return {s.re, s.im}; }
  static Store fromAcc(Acc a) { return {static_cast<F>(a.re), static_cast<F>(a.im)}; }
  template <ReduceOp Op>
  static Acc combine(Acc a, Acc b) {
    if constexpr (Op == ReduceOp::kSum) return {a.re + b.re, a.im + b.im};
    else return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
  }
};

// Calls f(Codec{}) for dtype d.
template <typename Fn>
void withCodec(DType d, Fn&& f) {
  switch (d) {
    case DType::kBool: return f(BoolCodec{});
    case DType::kInt8: return f(IntCodec<int8_t>{});
    case DType::kUInt8: return f(IntCodec<uint8_t>{});
    case DType::kInt16: return f(IntCodec<int16_t>{});
    case DType::kUInt16: return f(IntCodec<uint16_t>{});
    case DType::kInt32: return f(IntCodec<int32_t>{});
    case DType::kUInt32: return f(IntCodec<uint32_t>{});
    case DType::kInt64: return f(IntCodec<int64_t>{});
    case DType::kUInt64: return f(IntCodec<uint64_t>{});
    case DType::kFloat16: return f(HalfCodec<DType::kFloat16>{});
    case DType::kBFloat16: return f(HalfCodec<DType::kBFloat16>{});
    case DType::kFloat32: return f(FloatCodec<float, DType::kFloat32>{});
    case DType::kFloat64: return f(FloatCodec<double, DType::kFloat64>{});
    case DType::kComplex64: return f(ComplexCodec<float>{});
    case DType::kComplex128: return f(ComplexCodec<double>{});
  }
}

// Calls f(std::integral_constant<Domain, domain>{}).
template <typename Fn>
void withDomain(Domain d, Fn&& f) {
  switch (d) {
    case Domain::kSum: return f(std::integral_constant<Domain, Domain::kSum>{});
    case Domain::kProd: return f(std::integral_constant<Domain, Domain::kProd>{});
    case Domain::kMin: return f(std::integral_constant<Domain, Domain::kMin>{});
    case Domain::kMax: return f(std::integral_constant<Domain, Domain::kMax>{});
    case Domain::kRaw: return f(std::integral_constant<Domain, Domain::kRaw>{});
  }
}

template <typename C, Domain D>
void fillInputT(uint64_t salt, int rank, size_t first, size_t n, void* out) {
  const uint64_t key = rankKey(salt, rank);
  for (size_t i = 0; i < n; ++i) put(out, i, C::template make<D>(elementHash(key, first + i)));
}

template <typename C, Domain D>
void fillReducedT(uint64_t salt, const std::vector<int>& contributors, size_t first, size_t n,
                  void* out) {
  constexpr ReduceOp kOp = static_cast<ReduceOp>(static_cast<int>(D));
  std::vector<uint64_t> keys;
  for (int r : contributors) keys.push_back(rankKey(salt, r));
  for (size_t i = 0; i < n; ++i) {
    auto acc = C::toAcc(C::template make<D>(elementHash(keys[0], first + i)));
    for (size_t k = 1; k < keys.size(); ++k) {
      acc = C::template combine<kOp>(acc, C::toAcc(C::template make<D>(elementHash(keys[k], first + i))));
    }
    put(out, i, C::fromAcc(acc));
  }
}

}  // namespace detail

// Writes elements [first, first + n) of `rank`'s input for the call `salt`
// into out (n elements of dtype d).
inline void fillInput(DType d, Domain domain, uint64_t salt, int rank, size_t first, size_t n,
                      void* out) {
  detail::withCodec(d, [&](auto codec) {
    detail::withDomain(domain, [&](auto dom) {
      detail::fillInputT<decltype(codec), decltype(dom)::value>(salt, rank, first, n, out);
    });
  });
}

// Writes op over ranks `contributors` of their inputs (elements [first,
// first + n), each generated in op's domain) into out.
inline void fillReduced(DType d, ReduceOp op, uint64_t salt, const std::vector<int>& contributors,
                        size_t first, size_t n, void* out) {
  CHILD_CHECK(!contributors.empty());
  detail::withCodec(d, [&](auto codec) {
    detail::withDomain(domainOf(op), [&](auto dom) {
      if constexpr (decltype(dom)::value != Domain::kRaw) {
        detail::fillReducedT<decltype(codec), decltype(dom)::value>(salt, contributors, first, n, out);
      }
    });
  });
}

inline std::vector<int> ranksUpTo(int p) {
  std::vector<int> r(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) r[static_cast<size_t>(i)] = i;
  return r;
}

// A typed buffer of n elements as bytes, preset to a poison pattern so an
// output the collective forgot to write is caught.
struct Buffer {
  DType dtype = DType::kUInt8;
  int64_t numel = 0;
  std::vector<uint8_t> bytes;

  Buffer() = default;
  Buffer(DType d, int64_t n, uint8_t poison = 0xA5)
      : dtype(d), numel(n), bytes(static_cast<size_t>(n) * dtypeSize(d) + 1, poison) {}
  // The extra trailing byte is a guard against writes past the end.
  uint8_t* data() { return bytes.data(); }
  TensorRef ref() { return TensorRef{bytes.data(), numel, dtype}; }
  TensorRef ref(int64_t offset, int64_t n) {
    return TensorRef{bytes.data() + static_cast<size_t>(offset) * dtypeSize(dtype), n, dtype};
  }
  size_t size() const { return static_cast<size_t>(numel) * dtypeSize(dtype); }
};

// Compares n elements bitwise; on a difference returns a description of the
// first differing element (index and both byte strings), else "".
inline std::string firstDifference(DType d, const void* got, const void* want, size_t n) {
  const size_t es = dtypeSize(d);
  if (n == 0 || std::memcmp(got, want, n * es) == 0) return "";
  const auto* g = static_cast<const uint8_t*>(got);
  const auto* w = static_cast<const uint8_t*>(want);
  size_t bad = 0;
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(g + i * es, w + i * es, es) != 0) {
      if (count == 0) bad = i;
      ++count;
    }
  }
  std::ostringstream os;
  os << count << " of " << n << " " << dtypeName(d) << " elements differ; first at [" << bad
     << "]: got 0x";
  char hex[4];
  for (size_t b = es; b-- > 0;) {
    std::snprintf(hex, sizeof(hex), "%02x", g[bad * es + b]);
    os << hex;
  }
  os << " want 0x";
  for (size_t b = es; b-- > 0;) {
    std::snprintf(hex, sizeof(hex), "%02x", w[bad * es + b]);
    os << hex;
  }
  return os.str();
}

// Complex products are compared with +0 and -0 taken as equal: a product
// component that is exactly zero takes its sign from the evaluation order
// ((0 * x) - (y * 0) is -0 for x < 0 < y), and the fold order differs
// between algorithms. Rewrites every zero component of the n elements as +0.
inline void canonicalizeComplexZeros(DType d, void* data, size_t n) {
  if (d == DType::kComplex64) {
    auto* f = static_cast<float*>(data);
    for (size_t i = 0; i < 2 * n; ++i) {
      if (f[i] == 0.0f) f[i] = 0.0f;
    }
  } else if (d == DType::kComplex128) {
    auto* f = static_cast<double*>(data);
    for (size_t i = 0; i < 2 * n; ++i) {
      if (f[i] == 0.0) f[i] = 0.0;
    }
  }
}

// ---- all_to_all_single, block by block ----------------------------------------------

// One all_to_all_single of T (float or int32_t) in which rank `from` sends
// rank `to` count(from, to) elements, the i-th being value(from, to, i), so
// that every block's size and every element's value tell where it belongs;
// each element this rank receives must be the one its sender meant for that
// place. splitSizes false: equal blocks, passed without split sizes. The
// call must finish within `bound` (the default waits without one, which may
// run it on this thread). `context` begins every failure message.
template <typename T, typename Count, typename Value>
void checkAllToAllSingle(ProcessGroup& pg, Count count, Value value, bool splitSizes,
                         const std::string& context,
                         std::chrono::milliseconds bound = std::chrono::milliseconds::max()) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, int32_t>);
  constexpr DType kDType = std::is_same_v<T, float> ? DType::kFloat32 : DType::kInt32;
  const int p = pg.size();
  const int me = pg.rank();
  std::vector<int64_t> sends, recvs;
  std::vector<T> in;
  int64_t received = 0;
  for (int peer = 0; peer < p; ++peer) {
    sends.push_back(count(me, peer));
    recvs.push_back(count(peer, me));
    received += recvs.back();
    for (int64_t i = 0; i < sends.back(); ++i) in.push_back(value(me, peer, i));
  }
  // No value(...) is negative, so an element the call did not write shows.
  std::vector<T> out(static_cast<size_t>(received), T(-1));
  const TensorRef outRef{out.data(), received, kDType};
  const TensorRef inRef{in.data(), static_cast<int64_t>(in.size()), kDType};
  WorkPtr work = splitSizes ? pg.allToAllSingle(outRef, inRef, recvs, sends)
                            : pg.allToAllSingle(outRef, inRef, {}, {});
  CHILD_CHECK(work->wait(bound), "" << context << ": not finished in time");
  size_t at = 0;
  for (int peer = 0; peer < p; ++peer) {
    for (int64_t i = 0; i < recvs[static_cast<size_t>(peer)]; ++i, ++at) {
      CHILD_CHECK(out[at] == value(peer, me, i), "" << context << ": element " << i
                                                     << " of the block from rank " << peer << " is "
                                                     << out[at]);
    }
  }
}

// ---- starting P ranks ---------------------------------------------------------------

struct JobOptions {
  // The World's (and so the world group's) default operation timeout.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  // Parent-side bound on the whole job; children still running are killed.
  std::chrono::milliseconds bound{std::chrono::seconds(120)};
  // Environment set in every child before World::init (MESHCOMM_ALGO_*, ...).
  std::vector<std::pair<std::string, std::string>> env;
  // More environment, per rank (set after `env`): e.g. MESHCOMM_HOST_ID to
  // spread the ranks over emulated hosts.
  std::function<std::vector<std::pair<std::string, std::string>>(int rank)> rankEnv;
  // How many ranks report in at the end (fault tests: the survivors); rank 0
  // keeps the store up until then. 0 skips the final handshake (the store
  // host itself is killed).
  int expectDone = -1;  // -1: every rank
  // InitOptions' names of the world group.
  std::string worldGroupName = "world";
  std::vector<std::string> worldGroupAliases;
  // The body calls World::init(e.init) itself (tests of joining); the
  // harness leaves e.world empty.
  bool bodyJoins = false;
};

// What a rank's test body gets.
struct RankEnv {
  int rank = 0;
  int size = 1;
  std::shared_ptr<TCPStore> store;  // the job's store (this rank's client)
  std::shared_ptr<World> world;     // the body may reset it to destroy the World early
  InitOptions init;                 // what the harness joins with (JobOptions::bodyJoins)
  int fdsBeforeInit = -1;           // /proc/self/fd count just before World::init
  int threadsBeforeInit = -1;       // /proc/self/task count just before World::init
  std::string fdListingBeforeInit;  // fdListing() at the same moment
  PipeChannel* toChildren = nullptr;    // the parent posts here
  PipeChannel* fromChildren = nullptr;  // children post here for the parent

  ProcessGroup& pg() { return *world->worldGroup(); }
};

using RankBody = std::function<int(RankEnv&)>;

// Store-based rendezvous between the ranks of a job outside of meshcomm's
// collectives (used around fault injection and by the harness itself).
// "harness/<name>/<leaf>", built by appending (GCC 12 warns falsely about
// some inlined literal + std::string concatenations).
inline std::string harnessKey(const std::string& name, const char* leaf) {
  std::string k("harness/");
  k += name;
  k += '/';
  k += leaf;
  return k;
}

inline void storeBarrier(Store& store, const std::string& name, int count,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  if (store.add(harnessKey(name, "n"), 1) == count) store.set(harnessKey(name, "go"), std::string("1"));
  store.wait({harnessKey(name, "go")}, timeout);
}

namespace detail {

inline int runRank(int rank, int p, const JobOptions& o, PipeChannel& portPipe,
                   PipeChannel& toChildren, PipeChannel& fromChildren, const RankBody& body) {
  for (const auto& [k, v] : o.env) ::setenv(k.c_str(), v.c_str(), 1);
  if (o.rankEnv) {
    for (const auto& [k, v] : o.rankEnv(rank)) ::setenv(k.c_str(), v.c_str(), 1);
  }
  // Keep freed memory in the heap: the tests allocate megabyte buffers
  // thousands of times, and on this VM every fresh page costs a slow fault.
  ::mallopt(M_MMAP_THRESHOLD, 512 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  RankEnv env;
  env.rank = rank;
  env.size = p;
  env.toChildren = &toChildren;
  env.fromChildren = &fromChildren;
  TCPStoreOptions so;
  so.host = "127.0.0.1";
  so.timeout = std::chrono::seconds(30);
  if (rank == 0) {
    so.port = 0;
    so.isServer = true;
    so.worldSize = p;
    so.waitForWorkers = false;
    env.store = std::make_shared<TCPStore>(so);
    if (p > 1) CHILD_CHECK(portPipe.post(env.store->port(), p - 1));
  } else {
    so.port = static_cast<uint16_t>(portPipe.receiveOrExit(std::chrono::seconds(30)));
    env.store = std::make_shared<TCPStore>(so);
  }
  // Everyone's store client is connected before the baseline counts, so the
  // server's accepted sockets (in rank 0) are part of the baseline.
  storeBarrier(*env.store, "connected", p);
  env.fdsBeforeInit = openFdCount();
  env.threadsBeforeInit = threadCount();
  env.fdListingBeforeInit = fdListing();
  // No rank opens its runtime's store connection (accepted in rank 0)
  // before rank 0 has counted.
  storeBarrier(*env.store, "baseline", p);
  InitOptions& io = env.init;
  io.store = env.store;
  io.rank = rank;
  io.worldSize = p;
  io.timeout = o.timeout;
  io.worldGroupName = o.worldGroupName;
  io.worldGroupAliases = o.worldGroupAliases;
  if (!o.bodyJoins) {
    env.world = World::init(io);
    CHILD_CHECK(env.world->rank() == rank && env.world->size() == p);
  }
  const int code = body(env);
  env.world.reset();
  const int expect = o.expectDone < 0 ? p : o.expectDone;
  if (expect > 0) {
    env.store->add("harness/done", 1);
    if (rank == 0) {
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (env.store->add("harness/done", 0) < expect &&
             std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
  }
  return code;
}

}  // namespace detail

// P ranks, forked at construction. The pipes exist before the fork, so the
// parent and the children can talk through them.
class WorldJob {
 public:
  WorldJob(int p, JobOptions options, RankBody body)
      : p_(p),
        options_(std::move(options)),
        body_(std::move(body)),
        children_(p, [this](int rank) {
          return detail::runRank(rank, p_, options_, portPipe_, toChildren_, fromChildren_, body_);
        }) {}

  ChildGroup& children() { return children_; }
  PipeChannel& toChildren() { return toChildren_; }
  PipeChannel& fromChildren() { return fromChildren_; }
  int size() const { return p_; }
  // Once a rank fails its test, the others cannot all finish (they meet at
  // the harness's barriers): they get a moment to report their own view,
  // then are stopped, rather than waiting for the failed rank until the
  // bound.
  std::vector<ChildStatus> wait() {
    return children_.waitAllStoppingAfterFailure(options_.bound, std::chrono::seconds(5));
  }

 private:
  int p_;
  JobOptions options_;
  RankBody body_;
  PipeChannel portPipe_;
  PipeChannel toChildren_;
  PipeChannel fromChildren_;
  ChildGroup children_;  // last: forks once everything above exists
};

// Runs body on P ranks and returns every rank's status.
inline std::vector<ChildStatus> runWorld(int p, const JobOptions& options, const RankBody& body) {
  WorldJob job(p, options, body);
  return job.wait();
}

}  // namespace meshcomm::test

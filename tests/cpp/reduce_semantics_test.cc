// Reduction semantics with known values (src/reduce): float16/bfloat16
// rounding cases, one rounding after float32 accumulation, integer
// wraparound, bool normalisation, NaN propagation and zero ties, complex
// arithmetic, argument errors, and ISA selection through
// MESHCOMM_REDUCE_ISA (checked in a fresh process, since the level is fixed
// per process).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "meshcomm/error.h"
#include "meshcomm/types.h"
#include "reduce/reduce.h"
#include "reduce_reference.h"

extern char** environ;

namespace meshcomm::reduce {
namespace {

using namespace reference;  // the helpers of reduce_reference.h

struct Known {
  uint32_t floatBits;
  uint16_t half;
};

void expectNarrowing(DType half, const std::vector<Known>& cases) {
  for (IsaLevel level : supportedLevels()) {
    for (const Known& k : cases) {
      // Also as the last element of a longer buffer, to go through the
      // vector body and the tail.
      std::vector<float> in(19, 1.0f);
      in[0] = in[18] = floatOf(k.floatBits);
      const std::vector<uint16_t> got = convertFromFloat(level, half, in);
      EXPECT_EQ(got[0], k.half) << isaName(level) << " " << dtypeName(half) << " 0x" << std::hex
                                << k.floatBits;
      EXPECT_EQ(got[18], k.half) << isaName(level) << " tail";
    }
  }
}

TEST(ReduceConversionKnownValues, Float16) {
  expectNarrowing(DType::kFloat16,
                  {
                      {0x3F800000, 0x3C00},  // 1
                      {0x3F801000, 0x3C00},  // 1 + 2^-11: halfway, ties to even (down)
                      {0x3F801001, 0x3C01},  // just above halfway
                      {0x3F803000, 0x3C02},  // 1 + 3*2^-11: halfway, ties to even (up)
                      {0x477FE000, 0x7BFF},  // 65504, the largest float16
                      {0x477FEFFF, 0x7BFF},  // just below the overflow midpoint
                      {0x477FF000, 0x7C00},  // 65520: ties to even, which is Inf
                      {0x7F7FFFFF, 0x7C00},  // float max overflows
                      {0xFF7FFFFF, 0xFC00},  // and to -Inf
                      {0x38800000, 0x0400},  // 2^-14, the smallest normal
                      {0x387FC000, 0x03FF},  // the largest subnormal
                      {0x33800000, 0x0001},  // 2^-24, the smallest subnormal
                      {0x33000000, 0x0000},  // 2^-25: halfway to zero, ties to even
                      {0x33000001, 0x0001},  // just above
                      {0x33C00000, 0x0002},  // 1.5 * 2^-24: ties to even (up)
                      {0x34200000, 0x0002},  // 2.5 * 2^-24: ties to even (down)
                      {0x00000001, 0x0000},  // float subnormal
                      {0x80000000, 0x8000},  // -0
                      {0x7F800000, 0x7C00},  // Inf
                      {0x7FC00000, 0x7E00},  // quiet NaN
                      {0x7F800001, 0x7E00},  // signalling NaN becomes quiet
                      {0x7FA00000, 0x7F00},  // payload's top bits kept
                      {0xFF800001, 0xFE00},  // sign kept
                  });
}

TEST(ReduceConversionKnownValues, BFloat16) {
  expectNarrowing(
      DType::kBFloat16,
      {
          {0x3F800000, 0x3F80},  // 1
          {0x3F808000, 0x3F80},  // 1 + 2^-8: halfway, ties to even (down)
          {0x3F818000, 0x3F82},  // 1 + 3*2^-8: ties to even (up)
          {0x3F808001, 0x3F81},
          {0x7F7F7FFF, 0x7F7F},  // rounds down to the largest bfloat16
          {0x7F7F8000, 0x7F80},  // ties to even: Inf
          {0x7F7FFFFF, 0x7F80},  // float max overflows
          {0x007FFFFF, 0x0080},  // largest float subnormal rounds up to normal (no flush)
          {0x00400000, 0x0040},  // float subnormal kept
          {0x00008000, 0x0000},  // halfway to zero, ties to even
          {0x00018000, 0x0002},
          {0x80000001, 0x8000},
          {0x7F800000, 0x7F80},
          {0x7FC00000, 0x7FC0},
          {0x7F800001, 0x7FC0},  // signalling NaN becomes quiet
          {0x7FA00000, 0x7FE0},
          {0xFFFFFFFF, 0xFFFF},  // must not carry into the sign
      });
}

// ---- semantics with known values ---------------------------------------------

template <typename T>
std::vector<T> reduceAt(IsaLevel level, ReduceOp op, DType dtype,
                        const std::vector<std::vector<T>>& ins) {
  std::vector<const void*> ptrs;
  for (const auto& v : ins) ptrs.push_back(v.data());
  std::vector<T> out(ins[0].size());
  reduceIntoWith(level, op, dtype, out.data(), ptrs.data(), ptrs.size(), out.size());
  return out;
}

uint16_t f16(float x) { return refFromFloat(x, kF16Format); }
uint16_t bf16(float x) { return refFromFloat(x, kBf16Format); }

// One rounding after float32 accumulation across all inputs: rounding after
// each pairwise step would lose the two small addends (each a tie to even)
// or overflow in the middle.
TEST(ReduceHalf, RoundsOnceAfterFloat32Accumulation) {
  for (IsaLevel level : supportedLevels()) {
    auto sum = [level](DType d, std::vector<uint16_t> v) {
      std::vector<std::vector<uint16_t>> ins;
      for (uint16_t h : v) ins.push_back(std::vector<uint16_t>(37, h));
      const auto out = reduceAt(level, ReduceOp::kSum, d, ins);
      for (uint16_t o : out) EXPECT_EQ(o, out[0]);
      return out[0];
    };
    const float e11 = std::ldexp(1.0f, -11), e8 = std::ldexp(1.0f, -8);
    EXPECT_EQ(sum(DType::kFloat16, {f16(1), f16(e11), f16(e11)}), 0x3C01) << isaName(level);
    EXPECT_EQ(sum(DType::kFloat16, {f16(65504), f16(65504), f16(-65504)}), 0x7BFF);
    EXPECT_EQ(sum(DType::kFloat16, {f16(65504), f16(65504)}), 0x7C00);
    EXPECT_EQ(sum(DType::kBFloat16, {bf16(1), bf16(e8), bf16(e8)}), 0x3F81) << isaName(level);
    EXPECT_EQ(sum(DType::kBFloat16, {0x0001, 0x0001, 0x0001}), 0x0003);  // subnormals add
  }
}

TEST(ReduceIntegers, WrapAround) {
  for (IsaLevel level : supportedLevels()) {
    using V8 = std::vector<int8_t>;
    EXPECT_EQ(reduceAt<int8_t>(level, ReduceOp::kSum, DType::kInt8, {V8{127}, V8{1}})[0], -128);
    EXPECT_EQ(reduceAt<int8_t>(level, ReduceOp::kProd, DType::kInt8, {V8{-128}, V8{-1}})[0], -128);
    EXPECT_EQ(reduceAt<int8_t>(level, ReduceOp::kMin, DType::kInt8, {V8{-1}, V8{1}})[0], -1);
    using U8 = std::vector<uint8_t>;
    EXPECT_EQ(reduceAt<uint8_t>(level, ReduceOp::kSum, DType::kUInt8, {U8{255}, U8{1}})[0], 0);
    EXPECT_EQ(reduceAt<uint8_t>(level, ReduceOp::kMax, DType::kUInt8, {U8{255}, U8{1}})[0], 255);
    // 32767^2 and 65535^2 overflow int, to which 16-bit operands promote.
    using V16 = std::vector<int16_t>;
    EXPECT_EQ(reduceAt<int16_t>(level, ReduceOp::kProd, DType::kInt16,
                                {V16(70, 32767), V16(70, 32767)})[69],
              1);
    using U16 = std::vector<uint16_t>;
    EXPECT_EQ(reduceAt<uint16_t>(level, ReduceOp::kProd, DType::kUInt16,
                                 {U16(70, 65535), U16(70, 65535), U16(70, 3)})[69],
              3);
    using V32 = std::vector<int32_t>;
    const int32_t i32max = std::numeric_limits<int32_t>::max();
    EXPECT_EQ(
        reduceAt<int32_t>(level, ReduceOp::kSum, DType::kInt32, {V32(9, i32max), V32(9, 1)})[8],
        std::numeric_limits<int32_t>::min());
    using V64 = std::vector<int64_t>;
    const int64_t i64min = std::numeric_limits<int64_t>::min();
    EXPECT_EQ(
        reduceAt<int64_t>(level, ReduceOp::kProd, DType::kInt64, {V64(5, i64min), V64(5, -1)})[4],
        i64min);
    using U64 = std::vector<uint64_t>;
    EXPECT_EQ(
        reduceAt<uint64_t>(level, ReduceOp::kSum, DType::kUInt64, {U64(3, ~0ull), U64(3, 2)})[2],
        1u);
  }
}

TEST(ReduceBool, OutputsAreZeroOrOne) {
  const std::vector<uint8_t> a = {0, 1, 2, 0xFF, 0, 0x80, 7, 0};
  const std::vector<uint8_t> b = {0, 0, 3, 0x01, 9, 0x80, 0, 0};
  const std::vector<uint8_t> orWant = {0, 1, 1, 1, 1, 1, 1, 0};
  const std::vector<uint8_t> andWant = {0, 0, 1, 1, 0, 1, 0, 0};
  const std::vector<uint8_t> copyWant = {0, 1, 1, 1, 0, 1, 1, 0};
  for (IsaLevel level : supportedLevels()) {
    EXPECT_EQ(reduceAt<uint8_t>(level, ReduceOp::kSum, DType::kBool, {a, b}), orWant);
    EXPECT_EQ(reduceAt<uint8_t>(level, ReduceOp::kMax, DType::kBool, {a, b}), orWant);
    EXPECT_EQ(reduceAt<uint8_t>(level, ReduceOp::kProd, DType::kBool, {a, b}), andWant);
    EXPECT_EQ(reduceAt<uint8_t>(level, ReduceOp::kMin, DType::kBool, {a, b}), andWant);
    EXPECT_EQ(reduceAt<uint8_t>(level, ReduceOp::kSum, DType::kBool, {a}), copyWant);
    std::vector<uint8_t> inPlace = a;  // one input, out == inputs[0]
    const void* ins[1] = {inPlace.data()};
    reduceIntoWith(level, ReduceOp::kMax, DType::kBool, inPlace.data(), ins, 1, inPlace.size());
    EXPECT_EQ(inPlace, copyWant);
  }
}

template <typename F>
void expectNanPropagates(IsaLevel level, DType dtype) {
  const F nan = std::numeric_limits<F>::quiet_NaN();
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
    for (size_t pos = 0; pos < 3; ++pos) {
      std::vector<std::vector<F>> ins(3, std::vector<F>(21, F(1)));
      ins[1][20] = F(-3);
      ins[pos][20] = nan;
      EXPECT_TRUE(std::isnan(reduceAt<F>(level, op, dtype, ins)[20]))
          << isaName(level) << " " << reduceOpName(op) << " NaN in input " << pos;
    }
  }
  // Ties between zeros: the earlier input wins.
  const F zero = 0, negZero = -F(0);
  EXPECT_TRUE(std::signbit(reduceAt<F>(level, ReduceOp::kMin, dtype, {{negZero}, {zero}})[0]));
  EXPECT_FALSE(std::signbit(reduceAt<F>(level, ReduceOp::kMin, dtype, {{zero}, {negZero}})[0]));
  EXPECT_TRUE(std::signbit(reduceAt<F>(level, ReduceOp::kMax, dtype, {{negZero}, {zero}})[0]));
}

TEST(ReduceFloat, MinMaxPropagateNaN) {
  for (IsaLevel level : supportedLevels()) {
    expectNanPropagates<float>(level, DType::kFloat32);
    expectNanPropagates<double>(level, DType::kFloat64);
    for (DType half : {DType::kFloat16, DType::kBFloat16}) {
      const HalfFormat& f = formatOf(half);
      for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
        for (size_t pos = 0; pos < 3; ++pos) {
          std::vector<std::vector<uint16_t>> ins(3, std::vector<uint16_t>(40, refFromFloat(1, f)));
          ins[pos][39] = static_cast<uint16_t>(f.expMask | 1);  // a signalling NaN
          EXPECT_TRUE(isHalfNan(reduceAt<uint16_t>(level, op, half, ins)[39], f))
              << isaName(level) << " " << dtypeName(half) << " " << reduceOpName(op);
        }
      }
    }
  }
}

TEST(ReduceComplex, SumAndProduct) {
  using C = Cplx<float>;
  for (IsaLevel level : supportedLevels()) {
    const std::vector<C> a(11, C{1, 2}), b(11, C{3, 4}), c(11, C{0, 1});
    const auto prod = reduceAt<C>(level, ReduceOp::kProd, DType::kComplex64, {a, b, c});
    EXPECT_EQ(prod[10].re, -10.0f);  // (1+2i)(3+4i) = -5+10i; times i = -10-5i
    EXPECT_EQ(prod[10].im, -5.0f);
    const auto sum = reduceAt<C>(level, ReduceOp::kSum, DType::kComplex64, {a, b, c});
    EXPECT_EQ(sum[10].re, 4.0f);
    EXPECT_EQ(sum[10].im, 7.0f);
    using D = Cplx<double>;
    const auto p2 = reduceAt<D>(level, ReduceOp::kProd, DType::kComplex128,
                                {std::vector<D>(3, D{0, 1}), std::vector<D>(3, D{0, 1})});
    EXPECT_EQ(p2[2].re, -1.0);
    EXPECT_EQ(p2[2].im, 0.0);
  }
}

// ---- argument errors ---------------------------------------------------------

TEST(ReduceArguments, RejectsWhatTheKernelsCannotDo) {
  alignas(16) float buf[64] = {};
  const void* ins[2] = {buf, buf + 16};
  auto call = [&](ReduceOp op, DType dtype, void* out, const void* const* in, size_t n,
                  size_t count) { reduceInto(op, dtype, out, in, n, count); };
  EXPECT_THROW(call(ReduceOp::kMin, DType::kComplex64, buf + 32, ins, 2, 4), InvalidArgument);
  EXPECT_THROW(call(ReduceOp::kMax, DType::kComplex128, buf + 32, ins, 2, 0), InvalidArgument);
  EXPECT_THROW(call(ReduceOp::kSum, DType::kFloat32, buf + 32, ins, 0, 4), InvalidArgument);
  EXPECT_THROW(call(ReduceOp::kSum, DType::kFloat32, nullptr, ins, 2, 4), InvalidArgument);
  EXPECT_THROW(call(ReduceOp::kSum, DType::kFloat32, buf + 32, nullptr, 2, 4), InvalidArgument);
  const void* withNull[2] = {buf, nullptr};
  EXPECT_THROW(call(ReduceOp::kSum, DType::kFloat32, buf + 32, withNull, 2, 4), InvalidArgument);
  // Misaligned for float32 (but fine for a byte type).
  auto* bytes = reinterpret_cast<uint8_t*>(buf);
  EXPECT_THROW(call(ReduceOp::kSum, DType::kFloat32, bytes + 129, ins, 2, 4), InvalidArgument);
  EXPECT_NO_THROW(call(ReduceOp::kSum, DType::kUInt8, bytes + 129, ins, 2, 4));
  // out may be inputs[0] exactly, nothing else that overlaps.
  EXPECT_NO_THROW(call(ReduceOp::kSum, DType::kFloat32, buf, ins, 2, 16));
  EXPECT_THROW(call(ReduceOp::kSum, DType::kFloat32, buf + 16, ins, 2, 16), InvalidArgument);
  EXPECT_THROW(call(ReduceOp::kSum, DType::kFloat32, buf + 1, ins, 2, 8), InvalidArgument);
  EXPECT_THROW(call(ReduceOp::kSum, DType::kFloat32, buf + 12, ins, 2, 8), InvalidArgument);
  // Adjacent but disjoint is fine; so are overlapping inputs.
  EXPECT_NO_THROW(call(ReduceOp::kSum, DType::kFloat32, buf + 32, ins, 2, 16));
  const void* overlappingIns[2] = {buf, buf + 1};
  EXPECT_NO_THROW(call(ReduceOp::kSum, DType::kFloat32, buf + 32, overlappingIns, 2, 16));
  // count 0 touches nothing, so null buffers are accepted.
  EXPECT_NO_THROW(call(ReduceOp::kSum, DType::kFloat32, nullptr, nullptr, 3, 0));
  float f[4] = {};
  uint16_t h[4] = {};
  EXPECT_THROW(floatToHalf(DType::kFloat32, h, f, 4), InvalidArgument);
  EXPECT_THROW(halfToFloat(DType::kInt16, f, h, 4), InvalidArgument);
  EXPECT_THROW(halfToFloat(DType::kFloat16, f, reinterpret_cast<uint8_t*>(h) + 1, 1),
               InvalidArgument);
}

// ---- ISA selection -----------------------------------------------------------

TEST(ReduceDispatch, ResolvesLevelNames) {
  EXPECT_EQ(resolveIsa(std::nullopt), bestIsa());
  EXPECT_EQ(resolveIsa(""), bestIsa());
  EXPECT_EQ(resolveIsa("auto"), bestIsa());
  EXPECT_EQ(resolveIsa("scalar"), IsaLevel::kScalar);
  EXPECT_TRUE(isaSupported(IsaLevel::kScalar));
  EXPECT_STREQ(isaName(IsaLevel::kAvx512), "avx512");
  for (int i = 0; i < kNumIsaLevels; ++i) {
    const auto level = static_cast<IsaLevel>(i);
    std::string upper = isaName(level);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (isaSupported(level)) {
      EXPECT_EQ(resolveIsa(isaName(level)), level);
      EXPECT_EQ(resolveIsa(upper), level);
    } else {
      EXPECT_THROW(resolveIsa(isaName(level)), InvalidArgument);
      EXPECT_THROW(reduceIntoWith(level, ReduceOp::kSum, DType::kFloat32, nullptr, nullptr, 1, 0),
                   InvalidArgument);
    }
  }
  try {
    resolveIsa("sse9");
    ADD_FAILURE() << "sse9 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(kIsaEnvVar), std::string::npos) << e.what();
  }
  std::string supported;
  for (IsaLevel level : supportedLevels()) supported += std::string(" ") + isaName(level);
  std::printf("[   INFO   ] reduce ISA levels on this machine:%s; active: %s\n", supported.c_str(),
              isaName(activeIsa()));
}

constexpr const char* kChildMarker = "MESHCOMM_REDUCE_TEST_CHILD";

// The child half of EnvVarForcesLevelInAFreshProcess: when this binary is
// started with kChildMarker set, it reports the level it would use (or the
// error it gets, which must recur on every call) and exits before any test
// runs. Function-local statics are all the reduction layer relies on, so
// calling it during static initialisation is safe.
[[maybe_unused]] const bool kRanAsChild = [] {
  if (std::getenv(kChildMarker) == nullptr) return false;
  try {
    const IsaLevel level = activeIsa();
    float a[3] = {1, 2, 3}, b[3] = {4, 5, 6};
    reduceInPlace(ReduceOp::kSum, DType::kFloat32, a, b, 3);
    std::printf("ACTIVE_ISA=%s\n", a[2] == 9.0f ? isaName(level) : "wrong-result");
  } catch (const InvalidArgument& e) {
    bool again = false;
    try {
      float x = 0;
      reduceInPlace(ReduceOp::kSum, DType::kFloat32, &x, &x + 1, 0);
    } catch (const InvalidArgument&) {
      again = true;
    }
    std::printf("ERROR=%s%s\n", e.what(), again ? "" : " (not repeated)");
  }
  std::fflush(stdout);
  std::_Exit(0);
}();

// Runs this binary again with MESHCOMM_REDUCE_ISA=value (activeIsa() is
// fixed per process) and returns the child's report line.
std::string childReport(const std::string& value) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "MESHCOMM_REDUCE_ISA=", 20) != 0) env.emplace_back(*e);
  }
  env.push_back(std::string(kIsaEnvVar) + "=" + value);
  env.push_back(std::string(kChildMarker) + "=1");
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>("meshcomm_tests"), nullptr};

  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execve("/proc/self/exe", argv, envp.data());
    _exit(127);
  }
  close(fds[1]);
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fds[0], POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      kill(pid, SIGKILL);
      output += "\nTIMEOUT";
      break;
    }
    char buf[4096];
    const ssize_t r = read(fds[0], buf, sizeof buf);
    if (r <= 0) break;
    output.append(buf, static_cast<size_t>(r));
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  for (const char* key : {"ACTIVE_ISA=", "ERROR="}) {
    const size_t at = output.find(key);
    if (at != std::string::npos) return output.substr(at, output.find('\n', at) - at);
  }
  return "no report in: " + output;
}

TEST(ReduceDispatch, EnvVarForcesLevelInAFreshProcess) {
  EXPECT_EQ(childReport("auto"), std::string("ACTIVE_ISA=") + isaName(bestIsa()));
  for (int i = 0; i < kNumIsaLevels; ++i) {
    const auto level = static_cast<IsaLevel>(i);
    const std::string report = childReport(isaName(level));
    if (isaSupported(level)) {
      EXPECT_EQ(report, std::string("ACTIVE_ISA=") + isaName(level));
    } else {
      EXPECT_EQ(report.rfind("ERROR=", 0), 0u) << report;
    }
  }
  const std::string bad = childReport("avx1024");
  EXPECT_EQ(bad.rfind("ERROR=", 0), 0u) << bad;
  EXPECT_NE(bad.find("MESHCOMM_REDUCE_ISA"), std::string::npos) << bad;
}

}  // namespace
}  // namespace meshcomm::reduce

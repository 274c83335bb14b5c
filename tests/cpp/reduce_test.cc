// Reduction kernels (src/reduce): every supported ISA level against the
// plain reference in reduce_reference.h, for every dtype, op, input count,
// length, pointer offset and out == inputs[0]; and float16/bfloat16
// conversions over every bit pattern and every rounding midpoint.
#include "reduce/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "meshcomm/types.h"
#include "reduce_reference.h"

namespace meshcomm::reduce {
namespace {

using namespace reference;  // the helpers of reduce_reference.h

// Bytes at a chosen offset from a 64-byte boundary, fenced by guard bytes
// that the kernels must leave alone.
class Placed {
 public:
  static constexpr size_t kGuard = 128;
  static constexpr uint8_t kGuardByte = 0xA5;

  Placed(size_t bytes, size_t offset) : storage_(bytes + offset + 2 * kGuard + 64, kGuardByte) {
    const auto raw = reinterpret_cast<uintptr_t>(storage_.data()) + kGuard;
    const uintptr_t aligned = (raw + 63) & ~static_cast<uintptr_t>(63);
    begin_ = static_cast<size_t>(aligned - reinterpret_cast<uintptr_t>(storage_.data())) + offset;
    bytes_ = bytes;
  }
  uint8_t* data() { return storage_.data() + begin_; }
  bool guardsIntact() const {
    auto intact = [this](size_t from, size_t to) {
      for (size_t i = from; i < to; ++i) {
        if (storage_[i] != kGuardByte) return false;
      }
      return true;
    };
    return intact(0, begin_) && intact(begin_ + bytes_, storage_.size());
  }

 private:
  std::vector<uint8_t> storage_;
  size_t begin_ = 0;
  size_t bytes_ = 0;
};

enum class Layout { kAligned, kShifted, kInPlace };
const char* layoutName(Layout l) {
  return l == Layout::kAligned ? "aligned" : l == Layout::kShifted ? "shifted" : "in-place";
}

// Element offset from a 64-byte boundary for buffer k (k == -1: out). The
// shifted layouts give the streams different misalignments, so no loop
// peeling can align them all.
size_t elementOffset(Layout layout, int k) {
  if (layout == Layout::kAligned) return 0;
  if (k < 0) return 1;
  return layout == Layout::kShifted ? static_cast<size_t>(k % 3) : static_cast<size_t>((k + 1) % 2);
}

// ---- the sweep ---------------------------------------------------------------

struct SweepCase {
  IsaLevel level;
  ReduceOp op;
  DType dtype;
  size_t count;
  Layout layout;
};

std::string describe(const SweepCase& c, size_t n) {
  std::ostringstream os;
  os << isaName(c.level) << " " << reduceOpName(c.op) << " " << dtypeName(c.dtype)
     << " inputs=" << n << " count=" << c.count << " " << layoutName(c.layout);
  return os.str();
}

// Runs one case and returns whether it matched the reference.
bool runCase(const SweepCase& c, const std::vector<std::vector<uint8_t>>& data,
             const std::vector<uint8_t>& want) {
  const size_t size = dtypeSize(c.dtype);
  const size_t bytes = c.count * size;
  const size_t n = data.size();
  std::vector<Placed> ins;
  ins.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    ins.emplace_back(bytes, elementOffset(c.layout, static_cast<int>(k)) * size);
    if (bytes != 0) std::memcpy(ins[k].data(), data[k].data(), bytes);
  }
  Placed out(bytes, elementOffset(c.layout, -1) * size);
  std::vector<const void*> ptrs;
  for (auto& in : ins) ptrs.push_back(in.data());
  if (c.layout == Layout::kInPlace) {
    if (bytes != 0) std::memcpy(out.data(), data[0].data(), bytes);
    ptrs[0] = out.data();
  }
  reduceIntoWith(c.level, c.op, c.dtype, out.data(), ptrs.data(), n, c.count);

  for (size_t i = 0; i < c.count; ++i) {
    if (!sameElement(c.dtype, out.data(), want.data(), i)) {
      ADD_FAILURE() << describe(c, n) << ": element " << i << " is "
                    << hexElement(c.dtype, out.data(), i) << ", want "
                    << hexElement(c.dtype, want.data(), i);
      return false;
    }
  }
  if (!out.guardsIntact()) {
    ADD_FAILURE() << describe(c, n) << ": wrote outside the output";
    return false;
  }
  for (size_t k = 0; k < n; ++k) {
    if (c.layout == Layout::kInPlace && k == 0) continue;
    if (!ins[k].guardsIntact() ||
        (bytes != 0 && std::memcmp(ins[k].data(), data[k].data(), bytes) != 0)) {
      ADD_FAILURE() << describe(c, n) << ": input " << k << " was modified";
      return false;
    }
  }
  return true;
}

class ReduceMatchesReference : public ::testing::TestWithParam<DType> {};

TEST_P(ReduceMatchesReference, EveryLevelOpInputCountLengthAndLayout) {
  const DType dtype = GetParam();
  const size_t size = dtypeSize(dtype);
  std::mt19937_64 rng(0x5eed0000u + static_cast<unsigned>(dtype));
  const std::vector<IsaLevel> levels = supportedLevels();
  int failures = 0;
  for (ReduceOp op : kOps) {
    if (!reduceOpSupports(op, dtype)) continue;
    for (size_t n : kInputCounts) {
      for (size_t count : testCounts()) {
        std::vector<std::vector<uint8_t>> data(n, std::vector<uint8_t>(count * size));
        std::vector<const void*> ptrs;
        for (auto& d : data) {
          fillRandom(dtype, d.data(), count, rng);
          ptrs.push_back(d.data());
        }
        std::vector<uint8_t> want(count * size);
        referenceReduce(op, dtype, want.data(), ptrs, count);
        for (IsaLevel level : levels) {
          for (Layout layout : {Layout::kAligned, Layout::kShifted, Layout::kInPlace}) {
            if (!runCase({level, op, dtype, count, layout}, data, want) && ++failures >= 5) {
              FAIL() << "stopping after 5 mismatches";
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ReduceAllDTypes, ReduceMatchesReference,
                         ::testing::Values(DType::kBool, DType::kInt8, DType::kUInt8, DType::kInt16,
                                           DType::kUInt16, DType::kInt32, DType::kUInt32,
                                           DType::kInt64, DType::kUInt64, DType::kFloat16,
                                           DType::kBFloat16, DType::kFloat32, DType::kFloat64,
                                           DType::kComplex64, DType::kComplex128),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtypeName(info.param));
                         });

// The public entry points (active level) agree with the reference too.
TEST(ReduceEntryPoints, ReduceIntoAndInPlaceUseTheActiveLevel) {
  std::mt19937_64 rng(7);
  const size_t count = 1237;
  for (DType dtype : {DType::kInt32, DType::kFloat16, DType::kFloat64}) {
    const size_t bytes = count * dtypeSize(dtype);
    std::vector<uint8_t> a(bytes), b(bytes), want(bytes), got(bytes);
    fillRandom(dtype, a.data(), count, rng);
    fillRandom(dtype, b.data(), count, rng);
    referenceReduce(ReduceOp::kSum, dtype, want.data(), {a.data(), b.data()}, count);
    const void* ins[2] = {a.data(), b.data()};
    reduceInto(ReduceOp::kSum, dtype, got.data(), ins, 2, count);
    for (size_t i = 0; i < count; ++i) ASSERT_TRUE(sameElement(dtype, got.data(), want.data(), i));
    reduceInPlace(ReduceOp::kSum, dtype, a.data(), b.data(), count);
    for (size_t i = 0; i < count; ++i) ASSERT_TRUE(sameElement(dtype, a.data(), want.data(), i));
  }
}

// ---- conversions -------------------------------------------------------------

class ReduceConversion : public ::testing::TestWithParam<DType> {};

// Every 16-bit pattern widens exactly; NaN stays NaN with its sign, and all
// levels give identical bits (float16 NaN comes back quiet, as F16C does;
// bfloat16 widening is a plain shift).
TEST_P(ReduceConversion, WidensEveryBitPatternExactly) {
  const DType half = GetParam();
  const HalfFormat& f = formatOf(half);
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> first;
  for (IsaLevel level : supportedLevels()) {
    const std::vector<float> got = convertToFloat(level, half, all);
    for (uint32_t h = 0; h < 65536; ++h) {
      const float want = refToFloat(static_cast<uint16_t>(h), f);
      ASSERT_TRUE(sameFloat(got[h], want)) << isaName(level) << " " << dtypeName(half) << " 0x"
                                           << std::hex << h << " -> 0x" << bitsOf(got[h]);
      ASSERT_EQ(std::signbit(got[h]), (h & 0x8000) != 0);
      if (isHalfNan(static_cast<uint16_t>(h), f)) {
        const uint32_t m = h & ((1u << f.mantBits) - 1);
        const uint32_t expect =
            half == DType::kFloat16 ? ((h & 0x8000u) << 16) | 0x7FC00000u | (m << 13) : h << 16;
        ASSERT_EQ(bitsOf(got[h]), expect) << std::hex << h;
      }
    }
    if (first.empty()) first = got;
    ASSERT_EQ(std::memcmp(first.data(), got.data(), got.size() * 4), 0) << isaName(level);
  }
}

// Narrowing rounds to nearest-even everywhere it matters: at every
// representable value, every midpoint between neighbours and one float ulp
// either side of it, across the subnormal and overflow boundaries, plus a
// million arbitrary float bit patterns. All levels give identical bits,
// NaN payloads included.
TEST_P(ReduceConversion, NarrowsToNearestEvenAtEveryMidpoint) {
  const DType half = GetParam();
  const HalfFormat& f = formatOf(half);
  std::vector<float> in;
  for (uint32_t h = 0; h < 65536; ++h) {
    if (isHalfNan(static_cast<uint16_t>(h), f) || (h & 0x7FFF) == f.expMask) continue;
    const float v = refToFloat(static_cast<uint16_t>(h), f);
    // The next value away from zero (the Inf pattern past the largest).
    const float next = refToFloat(static_cast<uint16_t>(h + 1), f);
    const float mid = static_cast<float>((static_cast<double>(v) + next) / 2);
    for (float x : {v, mid}) {
      in.push_back(x);
      in.push_back(std::nextafter(x, 0.0f));
      in.push_back(std::nextafter(x, 2 * x));
    }
  }
  std::mt19937_64 rng(99);
  for (int i = 0; i < 1000000; ++i) in.push_back(floatOf(static_cast<uint32_t>(rng())));
  for (uint32_t u : {0x7F800001u, 0x7FC00000u, 0x7F802000u, 0xFF800001u, 0x7FFFFFFFu, 0x7FA00000u,
                     0x00000001u, 0x80000001u, 0x007FFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu}) {
    in.push_back(floatOf(u));
  }
  std::vector<uint16_t> first;
  for (IsaLevel level : supportedLevels()) {
    const std::vector<uint16_t> got = convertFromFloat(level, half, in);
    for (size_t i = 0; i < in.size(); ++i) {
      const uint16_t want = refFromFloat(in[i], f);
      const bool ok = got[i] == want || (isHalfNan(got[i], f) && isHalfNan(want, f) &&
                                         (got[i] >> 15) == (want >> 15));
      ASSERT_TRUE(ok) << isaName(level) << " " << dtypeName(half) << " 0x" << std::hex
                      << bitsOf(in[i]) << " -> 0x" << got[i] << ", want 0x" << want;
    }
    if (first.empty()) first = got;
    ASSERT_EQ(std::memcmp(first.data(), got.data(), got.size() * 2), 0) << isaName(level);
  }
}

INSTANTIATE_TEST_SUITE_P(ReduceHalfTypes, ReduceConversion,
                         ::testing::Values(DType::kFloat16, DType::kBFloat16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtypeName(info.param));
                         });

}  // namespace
}  // namespace meshcomm::reduce

// streamCopy (common/stream_copy.h): byte-exact against memcpy for every
// length around the 16-byte head and 64-byte body boundaries, every
// destination and source offset within a line, and a large buffer; the
// bytes either side of the destination stay untouched.
#include "common/stream_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace meshcomm {
namespace {

constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0x5A;

// Copies `bytes` from source offset `from` to destination offset `to`
// (both from a 64-byte boundary) and checks the result and the guards.
void checkCopy(size_t bytes, size_t to, size_t from, std::mt19937& rng) {
  // 64 bytes of slack: the vectors' data need not start on a line.
  std::vector<uint8_t> srcStore(bytes + from + 64);
  std::vector<uint8_t> dstStore(bytes + to + 2 * kGuard + 64, kGuardByte);
  auto lineAfter = [](uint8_t* p) {
    return p + (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64;
  };
  uint8_t* src = lineAfter(srcStore.data());
  uint8_t* dst = lineAfter(dstStore.data());
  uint8_t* end = dstStore.data() + dstStore.size();
  for (size_t i = 0; i < bytes; ++i) src[from + i] = static_cast<uint8_t>(rng());
  uint8_t* out = dst + kGuard + to;
  streamCopy(out, src + from, bytes);
  ASSERT_EQ(std::memcmp(out, src + from, bytes), 0)
      << bytes << " bytes, destination offset " << to << ", source offset " << from;
  for (uint8_t* p = dstStore.data(); p < out; ++p) ASSERT_EQ(*p, kGuardByte) << "before the destination";
  for (uint8_t* p = out + bytes; p < end; ++p) {
    ASSERT_EQ(*p, kGuardByte) << "after the destination, " << bytes << " bytes at offset " << to;
  }
}

TEST(StreamCopy, EveryLengthAndOffsetMatchesMemcpy) {
  std::mt19937 rng(7);
  for (size_t bytes = 0; bytes <= 300; ++bytes) {
    for (size_t to = 0; to < 64; to += 5) {
      for (size_t from : {size_t{0}, size_t{3}, size_t{16}, size_t{63}}) {
        checkCopy(bytes, to, from, rng);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(StreamCopy, LargeUnalignedBuffers) {
  std::mt19937 rng(11);
  for (size_t bytes : {size_t{1} << 20, (size_t{1} << 20) - 1, size_t{65536 + 80}}) {
    checkCopy(bytes, 9, 1, rng);
    checkCopy(bytes, 0, 0, rng);
  }
}

}  // namespace
}  // namespace meshcomm

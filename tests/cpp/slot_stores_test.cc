// SlotStores: when copies into a rank's slot stream past the caches, and
// copyIntoSlot copying the bytes either way.

#include "host/shm/slot_stores.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "meshcomm/error.h"

namespace meshcomm::host::shm {
namespace {

using Clock = SlotStores::Clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr size_t kBytes = size_t{512} << 10;
// 512 KiB at 60 ns per KiB (near) and at 400 (far).
constexpr auto kFast = microseconds(30);
constexpr auto kSlow = microseconds(200);

// Runs the copy the plan asks for at `t`, taking `took` if it is timed, and
// returns the plan; `t` moves past it.
SlotStores::Plan copyAt(SlotStores& s, Clock::time_point& t, Clock::duration took,
                        size_t bytes = kBytes) {
  const SlotStores::Plan plan = s.plan(bytes, t);
  t += took;
  if (plan.timed) s.record(bytes, took, t);
  return plan;
}

TEST(SlotStores, FastCopiesStayCachedAndTimed) {
  SlotStores s;
  auto t = Clock::now();
  for (int i = 0; i < 1000; ++i) {
    const SlotStores::Plan p = copyAt(s, t, kFast);
    ASSERT_FALSE(p.stream);
    ASSERT_TRUE(p.timed);
  }
}

TEST(SlotStores, SmallCopiesAreNeitherStreamedNorTimed) {
  SlotStores s;
  auto t = Clock::now();
  for (int i = 0; i < 10; ++i) copyAt(s, t, kSlow);
  ASSERT_TRUE(s.streaming());
  const SlotStores::Plan p = s.plan(SlotStores::kMinBytes - 1, t);
  EXPECT_FALSE(p.stream);
  EXPECT_FALSE(p.timed);
}

TEST(SlotStores, OneSlowCopyAmongFastOnesDoesNotStream) {
  SlotStores s;
  auto t = Clock::now();
  for (int i = 0; i < 100; ++i) {
    copyAt(s, t, kFast);
    copyAt(s, t, kSlow);
  }
  EXPECT_FALSE(s.streaming());
  EXPECT_FALSE(s.plan(kBytes, t).stream);
}

TEST(SlotStores, SlowCopiesInARowStreamForTheHold) {
  SlotStores s;
  auto t = Clock::now();
  for (int i = 0; i < SlotStores::kSlowInARow; ++i) copyAt(s, t, kSlow);
  ASSERT_TRUE(s.streaming());
  const Clock::time_point holdEnds = t + SlotStores::kHold;
  // Streamed copies are not timed: their speed does not depend on where
  // the reader is.
  while (t + microseconds(100) < holdEnds) {
    const SlotStores::Plan p = copyAt(s, t, microseconds(100));
    ASSERT_TRUE(p.stream);
    ASSERT_FALSE(p.timed);
  }
}

TEST(SlotStores, AProbeAfterTheHoldDecides) {
  SlotStores s;
  auto t = Clock::now();
  for (int i = 0; i < SlotStores::kSlowInARow; ++i) copyAt(s, t, kSlow);
  t += SlotStores::kHold;
  // Still far: one slow probe streams again at once.
  SlotStores::Plan probe = copyAt(s, t, kSlow);
  EXPECT_FALSE(probe.stream);
  EXPECT_TRUE(probe.timed);
  EXPECT_TRUE(s.plan(kBytes, t).stream);
  // Near again: one fast probe goes back to plain stores.
  t += SlotStores::kHold;
  probe = copyAt(s, t, kFast);
  EXPECT_TRUE(probe.timed);
  EXPECT_FALSE(s.streaming());
  EXPECT_FALSE(s.plan(kBytes, t).stream);
}

TEST(SlotStores, TheThresholdScalesWithTheCopy) {
  SlotStores s;
  auto t = Clock::now();
  // 64 KiB in 10 us is 156 ns per KiB: not slow; in 16 us (250): slow.
  constexpr size_t k64KiB = size_t{64} << 10;
  static_assert(k64KiB >= SlotStores::kMinBytes);
  for (int i = 0; i < 10; ++i) copyAt(s, t, microseconds(10), k64KiB);
  EXPECT_FALSE(s.streaming());
  for (int i = 0; i < SlotStores::kSlowInARow; ++i) copyAt(s, t, microseconds(16), k64KiB);
  EXPECT_TRUE(s.streaming());
}

TEST(SlotStores, TheSettingNamesItsValues) {
  EXPECT_EQ(parseSlotStoreSetting(""), SlotStoreSetting::kAuto);
  EXPECT_EQ(parseSlotStoreSetting("auto"), SlotStoreSetting::kAuto);
  EXPECT_EQ(parseSlotStoreSetting("cached"), SlotStoreSetting::kCached);
  EXPECT_EQ(parseSlotStoreSetting("streaming"), SlotStoreSetting::kStreaming);
  try {
    parseSlotStoreSetting("nt");
    FAIL() << "accepted 'nt'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("MESHCOMM_SHM_SLOT_STORES='nt'"), std::string::npos)
        << e.what();
  }
}

// copyIntoSlot moves the same bytes whichever stores this thread's choice
// picks, at sizes that are not multiples of a line, into and from
// unaligned addresses.
void expectCopies(SlotStoreSetting setting) {
  for (size_t bytes : {SlotStores::kMinBytes, SlotStores::kMinBytes + 13, kBytes + 7}) {
    std::vector<uint8_t> from(bytes + 3);
    std::iota(from.begin(), from.end(), uint8_t{1});
    std::vector<uint8_t> to(bytes + 64, 0);
    copyIntoSlot(to.data() + 1, from.data() + 3, bytes, setting);
    EXPECT_EQ(to[0], 0);
    EXPECT_TRUE(std::equal(from.begin() + 3, from.end(), to.begin() + 1)) << bytes;
    EXPECT_EQ(to[bytes + 1], 0);
  }
}

TEST(SlotStores, CopyIntoSlotCopiesEveryByteEitherWay) {
  expectCopies(SlotStoreSetting::kCached);
  expectCopies(SlotStoreSetting::kStreaming);
  // A thread of its own, so that this thread's choice starts fresh.
  std::thread([] {
    expectCopies(SlotStoreSetting::kAuto);  // plain stores, timed
    SlotStores& mine = slotStores();
    // Slow copies that end an hour from now: the hold outlasts the test
    // however slowly the machine runs it.
    const auto now = Clock::now() + std::chrono::hours(1);
    for (int i = 0; i < SlotStores::kSlowInARow; ++i) mine.record(kBytes, milliseconds(1), now);
    ASSERT_TRUE(mine.plan(kBytes, Clock::now()).stream);
    expectCopies(SlotStoreSetting::kAuto);  // non-temporal stores
  }).join();
}

}  // namespace
}  // namespace meshcomm::host::shm

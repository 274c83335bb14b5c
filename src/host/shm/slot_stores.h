// How a rank's copies into its own slot store their bytes: through the
// caches (plain stores) or past them (non-temporal stores), chosen by how
// fast the plain copies into the slot have been running.
//
// Why a choice: the cost of handing a buffer to another core depends on
// where the two cores are, which a virtual machine's host changes while a
// job runs. On the machine of docs/tuning.md ("Where the cores are") the
// round trip of a cache line between the two vCPUs is 100-150 ns for
// seconds, then 450-600 ns for seconds (the host has moved a vCPU away
// from the other's cache). Plain stores into slot lines that the reader
// still holds (it read them last round) must take each line back from it:
// 512 KiB take 11-26 us near and 105-128 us far; the reader then copies the
// writer's lines at 24-32 GB/s near and 12-14 far. Non-temporal stores
// write 512 KiB in 24-28 us and the reader copies them from memory at
// 14-18 GB/s, wherever the cores are. So plain stores win near (a 1 MiB
// all_reduce at 2 ranks: 150 against 200-250 us) and streaming wins far
// (258 against 364 us). The writer can tell which holds from its own plain
// copies: far, they run 4-5 times slower.
//
// MESHCOMM_SHM_SLOT_STORES=cached or =streaming fixes the choice for every
// copy of kMinBytes or more where the host's ranks have cores of their own
// (elsewhere copies are plain; see copyIntoSlot), docs/configuration.md;
// auto, the default, follows this rule.
//
// The rule: copies of kMinBytes or more go through the caches and are
// timed; after kSlowInARow in a row slower than kSlowNsPerKiB, they stream
// for kHold, then the next one goes through the caches again as a probe
// (slow: stream for another kHold; else back to plain). Smaller copies
// always go through the caches: their handoff latency, not their stores,
// is what they cost.
//
// One per thread (placement is a thread's), so no synchronisation. The
// clock is passed in so that tests can drive it.
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>

namespace meshcomm::host::shm {

class SlotStores {
 public:
  using Clock = std::chrono::steady_clock;

  // Copies below this size cost their handoff more than their stores. At
  // 32 KiB far placement still costs the stores 1.3-1.7x the time (2 ranks:
  // all_gather and all_to_all of 64 KiB); from 16 KiB the timing lost
  // about 5% near (docs/tuning.md).
  static constexpr size_t kMinBytes = size_t{32} << 10;
  // 5 GB/s: plain copies into the slot run at 8-17 GB/s near with the
  // source in memory (60-116 ns per KiB, 256 KiB copies of a 1 MiB
  // all_reduce) and at 2.5-5 GB/s far (200-400 ns per KiB).
  static constexpr double kSlowNsPerKiB = 200;
  static constexpr int kSlowInARow = 2;
  static constexpr Clock::duration kHold = std::chrono::milliseconds(20);

  struct Plan {
    bool stream = false;  // non-temporal stores
    bool timed = false;   // report the copy's duration to record()
  };

  // How to store a copy of `bytes` that starts at `now`.
  Plan plan(size_t bytes, Clock::time_point now) const {
    if (bytes < kMinBytes) return {};
    if (streaming_ && now < until_) return {.stream = true};
    return {.timed = true};
  }

  // A timed copy of `bytes` took `took`, ending at `now`.
  void record(size_t bytes, Clock::duration took, Clock::time_point now) {
    const double ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count());
    const bool slow = ns > static_cast<double>(bytes) / 1024.0 * kSlowNsPerKiB;
    if (!slow) {
      streaming_ = false;
      slowInARow_ = 0;
      return;
    }
    if (streaming_ || ++slowInARow_ >= kSlowInARow) {
      streaming_ = true;
      slowInARow_ = 0;
      until_ = now + kHold;
    }
  }

  bool streaming() const { return streaming_; }

 private:
  bool streaming_ = false;
  int slowInARow_ = 0;
  Clock::time_point until_{};
};

// This thread's choice.
SlotStores& slotStores();

// What MESHCOMM_SHM_SLOT_STORES asks for: `auto` (or empty) the rule above,
// `cached` or `streaming` one kind of stores for every large copy.
enum class SlotStoreSetting { kAuto, kCached, kStreaming };
// The setting named `value`; throws InvalidArgument naming the variable for
// a value that names none.
SlotStoreSetting parseSlotStoreSetting(std::string_view value);
// MESHCOMM_SHM_SLOT_STORES, read once per process.
SlotStoreSetting slotStoreSetting();

// Copies `bytes` from `from` into this rank's slot at `slot`, with the
// stores `setting` asks for (kAuto: as this thread's SlotStores says).
// Callers (copyIn, host/shm/rounds.h) take this path only where the host's
// ranks have cores of their own: elsewhere a copy's time says more about
// who else ran on the core than about where the reader is.
// REQUIRES: bytes >= SlotStores::kMinBytes; the ranges do not overlap.
void copyIntoSlot(void* slot, const void* from, size_t bytes, SlotStoreSetting setting);

}  // namespace meshcomm::host::shm

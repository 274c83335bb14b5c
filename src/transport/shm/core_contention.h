// Whether a waiting rank should still yield its core or sleep instead.
//
// A shared-memory wait yields (sched_yield) so that a rank sharing the core
// can run. Yields that keep the thread off its core for time slices, again
// and again, mean other processes compete for it: yielding on would hand
// them a slice per pass (Linux's EEVDF scheduler moves a yielding thread's
// deadline a slice later each time, so ranks that yield often get a sliver
// of the CPU beside busy processes), while a sleeper is woken by the
// publisher and placed fairly. A single long yield is not that: with more
// ranks than cores one comes every few hundred thousand yields (a rank of
// this host that shares the core worked a while), and sleeping for a second
// on it made every call 5-10 times slower (docs/shared-memory.md, "Waiting").
//
// Thread-safety: not thread-safe; one per domain, used by its owner thread.
#pragma once

#include <chrono>

namespace meshcomm {

class CoreContention {
 public:
  using Clock = std::chrono::steady_clock;

  // A yield that took longer than this ran someone else for about a time
  // slice. (200 us sent ranks that share cores to sleep at 1 MiB, where a
  // rank's work between waits can take that long: 4 ranks on 2 cores,
  // all_reduce took 0.60x and all_gather 0.81x the time with 1 ms; two
  // busy loops on the cores are caught as before.)
  static constexpr auto kLongYield = std::chrono::milliseconds(1);
  // This many long yields within kWindow mean contention ...
  static constexpr int kLongYieldsToSleep = 3;
  static constexpr auto kWindow = std::chrono::milliseconds(100);
  // ... and waits then sleep without yielding for this long.
  static constexpr auto kSleepFor = std::chrono::seconds(1);

  // Whether a wait may yield at `now`.
  bool yieldAllowed(Clock::time_point now) const { return now >= noYieldUntil_; }

  // Notes a yield that began at `start` and returned at `end`.
  void noteYield(Clock::time_point start, Clock::time_point end) {
    if (end - start < kLongYield) return;
    if (longYields_ == 0 || end - firstLongYield_ > kWindow) {
      firstLongYield_ = end;
      longYields_ = 0;
    }
    if (++longYields_ < kLongYieldsToSleep) return;
    noYieldUntil_ = end + kSleepFor;
    longYields_ = 0;
  }

 private:
  Clock::time_point noYieldUntil_{};
  Clock::time_point firstLongYield_{};
  int longYields_ = 0;
};

}  // namespace meshcomm

// FutexMutex: a mutual-exclusion lock whose uncontended lock() and unlock()
// are one atomic instruction each, inline. The executor takes one around
// every operation (its engine lock), and through std::mutex that pair cost
// about 55 instructions of an 8-byte collective's 1,430 (glibc's call, its
// mutex-kind checks and lock elision test); this costs about 8. Contended,
// a waiter sleeps on a futex: the three-state lock of Drepper's "Futexes Are
// Tricky" (free, locked, locked with sleepers), so an unlock makes a system
// call only when somebody sleeps. Like std::mutex it is not fair and not
// reentrant, and it cannot be waited on with a CondVar.
//
// Thread-safety: for use from any thread of one process.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/thread_annotations.h"

namespace meshcomm {

class CAPABILITY("mutex") FutexMutex {
 public:
  FutexMutex() = default;
  FutexMutex(const FutexMutex&) = delete;
  FutexMutex& operator=(const FutexMutex&) = delete;

  void lock() ACQUIRE() {
    uint32_t seen = kFree;
    if (state_.compare_exchange_strong(seen, kLocked, std::memory_order_acquire)) [[likely]] {
      return;
    }
    lockContended(seen);
  }
  void unlock() RELEASE() {
    if (state_.exchange(kFree, std::memory_order_release) == kSleepers) [[unlikely]] wakeOne();
  }

 private:
  static constexpr uint32_t kFree = 0;
  static constexpr uint32_t kLocked = 1;
  static constexpr uint32_t kSleepers = 2;  // locked, and a waiter may sleep

  // `seen`: the state lock() found instead of kFree.
  void lockContended(uint32_t seen);
  void wakeOne();

  std::atomic<uint32_t> state_{kFree};
};

}  // namespace meshcomm

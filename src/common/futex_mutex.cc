#include "common/futex_mutex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace meshcomm {

void FutexMutex::lockContended(uint32_t seen) {
  // Whoever takes the lock from here marks it as having sleepers, since it
  // cannot know whether others still sleep; at worst one unlock makes a
  // wake-up call nobody needed.
  if (seen != kSleepers) seen = state_.exchange(kSleepers, std::memory_order_acquire);
  while (seen != kFree) {
    // Returns at once if the state is no longer kSleepers (EAGAIN), or on a
    // wake-up or a signal: each case tries again.
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, kSleepers,
              nullptr, nullptr, 0);
    seen = state_.exchange(kSleepers, std::memory_order_acquire);
  }
}

void FutexMutex::wakeOne() {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr,
            nullptr, 0);
}

}  // namespace meshcomm

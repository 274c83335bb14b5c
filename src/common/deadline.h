// Deadline: an absolute point on the monotonic clock that every blocking
// call carries, so nested waits share one budget instead of each restarting
// its own timeout.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace meshcomm {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // A timeout too large to add to the clock (milliseconds::max(), or
  // centuries) means no deadline, not an overflowed one in the past; a
  // negative timeout has already expired.
  static Deadline after(std::chrono::milliseconds timeout) {
    Deadline d;
    auto now = Clock::now();
    if (timeout.count() <= 0) {
      d.at_ = now;
      return d;
    }
    auto room = std::chrono::duration_cast<std::chrono::milliseconds>(
        Clock::time_point::max() - now);
    if (timeout >= room) return d;  // never
    d.at_ = now + timeout;
    return d;
  }
  static Deadline never() { return Deadline(); }

  bool expired() const { return !infinite() && Clock::now() >= at_; }
  bool infinite() const { return at_ == Clock::time_point::max(); }

  // Milliseconds left, clamped to [0, INT32_MAX]; -1 when infinite, which is
  // what poll() and epoll_wait() take for "no timeout".
  int pollTimeoutMs() const {
    if (infinite()) return -1;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    at_ - Clock::now())
                    .count();
    // Round up so a wait never ends a fraction of a millisecond early.
    if (at_ > Clock::now() && left == 0) left = 1;
    return static_cast<int>(std::clamp<int64_t>(left, 0, INT32_MAX));
  }

  std::chrono::milliseconds remaining() const {
    if (infinite()) return std::chrono::milliseconds::max();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        at_ - Clock::now());
    return std::max(left, std::chrono::milliseconds(0));
  }

  Clock::time_point at() const { return at_; }
  Deadline earlier(const Deadline& other) const {
    return at_ <= other.at_ ? *this : other;
  }

 private:
  Clock::time_point at_ = Clock::time_point::max();
};

}  // namespace meshcomm

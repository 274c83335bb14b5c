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
    d.start(Clock::now(), timeout);
    return d;
  }
  // `timeout` after the moment the deadline is first read or copied. For a
  // call whose waits usually end before they would look at it (a small
  // collective among ranks that arrive together), which then never reads
  // the clock for it; the budget starts at most one wait's spin late, and
  // every copy shares it.
  static Deadline afterFirstUse(std::chrono::milliseconds timeout) {
    Deadline d;
    d.pending_ = timeout;
    d.lazy_ = true;
    return d;
  }
  static Deadline never() { return Deadline(); }

  Deadline() = default;
  Deadline(const Deadline& other) : at_(other.at()) {}
  Deadline& operator=(const Deadline& other) {
    at_ = other.at();
    lazy_ = false;
    return *this;
  }
  // A move passes a deadline on unread: the source is not used again.
  Deadline(Deadline&& other) noexcept = default;
  Deadline& operator=(Deadline&& other) noexcept = default;

  bool expired() const { return expiredAt(Clock::now()); }
  // expired(), for a caller that has just read the clock (`now`, which
  // also starts a budget not yet started).
  bool expiredAt(Clock::time_point now) const {
    if (lazy_) [[unlikely]] start(now, pending_);
    return !infinite() && now >= at_;
  }
  bool infinite() const { return at() == Clock::time_point::max(); }

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

  Clock::time_point at() const {
    if (lazy_) [[unlikely]] start(Clock::now(), pending_);
    return at_;
  }
  Deadline earlier(const Deadline& other) const {
    return at() <= other.at() ? *this : other;
  }

 private:
  void start(Clock::time_point now, std::chrono::milliseconds timeout) const {
    lazy_ = false;
    if (timeout.count() <= 0) {
      at_ = now;
      return;
    }
    auto room = std::chrono::duration_cast<std::chrono::milliseconds>(
        Clock::time_point::max() - now);
    if (timeout >= room) return;  // never
    at_ = now + timeout;
  }

  // Not thread-safe while lazy: a deadline not yet read belongs to the one
  // thread that runs its call.
  mutable Clock::time_point at_ = Clock::time_point::max();
  mutable bool lazy_ = false;
  std::chrono::milliseconds pending_{0};  // the timeout, while lazy_
};

}  // namespace meshcomm

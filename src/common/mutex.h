// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable
// with the annotations of common/thread_annotations.h, so that clang's
// -Wthread-safety analysis can check which lock guards what (libstdc++'s
// own types carry no such annotations). They cost what the standard types
// cost (MutexLock adds one flag, for its early unlock()).
//
//   Mutex mu_;
//   int count_ GUARDED_BY(mu_);
//   ...
//   MutexLock lock(mu_);
//   while (count_ == 0) cv_.wait(mu_);
//
// Thread-safety: Mutex and CondVar are for use from any thread; a MutexLock
// belongs to the thread that made it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.h"

namespace meshcomm {

// A non-reentrant mutual-exclusion lock. lock()/unlock() make it usable with
// the standard's lock types too, though those carry no annotations.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex (or another lock with lock() and unlock(), such as
// FutexMutex) for its scope; unlock() lets go of it earlier.
template <class M>
class SCOPED_CAPABILITY ScopedLock {
 public:
  explicit ScopedLock(M& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~ScopedLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  ScopedLock(const ScopedLock&) = delete;
  ScopedLock& operator=(const ScopedLock&) = delete;

  // Releases the mutex before the end of the scope. Call at most once.
  void unlock() RELEASE() {
    held_ = false;
    mu_.unlock();
  }

 private:
  M& mu_;
  bool held_ = true;
};
using MutexLock = ScopedLock<Mutex>;

// A condition variable whose waits name the Mutex they release, so the
// analysis knows the caller holds it. Waits may wake spuriously: callers
// re-check their condition in a loop, with the guarded state in plain view
// of the analysis (no predicate lambdas, which it cannot see into).
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases mu, sleeps until notified, and takes mu again.
  void wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> held(mu.mu_, std::adopt_lock);
    cv_.wait(held);
    held.release();  // mu stays locked, owned by the caller again
  }
  // As wait(), but returns false once `until` has passed (mu held again).
  template <class Clock, class Duration>
  bool waitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& until) REQUIRES(mu) {
    std::unique_lock<std::mutex> held(mu.mu_, std::adopt_lock);
    const bool notified = cv_.wait_until(held, until) == std::cv_status::no_timeout;
    held.release();
    return notified;
  }

  void notifyOne() { cv_.notify_one(); }
  void notifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace meshcomm

// Work: the handle of one operation issued on a process group.
//
// An operation runs on its group's executor in issue order; its Work
// completes when the operation has finished on this rank (outputs written,
// inputs no longer read). wait() is equivalent to
//   while (!isCompleted()) sleep_until_progress();  if (error) rethrow;
//
// Thread-safety: every method may be called from any thread, any number of
// times; all waiters are released together.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>

#include "meshcomm/export.h"

namespace meshcomm {

class MESHCOMM_API Work {
 public:
  explicit Work(std::string description);
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Waits for completion and rethrows the error that ended the operation,
  // if any. With a timeout, returns false if it passed first (the operation
  // keeps running; wait again later). Throws on error even after a
  // previous wait() observed it. Without a timeout it first runs the
  // operation itself when it can (runHereIfQueued()).
  bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds::max());
  // When the operation is still queued and its group's executor is idle,
  // runs it (and any queued ahead of it, in order) on the calling thread,
  // which would otherwise sleep while the executor's thread woke up to run
  // it; returns whether it did. Afterwards the operation may have finished
  // (a collective) or have requests in flight (point to point).
  bool runHereIfQueued();

  bool isCompleted() const;
  // Whether the operation ended with an error (only meaningful once completed).
  bool failed() const;
  // The error that ended the operation, or null.
  std::exception_ptr exception() const;
  // "all_reduce #12 on group world" and the like.
  const std::string& description() const { return description_; }
  // For a completed receive (recv, recvAnySource): the group rank its
  // message came from. -1 for every other operation, and until completion.
  int sourceRank() const;

  // Called by the executor: marks the operation done, with or without an
  // error, and wakes every waiter. Only the first call has an effect.
  // `sourceRank`: what sourceRank() will say.
  void complete(std::exception_ptr error = nullptr, int sourceRank = -1);

 private:
  const std::string description_;
  // Plain standard types, so this installed header needs nothing from the
  // library's sources; the lock discipline is stated here in words, not in
  // the thread-safety annotations the library's own fields carry.
  mutable std::mutex mu_;
  std::condition_variable cv_;  // waits under mu_
  // Written only under mu_ (complete()); read without it on the fast
  // paths: error_ is set before done_ is, and never changes afterwards.
  std::atomic<bool> done_{false};
  std::exception_ptr error_;  // written under mu_; read once done_ is true
  int sourceRank_ = -1;       // as error_
  // Set once by the executor that queues the Work, before anyone else sees
  // it; runs it on the calling thread if it can (runHereIfQueued()).
  std::function<bool()> runHere_;
  friend class Executor;
};

}  // namespace meshcomm

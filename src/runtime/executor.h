// Executor: runs one group's operations in issue order, like a stream.
//
// Each operation is a function that either finishes its communication
// (collectives) or posts requests and returns them (asynchronous
// point-to-point); the executor completes the operation's Work when its
// requests are done, progressing them in the background between and
// during later operations. A blocking submission whose queue is empty runs
// on the caller's thread, which saves a thread hand-off (tens of
// microseconds here) on every synchronous call.
//
// Thread-safety: submit() may be called from any thread. The transport is
// driven by exactly one thread at a time: the holder of the engine lock
// (engineMu_), which guards the transport and the in-flight list; the
// queue is guarded by mu_. The annotations (common/thread_annotations.h)
// state both, and clang's -Wthread-safety checks them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/fd.h"
#include "common/futex_mutex.h"
#include "common/interrupt.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "meshcomm/work.h"
#include "transport/transport.h"

namespace meshcomm {

class Executor {
 public:
  // What an operation leaves in flight when its body returns: requests
  // that must finish by `deadline` (none when it finished its communication).
  struct Pending {
    std::vector<RequestPtr> requests;
    Deadline deadline;
    std::string during;  // for the timeout message
    // Called once the requests are done (with null) or failed, before the
    // Work completes: the flight recorder's end of the operation.
    std::function<void(const std::exception_ptr&)> finished;
  };
  using Body = std::function<Pending()>;

  Executor(std::string groupName, Transport& transport);
  // Waits for the queued operations, stops the thread, then fails what is
  // still in flight. Once; the destructor calls it too. The owner calls it
  // while the operations' bodies can still use everything they captured
  // (the group calls it before it lets go of the executor).
  void close() EXCLUDES(mu_, engineMu_);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Queues body. With `blocking`, returns only after it completed (unless
  // the calling thread has an interrupt check and the body had to queue).
  // The body runs holding the engine lock (see assertDriving()); it must
  // not submit to its own executor.
  std::shared_ptr<Work> submit(std::string description, Body body, bool blocking)
      EXCLUDES(mu_, engineMu_);

  // Runs the queued operations up to and including `work`'s on the calling
  // thread, unless another thread is running one or `work` is no longer
  // queued; returns whether it ran `work`. Work::runHereIfQueued() calls it:
  // a thread about to wait for its Work runs it instead of sleeping while
  // the executor's thread wakes up (the hand-off costs tens of microseconds
  // on a busy host, more than a small operation).
  bool runQueuedUpTo(const Work* work) EXCLUDES(mu_, engineMu_);

  // The blocking fast path, for callers that need no Work or Body of their
  // own: when nothing is queued or running, claims the engine for the
  // calling thread and returns true; the caller then runs its operation
  // (after throwIfBroken()) and calls endInline(). Returns false when the
  // caller must submit() instead.
  bool beginInline() TRY_ACQUIRE(true, engineMu_) EXCLUDES(mu_);
  void endInline() RELEASE(engineMu_) EXCLUDES(mu_);
  // Rethrows the error that broke the group (see error()), if any.
  void throwIfBroken() const REQUIRES(engineMu_) EXCLUDES(mu_);

  // Aborts from any thread: the operation driving the transport ends with
  // Aborted(message) at its next check (within milliseconds: the transport
  // is woken), then breakTransport(error) runs holding the engine lock, in
  // flight work completes with the error, and every later operation fails
  // with it at once. Safe to call again (the first message stays).
  void abort(const std::string& message,
             const std::function<void(const std::exception_ptr&)>& breakTransport)
      EXCLUDES(mu_, engineMu_);
  // The error that broke the group: the first one an operation of this
  // rank failed with (recordError), else the transport's as of the last
  // operation's end; null while healthy. Any thread.
  std::exception_ptr error() const EXCLUDES(mu_);
  // Remembers why an operation broke the group, unless an error is
  // already remembered; later operations fail with it (throwIfBroken).
  void recordError(const std::exception_ptr& error) EXCLUDES(mu_);

  // The engine lock, for annotating state that only the thread driving
  // this executor's transport touches (GUARDED_BY(executor->engine())).
  const FutexMutex& engine() const RETURN_CAPABILITY(engineMu_) { return engineMu_; }
  // States, for the analysis, that the caller holds the engine lock: a
  // Body calls it, since the analysis cannot follow submit() into the
  // body's run. Checks nothing at run time.
  void assertDriving() const ASSERT_CAPABILITY(engineMu_) {}

 private:
  struct Task {
    std::shared_ptr<Work> work;
    Body body;
  };
  struct InFlight {
    std::shared_ptr<Work> work;
    Pending pending;
  };
  // What a queued Work's runHere_ reaches the executor through: Works may
  // outlive it, so the destructor detaches it, after waiting for threads
  // inside runQueuedUpTo().
  struct RunHere {
    std::mutex mu;
    std::condition_variable idle;  // active dropped to 0
    Executor* executor = nullptr;  // null once detached
    int active = 0;                // threads inside runQueuedUpTo()
  };

  void loop() EXCLUDES(mu_, engineMu_);
  // Pops the front task (the queue is not empty) and claims kRunning for
  // it; returns the state it found.
  uint32_t claimFront(Task& task) REQUIRES(mu_);
  // Runs a claimed task holding the engine lock, reaps, releases kRunning.
  void runClaimed(Task& task) EXCLUDES(mu_, engineMu_);
  // Runs one task. The caller reaps afterwards.
  void run(Task& task) REQUIRES(engineMu_) EXCLUDES(mu_);
  // Completes in-flight works whose requests are done (or all of them,
  // with the error, once the transport is broken).
  void reapInFlight() REQUIRES(engineMu_) EXCLUDES(mu_);
  void wake();
  // Records the transport's error for error(), once it breaks.
  void noteBroken() REQUIRES(engineMu_) EXCLUDES(mu_);
  // Transport::wakeProgress(), the one transport call that is thread-safe,
  // so made without the engine lock.
  void wakeTransport() NO_THREAD_SAFETY_ANALYSIS;

  const std::string groupName_;
  Transport& transport_ GUARDED_BY(engineMu_);
  Fd wakeFd_;  // eventfd that interrupts background progress

  // state_ bits. kRunning is claimed by compare-and-swap, so a blocking
  // call on an idle executor (state_ == 0) starts and ends without taking
  // mu_; every other bit changes under mu_, and whoever clears kRunning
  // while another bit is set then takes mu_ and notifies cv_.
  static constexpr uint32_t kRunning = 1;   // a task is executing somewhere
  static constexpr uint32_t kQueued = 2;    // queue_ is not empty
  static constexpr uint32_t kInFlight = 4;  // inFlight_ is not empty
  static constexpr uint32_t kClosing = 8;   // the destructor waits for the queue
  static constexpr uint32_t kStop = 16;     // the thread must exit
  // Claims kRunning unless a task runs or waits; `prior` gets the state
  // it found.
  bool claimRunning(uint32_t& prior);
  void releaseRunning() EXCLUDES(mu_);

  mutable Mutex mu_;
  CondVar cv_;  // waits under mu_
  std::deque<Task> queue_ GUARDED_BY(mu_);
  std::atomic<uint32_t> state_{0};
  std::exception_ptr error_ GUARDED_BY(mu_);
  std::atomic<bool> errorNoted_{false};
  // Raised by abort(); checked by the waits of whichever thread drives.
  AbortToken abortToken_;
  // abort() calls waiting for the engine: background progress lets go of
  // it for them instead of taking it straight back (the mutex is not fair).
  std::atomic<int> abortsWaiting_{0};

  // Held by the one thread driving transport_. Taken before mu_.
  FutexMutex engineMu_ ACQUIRED_BEFORE(mu_);
  const std::shared_ptr<RunHere> runHere_;
  std::vector<InFlight> inFlight_ GUARDED_BY(engineMu_);
  std::thread thread_;
};

}  // namespace meshcomm

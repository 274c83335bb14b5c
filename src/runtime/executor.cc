#include "runtime/executor.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include "common/check.h"
#include "common/interrupt.h"
#include "meshcomm/error.h"
#include "transport/failure.h"

namespace meshcomm {
namespace {
constexpr auto kBackgroundSlice = std::chrono::milliseconds(50);
}  // namespace

Executor::Executor(std::string groupName, Transport& transport)
    : groupName_(std::move(groupName)),
      transport_(transport),
      wakeFd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      runHere_(std::make_shared<RunHere>()) {
  MESHCOMM_CHECK(wakeFd_.valid(), "eventfd failed");
  runHere_->executor = this;
  thread_ = std::thread([this] { loop(); });
}

Executor::~Executor() { close(); }

void Executor::close() {
  if (!thread_.joinable()) return;  // closed already
  {
    std::unique_lock<std::mutex> lock(runHere_->mu);
    runHere_->idle.wait(lock, [&] { return runHere_->active == 0; });
    runHere_->executor = nullptr;
  }
  {
    MutexLock lock(mu_);
    state_.fetch_or(kClosing);
    while ((state_.load() & (kQueued | kRunning)) != 0) cv_.wait(mu_);
    state_.fetch_or(kStop);
  }
  wake();
  thread_.join();
  ScopedLock engine(engineMu_);
  for (auto& f : inFlight_) {
    auto error = std::make_exception_ptr(
        Aborted(f.work->description() + ": the group was destroyed before it completed"));
    if (f.pending.finished) f.pending.finished(error);
    f.work->complete(error);
  }
  inFlight_.clear();
}

void Executor::wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wakeFd_.get(), &one, sizeof(one));
  wakeTransport();
  cv_.notifyAll();
}

void Executor::wakeTransport() { transport_.wakeProgress(); }

bool Executor::claimRunning(uint32_t& prior) {
  prior = state_.load(std::memory_order_relaxed);
  do {
    if ((prior & (kQueued | kRunning)) != 0) return false;
  } while (!state_.compare_exchange_weak(prior, prior | kRunning, std::memory_order_acq_rel));
  return true;
}

void Executor::releaseRunning() {
  const uint32_t after = state_.fetch_and(~kRunning, std::memory_order_acq_rel) & ~kRunning;
  // With nothing else set nobody waits for this (the thread waits only for
  // queued or in-flight work, the destructor sets kClosing first).
  if (after == 0) return;
  // Taking mu_ orders this with a waiter between its check and its sleep.
  { MutexLock lock(mu_); }
  cv_.notifyAll();
}

bool Executor::beginInline() {
  uint32_t prior;
  if (!claimRunning(prior)) return false;
  // Only background progress can hold the engine now; ask it to hand over.
  if ((prior & kInFlight) != 0) wake();
  engineMu_.lock();
  setThreadAbortToken(&abortToken_);
  return true;
}

void Executor::endInline() {
  reapInFlight();
  noteBroken();
  setThreadAbortToken(nullptr);
  engineMu_.unlock();
  releaseRunning();
}

void Executor::noteBroken() {
  if (errorNoted_.load(std::memory_order_relaxed) || !transport_.broken()) return;
  auto broken = transport_.brokenError();
  if (!broken) return;
  MutexLock lock(mu_);
  if (!error_) error_ = broken;
  errorNoted_.store(true, std::memory_order_relaxed);
}

std::exception_ptr Executor::error() const {
  MutexLock lock(mu_);
  return error_;
}

void Executor::recordError(const std::exception_ptr& error) {
  MutexLock lock(mu_);
  if (!error_) error_ = error;
  errorNoted_.store(true, std::memory_order_relaxed);
}

void Executor::abort(const std::string& message,
                     const std::function<void(const std::exception_ptr&)>& breakTransport) {
  abortToken_.raise(message);
  // Whoever drives the transport sees the token at its next check; the
  // wake-up cuts its sleep short, then it lets go of the engine.
  abortsWaiting_.fetch_add(1);
  wake();
  ScopedLock engine(engineMu_);
  abortsWaiting_.fetch_sub(1);
  if (!transport_.brokenError()) {
    breakTransport(std::make_exception_ptr(Aborted(abortToken_.message())));
  }
  reapInFlight();
  noteBroken();
}

void Executor::throwIfBroken() const {
  // The error this rank's group broke with first, which may differ from the
  // transport's (a peer's abort reaching the shared segment first).
  if (errorNoted_.load(std::memory_order_relaxed)) {
    std::exception_ptr noted;
    {
      MutexLock lock(mu_);
      noted = error_;
    }
    if (noted) std::rethrow_exception(noted);
  }
  if (!transport_.broken()) return;
  if (auto broken = transport_.brokenError()) std::rethrow_exception(broken);
}

std::shared_ptr<Work> Executor::submit(std::string description, Body body, bool blocking) {
  auto work = std::make_shared<Work>(std::move(description));
  if (blocking && beginInline()) {
    Task task{work, std::move(body)};
    run(task);
    endInline();
    return work;
  }
  work->runHere_ = [runHere = runHere_, target = work.get()] {
    {
      std::lock_guard<std::mutex> lock(runHere->mu);
      if (runHere->executor == nullptr) return false;
      ++runHere->active;
    }
    const bool ran = runHere->executor->runQueuedUpTo(target);
    std::lock_guard<std::mutex> lock(runHere->mu);
    if (--runHere->active == 0) runHere->idle.notify_all();
    return ran;
  };
  MutexLock lock(mu_);
  queue_.push_back(Task{work, std::move(body)});
  const uint32_t prior = state_.fetch_or(kQueued);
  lock.unlock();
  if ((prior & kInFlight) != 0) {
    wake();  // background progress may sleep in the transport: interrupt it
  } else {
    // The thread sleeps on cv_ (or runs a task, and looks at the queue
    // next): the eventfd and the transport's wake-up are two system calls
    // this common case does without.
    cv_.notifyAll();
  }
  // A thread that can be interrupted waits on the Work itself, so that an
  // interrupt ends its wait without abandoning the operations queued ahead
  // of this one (meshcomm/interrupt.h).
  if (blocking && !interruptCheckInstalled()) work->wait();
  return work;
}

uint32_t Executor::claimFront(Task& task) {
  task = std::move(queue_.front());
  queue_.pop_front();
  // One step, so that no blocking caller finds the state idle between the
  // queue emptying and this thread claiming it.
  uint32_t prior = state_.load();
  while (!state_.compare_exchange_weak(prior,
                                       (prior | kRunning) & (queue_.empty() ? ~kQueued : ~0u))) {
  }
  return prior;
}

void Executor::runClaimed(Task& task) {
  {
    ScopedLock engine(engineMu_);
    setThreadAbortToken(&abortToken_);
    run(task);
    reapInFlight();
    noteBroken();
    setThreadAbortToken(nullptr);
  }
  releaseRunning();
}

bool Executor::runQueuedUpTo(const Work* target) {
  for (;;) {
    Task task;
    uint32_t prior = 0;
    {
      MutexLock lock(mu_);
      bool queued = false;
      for (const Task& t : queue_) queued = queued || t.work.get() == target;
      if (!queued || (state_.load() & (kRunning | kStop)) != 0) return false;
      prior = claimFront(task);
    }
    // Background progress may hold the engine; ask it to hand over.
    if ((prior & kInFlight) != 0) wake();
    runClaimed(task);
    if (task.work.get() == target) return true;
  }
}

namespace {

// What Work::sourceRank() says once `pending` succeeded: the sender of a
// single receive.
int sourceOf(const Executor::Pending& pending) {
  if (pending.requests.size() != 1 || pending.requests.front()->isSend) return -1;
  return pending.requests.front()->peer;
}

}  // namespace

void Executor::run(Task& task) {
  try {
    throwIfBroken();
    Pending pending = task.body();
    bool done = true;
    for (const auto& r : pending.requests) done = done && r->done();
    if (done) {
      if (pending.finished) pending.finished(nullptr);
      task.work->complete(nullptr, sourceOf(pending));
    } else {
      inFlight_.push_back(InFlight{task.work, std::move(pending)});
      MutexLock lock(mu_);
      state_.fetch_or(kInFlight);
    }
  } catch (...) {
    task.work->complete(std::current_exception());
  }
}

void Executor::reapInFlight() {
  // Nothing in flight means kInFlight is already clear (it is set only
  // together with a push below engineMu_, which the caller holds).
  if (inFlight_.empty()) return;
  for (const auto& f : inFlight_) {
    if (transport_.brokenError() || !f.pending.deadline.expired()) continue;
    bool done = true;
    for (const auto& r : f.pending.requests) done = done && r->done();
    if (done) continue;
    // The peer never posted the matching operation. The half-finished
    // transfer leaves the stream unusable, so the group breaks.
    transport_.abort(std::make_exception_ptr(
        Timeout(timedOutMessage(f.pending.during, "its peer to post the matching send or "
                                                       "receive"))));
  }
  auto broken = transport_.brokenError();
  for (size_t i = 0; i < inFlight_.size();) {
    InFlight& f = inFlight_[i];
    bool done = true;
    bool transferred = true;  // every request moved all its bytes
    for (const auto& r : f.pending.requests) {
      done = done && r->done();
      transferred = transferred && r->state == Request::State::kDone;
    }
    if (broken || done) {
      // Transfers that finished before the group broke succeeded, whether
      // or not this pass reaps them before the break: the group's error
      // belongs to the next call, not to them.
      const std::exception_ptr error = done && transferred ? nullptr : broken;
      if (f.pending.finished) f.pending.finished(error);
      f.work->complete(error, sourceOf(f.pending));
      inFlight_.erase(inFlight_.begin() + static_cast<ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
  MutexLock lock(mu_);
  if (inFlight_.empty()) state_.fetch_and(~kInFlight);
}

void Executor::loop() {
  for (;;) {
    MutexLock lock(mu_);
    for (;;) {
      const uint32_t s = state_.load();
      if ((s & kStop) != 0 || ((s & (kQueued | kInFlight)) != 0 && (s & kRunning) == 0)) break;
      cv_.wait(mu_);
    }
    if ((state_.load() & kStop) != 0) return;
    if (!queue_.empty()) {
      // kQueued was set, so no caller can have claimed kRunning first.
      Task task;
      claimFront(task);
      lock.unlock();
      runClaimed(task);
      continue;
    }
    // Only in-flight point-to-point requests: move them along until they
    // finish or a new task arrives.
    // Drain the wake-up fd before re-checking for work: a submitter sets
    // its state before signalling, so a signal sent after the check below
    // still interrupts the progress call.
    lock.unlock();
    uint64_t drained;
    [[maybe_unused]] ssize_t n = ::read(wakeFd_.get(), &drained, sizeof(drained));
    if ((state_.load() & (kStop | kRunning | kQueued)) != 0) continue;
    if (abortsWaiting_.load() != 0) {
      std::this_thread::yield();
      continue;
    }
    ScopedLock engine(engineMu_);
    transport_.progress(kBackgroundSlice, wakeFd_.get());
    reapInFlight();
    noteBroken();
  }
}

}  // namespace meshcomm

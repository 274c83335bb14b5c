#include "runtime/executor.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include "common/check.h"
#include "common/interrupt.h"
#include "meshcomm/error.h"

namespace meshcomm {
namespace {
constexpr auto kBackgroundSlice = std::chrono::milliseconds(50);
}  // namespace

Executor::Executor(std::string groupName, Transport& transport)
    : groupName_(std::move(groupName)),
      transport_(transport),
      wakeFd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  MESHCOMM_CHECK(wakeFd_.valid(), "eventfd failed");
  thread_ = std::thread([this] { loop(); });
}

Executor::~Executor() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.empty() && !running_; });
    stop_ = true;
  }
  wake();
  thread_.join();
  std::lock_guard<std::mutex> engine(engineMu_);
  for (auto& f : inFlight_) {
    f.work->complete(std::make_exception_ptr(
        Aborted(f.work->description() + ": the group was destroyed before it completed")));
  }
  inFlight_.clear();
}

void Executor::wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wakeFd_.get(), &one, sizeof(one));
  cv_.notify_all();
}

bool Executor::beginInline() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!queue_.empty() || running_) return false;
  running_ = true;
  bool backgroundBusy = hasInFlight_;
  lock.unlock();
  // Only background progress can hold the engine now; ask it to hand over.
  if (backgroundBusy) wake();
  engineMu_.lock();
  return true;
}

void Executor::endInline() {
  reapInFlight();
  engineMu_.unlock();
  std::unique_lock<std::mutex> lock(mu_);
  running_ = false;
  bool wakeExecutor = hasInFlight_ || !queue_.empty() || stop_;
  lock.unlock();
  if (wakeExecutor) cv_.notify_all();
}

void Executor::throwIfBroken() const {
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
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(Task{work, std::move(body)});
  lock.unlock();
  wake();
  // A thread that can be interrupted waits on the Work itself, so that an
  // interrupt ends its wait without abandoning the operations queued ahead
  // of this one (meshcomm/interrupt.h).
  if (blocking && !interruptCheckInstalled()) work->wait();
  return work;
}

void Executor::run(Task& task) {
  try {
    throwIfBroken();
    Pending pending = task.body();
    bool done = true;
    for (const auto& r : pending.requests) done = done && r->done();
    if (done) {
      task.work->complete();
    } else {
      inFlight_.push_back(InFlight{task.work, std::move(pending)});
      std::lock_guard<std::mutex> lock(mu_);
      hasInFlight_ = true;
    }
  } catch (...) {
    task.work->complete(std::current_exception());
  }
}

void Executor::reapInFlight() {
  // Nothing in flight means hasInFlight_ is already false (it is set only
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
        Timeout(f.pending.during + " timed out; its peer never posted the matching "
                                   "send or receive")));
  }
  auto broken = transport_.brokenError();
  for (size_t i = 0; i < inFlight_.size();) {
    InFlight& f = inFlight_[i];
    bool done = true;
    for (const auto& r : f.pending.requests) done = done && r->done();
    if (broken || done) {
      f.work->complete(broken);
      inFlight_.erase(inFlight_.begin() + static_cast<ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
  std::lock_guard<std::mutex> lock(mu_);
  hasInFlight_ = !inFlight_.empty();
}

void Executor::loop() {
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || (!queue_.empty() && !running_) || (hasInFlight_ && !running_); });
    if (stop_) return;
    if (!queue_.empty()) {
      Task task = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      lock.unlock();
      {
        std::lock_guard<std::mutex> engine(engineMu_);
        run(task);
        reapInFlight();
      }
      lock.lock();
      running_ = false;
      lock.unlock();
      cv_.notify_all();
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
    lock.lock();
    bool yield = stop_ || running_ || !queue_.empty();
    lock.unlock();
    if (yield) continue;
    std::lock_guard<std::mutex> engine(engineMu_);
    transport_.progress(kBackgroundSlice, wakeFd_.get());
    reapInFlight();
  }
}

}  // namespace meshcomm

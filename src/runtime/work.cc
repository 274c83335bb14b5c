#include "meshcomm/work.h"

namespace meshcomm {

Work::Work(std::string description) : description_(std::move(description)) {}

bool Work::wait(std::chrono::milliseconds timeout) {
  if (done_.load(std::memory_order_acquire)) {
    if (error_) std::rethrow_exception(error_);
    return true;
  }
  if (timeout == std::chrono::milliseconds::max()) runHereIfQueued();
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout == std::chrono::milliseconds::max()) {
    cv_.wait(lock, [&] { return done_.load(); });
  } else if (!cv_.wait_for(lock, timeout, [&] { return done_.load(); })) {
    return false;
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

bool Work::runHereIfQueued() {
  return runHere_ && !done_.load(std::memory_order_acquire) && runHere_();
}

bool Work::isCompleted() const { return done_.load(std::memory_order_acquire); }

bool Work::failed() const { return done_.load(std::memory_order_acquire) && error_ != nullptr; }

std::exception_ptr Work::exception() const {
  return done_.load(std::memory_order_acquire) ? error_ : nullptr;
}

int Work::sourceRank() const {
  return done_.load(std::memory_order_acquire) ? sourceRank_ : -1;
}

void Work::complete(std::exception_ptr error, int sourceRank) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_.load(std::memory_order_relaxed)) return;
    error_ = std::move(error);
    sourceRank_ = error_ ? -1 : sourceRank;
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

}  // namespace meshcomm

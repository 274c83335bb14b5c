#include "meshcomm/work.h"

namespace meshcomm {

Work::Work(std::string description) : description_(std::move(description)) {}

bool Work::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout == std::chrono::milliseconds::max()) {
    cv_.wait(lock, [&] { return done_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
    return false;
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

bool Work::isCompleted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool Work::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && error_ != nullptr;
}

std::exception_ptr Work::exception() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void Work::complete(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

}  // namespace meshcomm

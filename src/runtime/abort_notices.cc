#include "runtime/abort_notices.h"

#include <chrono>
#include <vector>

#include "common/logging.h"
#include "meshcomm/error.h"
#include "transport/peer_monitor.h"

namespace meshcomm {
namespace {

// How long one wait for the next notice lasts. Only bounds the wait (every
// blocking call has a deadline) and paces the check for a skipped slot:
// stopping interrupts the wait, and a notice ends it.
constexpr std::chrono::milliseconds kWaitSlice{10000};

}  // namespace

void AbortNotice::set(std::exception_ptr error) {
  int expected = kIdle;
  if (!state_.compare_exchange_strong(expected, kWriting, std::memory_order_acq_rel)) return;
  error_ = std::move(error);
  state_.store(kSet, std::memory_order_release);
  MutexLock lock(mu_);
  if (listener_) listener_(error_);
}

void AbortNotice::listen(Listener listener) {
  MutexLock lock(mu_);
  listener_ = std::move(listener);
}

AbortNoticeWatcher::AbortNoticeWatcher(std::shared_ptr<TCPStore> connection,
                                       const std::string& jobPrefix)
    : connection_(std::move(connection)),
      jobStore_(std::make_shared<PrefixStore>(jobPrefix, connection_)) {
  thread_ = std::thread([this] { run(); });
}

AbortNoticeWatcher::~AbortNoticeWatcher() {
  stopping_.store(true);
  connection_->interrupt();
  thread_.join();
}

void AbortNoticeWatcher::watch(const std::string& abortKey,
                               const std::shared_ptr<AbortNotice>& notice) {
  MutexLock lock(mu_);
  // Groups destroyed since leave expired entries; drop them here, where
  // the map grows, so it stays as large as the live groups.
  for (auto it = watched_.begin(); it != watched_.end();) {
    it = it->second.expired() ? watched_.erase(it) : std::next(it);
  }
  watched_[abortKey] = notice;
}

void AbortNoticeWatcher::deliver(const std::string& abortKey) {
  std::shared_ptr<AbortNotice> notice;
  {
    MutexLock lock(mu_);
    auto it = watched_.find(abortKey);
    if (it != watched_.end()) notice = it->second.lock();
  }
  if (!notice || notice->arrived()) return;
  // The key was set before its notice was posted.
  if (auto error = PeerMonitor::errorOfAbortValue(jobStore_->get(abortKey), "")) {
    notice->set(error);
  }
}

void AbortNoticeWatcher::run() {
  int64_t next = 1;
  // Slices in a row that found slot `next` claimed but still empty.
  int claimedButEmpty = 0;
  try {
    while (!stopping_.load()) {
      const std::string slot = PeerMonitor::abortNoticeKey(next);
      try {
        jobStore_->wait({slot}, kWaitSlice);
      } catch (const Timeout&) {
        // A process that died between claiming a slot and filling it would
        // hold every later notice back: a slot found claimed and empty for
        // a whole slice is skipped.
        const bool claimed = jobStore_->add(PeerMonitor::abortNoticeCountKey(), 0) >= next;
        claimedButEmpty = claimed ? claimedButEmpty + 1 : 0;
        if (claimedButEmpty >= 2) {
          ++next;
          claimedButEmpty = 0;
        }
        continue;
      }
      const Bytes key = jobStore_->get(slot);
      ++next;
      claimedButEmpty = 0;
      deliver(std::string(key.begin(), key.end()));
    }
  } catch (const std::exception& e) {
    // Interrupted (the World is closing) or the store is gone, which the
    // operations' own waits report.
    if (!stopping_.load()) MESHCOMM_LOG(kInfo, "abort notices: no longer watched: " << e.what());
  } catch (...) {
    MESHCOMM_LOG(kInfo, "abort notices: no longer watched");
  }
}

}  // namespace meshcomm

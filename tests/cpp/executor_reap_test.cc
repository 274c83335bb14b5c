// The executor's reaping of requests left in flight when the group breaks
// (src/runtime/executor.h): a Work whose transfers all finished before the
// break succeeds, even when the same progress pass that finished them also
// met the break (a peer's abort read right after the last bytes left); a
// Work with a transfer still unfinished fails with the group's error.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>

#include "caught_error.h"
#include "meshcomm/error.h"
#include "pending_transport.h"
#include "runtime/executor.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

// On its first progress() after arm(): finishes the first `finishing`
// posted requests, then breaks (failing the rest), in that one pass.
class FinishThenBreakTransport final : public PendingTransport {
 public:
  void wait(std::span<const RequestPtr>, const OpContext& ctx) override {
    throw Error(ctx.describe() + ": not used by these tests");
  }
  bool poll(const std::string&) override { return false; }
  void progress(std::chrono::milliseconds, int) override {
    if (!armed_.load() || broken_) return;
    for (size_t i = 0; i < pending_.size() && i < finishing_; ++i) {
      pending_[i]->state = Request::State::kDone;
    }
    abort(std::make_exception_ptr(Mismatch("rank 1 aborted the group: a mismatch")));
  }

  // Thread-safe: the executor's thread reads it.
  void arm(size_t finishing) {
    finishing_ = finishing;
    armed_.store(true);
  }

 private:
  size_t finishing_ = 0;
  std::atomic<bool> armed_{false};
};

Executor::Body oneRequest(FinishThenBreakTransport& t, bool isSend) {
  return [&t, isSend] {
    Executor::Pending p;
    p.requests.push_back(isSend ? t.postSend(1, 1, {}, nullptr, 0) : t.postRecv(1, 1, {}, nullptr, 0));
    p.deadline = Deadline::after(30s);
    p.during = isSend ? "async send to rank 1" : "async receive from rank 1";
    return p;
  };
}

TEST(ExecutorReap, TransfersDoneBeforeTheBreakSucceedTheRestFail) {
  FinishThenBreakTransport transport;
  Executor executor("test_group", transport);
  auto sent = executor.submit("send", oneRequest(transport, true), false);
  auto received = executor.submit("recv", oneRequest(transport, false), false);
  // Both are in flight (posted, not finished) before the pass that ends them.
  EXPECT_FALSE(sent->wait(20ms));
  transport.arm(1);
  std::string what;
  EXPECT_EQ(catchError([&] { EXPECT_TRUE(sent->wait(5s)); }, &what), Caught::kNone)
      << "the send finished before the group broke, yet: " << what;
  EXPECT_EQ(catchError([&] { received->wait(5s); }, &what), Caught::kMismatch) << what;
  // The break is the group's: the next operation fails with it.
  auto later = executor.submit("later", [] { return Executor::Pending{}; }, true);
  EXPECT_EQ(catchError([&] { later->wait(); }), Caught::kMismatch);
}

}  // namespace
}  // namespace meshcomm::test

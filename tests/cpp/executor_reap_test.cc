// The executor's reaping of requests left in flight when the group breaks
// (src/runtime/executor.h): a Work whose transfers all finished before the
// break succeeds, even when the same progress pass that finished them also
// met the break (a peer's abort read right after the last bytes left); a
// Work with a transfer still unfinished fails with the group's error.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "caught_error.h"
#include "meshcomm/error.h"
#include "runtime/executor.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

// On its first progress() after arm(): finishes the first `finishing`
// posted requests, then breaks (failing the rest), in that one pass.
class FinishThenBreakTransport final : public Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  RequestPtr postSend(int peer, uint64_t tag, const MessageSignature& sig, const void* data,
                      size_t bytes) override {
    return post(makeRequest(true, peer, tag, sig, data, bytes));
  }
  RequestPtr postRecv(int peer, uint64_t tag, const MessageSignature& sig, void* data,
                      size_t bytes) override {
    return post(makeRequest(false, peer, tag, sig, data, bytes));
  }
  RequestPtr postRecvAny(uint64_t tag, const MessageSignature& sig, void* data,
                         size_t bytes) override {
    return post(makeRequest(false, kAnyPeer, tag, sig, data, bytes));
  }
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
  bool hasPending() const override { return !pending_.empty(); }
  void abort(std::exception_ptr error) override {
    if (!broken_) broken_ = error;
    for (auto& r : pending_) {
      if (!r->done()) r->state = Request::State::kFailed;
    }
    pending_.clear();
  }
  std::exception_ptr brokenError() const override { return broken_; }

  // Thread-safe: the executor's thread reads it.
  void arm(size_t finishing) {
    finishing_ = finishing;
    armed_.store(true);
  }

 private:
  RequestPtr post(RequestPtr r) {
    pending_.push_back(r);
    return r;
  }
  std::vector<RequestPtr> pending_;
  size_t finishing_ = 0;
  std::atomic<bool> armed_{false};
  std::exception_ptr broken_;
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

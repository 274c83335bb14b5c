// The per-group executor (src/runtime/executor.h) over a transport whose
// requests finish when the test says so: issue order across threads, the
// blocking call's inline path and its queued path, errors that break the
// group and errors that do not, requests left in flight (finished in the
// background, or timed out), and destruction with work still queued.
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "caught_error.h"
#include "pending_transport.h"
#include "runtime/executor.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

// Requests complete only after release(): the next time a thread drives
// the transport (the executor's, in the background), so a Request's state
// is only ever touched by the thread that holds the executor's engine.
class ReleasedTransport final : public PendingTransport {
 public:
  void wait(std::span<const RequestPtr> requests, const OpContext& ctx) override {
    for (;;) {
      settle();
      bool done = true;
      for (const auto& r : requests) done = done && r->done();
      if (done) return;
      if (ctx.deadline.expired()) throw Timeout(ctx.describe() + " timed out");
      std::this_thread::sleep_for(1ms);
    }
  }
  bool poll(const std::string&) override {
    const size_t before = pending_.size();
    settle();
    return pending_.size() != before;
  }
  void progress(std::chrono::milliseconds budget, int interruptFd) override {
    settle();
    if (pending_.empty()) return;
    // Short naps, so a release() is noticed promptly.
    pollfd p{interruptFd, POLLIN, 0};
    ::poll(&p, interruptFd >= 0 ? 1 : 0, static_cast<int>(std::min<int64_t>(budget.count(), 5)));
    settle();
  }

  // Lets the next n posted requests complete. Thread-safe.
  void release(int n) { released_ += n; }

 private:
  void settle() {
    while (!pending_.empty() && completed_ < released_.load()) {
      // Rank 1, the only peer, is the sender a receive from any rank completes with.
      if (pending_.front()->peer == kAnyPeer) pending_.front()->peer = 1;
      pending_.front()->state = Request::State::kDone;
      pending_.pop_front();
      ++completed_;
    }
  }

  std::atomic<int> released_{0};
  int completed_ = 0;
};

Executor::Body finished(std::function<void()> f) {
  return [f = std::move(f)] {
    f();
    return Executor::Pending{};
  };
}

class ExecutorTest : public ::testing::Test {
 protected:
  // A body that leaves one receive from rank 1 in flight, due `within` of
  // when it runs and described as `during`: it completes only once
  // release()d.
  Executor::Body unanswered(std::chrono::milliseconds within, std::string during = {}) {
    return [this, within, during = std::move(during)] {
      Executor::Pending p;
      p.requests.push_back(transport_.postRecv(1, 1, {}, nullptr, 0));
      p.deadline = Deadline::after(within);
      p.during = during;
      return p;
    };
  }

  ReleasedTransport transport_;
  std::unique_ptr<Executor> executor_ = std::make_unique<Executor>("test_group", transport_);
};

TEST_F(ExecutorTest, BlockingCallOnAnIdleExecutorRunsOnTheCallersThread) {
  std::thread::id ranOn;
  auto work = executor_->submit("inline", finished([&] { ranOn = std::this_thread::get_id(); }), true);
  EXPECT_TRUE(work->isCompleted());
  EXPECT_FALSE(work->failed());
  EXPECT_EQ(ranOn, std::this_thread::get_id());
}

// A blocking call issued while an earlier operation is still queued or
// running waits its turn: it runs after that operation and returns only
// once it has completed. Either thread may run it: the executor's, or the
// caller's own once the earlier operation has ended (a waiter runs a
// still-queued operation itself when the executor is idle), so the test
// checks the order, not the thread.
TEST_F(ExecutorTest, BlockingCallBehindEarlierWorkWaitsItsTurn) {
  std::mutex mu;
  std::vector<std::string> order;
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  auto first = executor_->submit("first", finished([&] {
    opened.wait_for(10s);
    std::lock_guard<std::mutex> lock(mu);
    order.push_back("first");
  }), false);
  std::shared_ptr<Work> second;
  std::thread t([&] {
    second = executor_->submit("second", finished([&] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back("second");
    }), true);
  });
  std::this_thread::sleep_for(50ms);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(order.empty()) << "an operation ran before the one issued first finished";
  }
  gate.set_value();
  t.join();
  ASSERT_TRUE(second && second->isCompleted());
  EXPECT_TRUE(first->wait(5s));
  EXPECT_EQ(order, (std::vector<std::string>{"first", "second"}));
}

// A thread about to wait for a queued operation runs it itself when no
// other thread is running one (Work::runHereIfQueued(), which an unbounded
// wait() calls first), together with any queued ahead of it, in issue
// order; while another operation runs, it leaves the queue alone.
TEST_F(ExecutorTest, AWaiterRunsItsQueuedOperationWhenTheExecutorIsIdle) {
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  std::atomic<bool> started{false};
  auto busy = executor_->submit("busy", finished([&] {
    started = true;
    opened.wait_for(10s);
  }), false);
  while (!started) std::this_thread::sleep_for(1ms);
  auto behind = executor_->submit("behind", finished([] {}), false);
  EXPECT_FALSE(behind->runHereIfQueued());
  EXPECT_FALSE(behind->isCompleted());
  gate.set_value();
  EXPECT_TRUE(behind->wait(5s));

  // The executor's thread may take an operation first (then the waiter
  // does not run it); over many tries the waiter runs some itself. On a
  // host whose cores are busy the executor's thread can win 200 tries in a
  // row, so the tries go on (for at most 20 s) until the waiter has won one.
  int ranHere = 0;
  const auto until = std::chrono::steady_clock::now() + 20s;
  for (int i = 0; i < 200 || (ranHere == 0 && std::chrono::steady_clock::now() < until); ++i) {
    std::mutex mu;
    std::vector<std::string> order;
    std::thread::id lastOn;
    auto record = [&](const char* name) {
      return finished([&, name] {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(name);
        lastOn = std::this_thread::get_id();
      });
    };
    auto a = executor_->submit("a", record("a"), false);
    auto b = executor_->submit("b", record("b"), false);
    const bool ran = b->runHereIfQueued();
    ASSERT_TRUE(b->wait(5s));
    ASSERT_TRUE(a->isCompleted());
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(order, (std::vector<std::string>{"a", "b"}));
    if (ran) {
      EXPECT_EQ(lastOn, std::this_thread::get_id());
      ++ranHere;
    }
  }
  EXPECT_GT(ranHere, 0);
}

// Four threads issue operations concurrently; the order in which the
// executor runs them is the order they were issued in (here fixed by a
// lock around each submit), and no two ever overlap.
TEST_F(ExecutorTest, IssueOrderIsKeptAcrossThreads) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 200;
  std::mutex issue;
  int nextTicket = 0;
  std::mutex mu;
  std::vector<int> ran;
  std::atomic<int> running{0};
  std::atomic<int> overlaps{0};
  std::vector<std::vector<std::shared_ptr<Work>>> works(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        std::lock_guard<std::mutex> lock(issue);
        const int ticket = nextTicket++;
        works[static_cast<size_t>(t)].push_back(executor_->submit("ordered", finished([&, ticket] {
          if (running.fetch_add(1) != 0) ++overlaps;
          {
            std::lock_guard<std::mutex> l(mu);
            ran.push_back(ticket);
          }
          running.fetch_sub(1);
        }), false));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (auto& list : works) {
    for (auto& w : list) ASSERT_TRUE(w->wait(10s));
  }
  ASSERT_EQ(ran.size(), static_cast<size_t>(kThreads * kPerThread));
  for (size_t i = 0; i < ran.size(); ++i) ASSERT_EQ(ran[i], static_cast<int>(i)) << "position " << i;
  EXPECT_EQ(overlaps.load(), 0);
}

// An operation whose error breaks the transport (as a lost peer does)
// fails, and so does every operation issued afterwards, with that error
// and without running.
TEST_F(ExecutorTest, ErrorThatBreaksTheTransportFailsEveryLaterOperation) {
  auto broken = executor_->submit("breaks", [&]() -> Executor::Pending {
    auto error = std::make_exception_ptr(PeerLost("rank 1 is gone"));
    transport_.abort(error);
    std::rethrow_exception(error);
  }, true);
  std::string what;
  EXPECT_EQ(catchError([&] { broken->wait(); }, &what), Caught::kPeerLost);
  bool ran = false;
  for (bool blocking : {true, false}) {
    auto later = executor_->submit("later", finished([&] { ran = true; }), blocking);
    std::string laterWhat;
    EXPECT_EQ(catchError([&] { later->wait(5s); }, &laterWhat), Caught::kPeerLost);
    EXPECT_EQ(laterWhat, what);
  }
  EXPECT_FALSE(ran);
  // Asked directly, on the engine the blocking path claims. The executor's
  // thread completes the last Work just before it lets go of the engine,
  // so the engine is claimed once that thread is done.
  const auto until = std::chrono::steady_clock::now() + 5s;
  bool claimed = false;
  for (;;) {
    if (executor_->beginInline()) {
      EXPECT_EQ(catchError([&] {
                  executor_->assertDriving();
                  executor_->throwIfBroken();
                }),
                Caught::kPeerLost);
      executor_->endInline();
      claimed = true;
      break;
    }
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(1ms);
  }
  if (!claimed) ADD_FAILURE() << "the idle executor did not let the caller claim its engine within 5 s";
}

// An error that leaves the transport whole (a refused argument) fails only
// its own operation.
TEST_F(ExecutorTest, ErrorOfOneOperationAloneDoesNotBreakTheGroup) {
  auto bad = executor_->submit("bad", [&]() -> Executor::Pending { throw InvalidArgument("bad count"); }, false);
  EXPECT_EQ(catchError([&] { bad->wait(5s); }), Caught::kInvalidArgument);
  bool ran = false;
  auto next = executor_->submit("next", finished([&] { ran = true; }), true);
  EXPECT_TRUE(next->isCompleted() && !next->failed());
  EXPECT_TRUE(ran);
}

// An operation that leaves requests in flight completes when they do, in
// the background; the operations behind it still run meanwhile.
TEST_F(ExecutorTest, RequestsLeftInFlightCompleteInTheBackground) {
  auto pending = executor_->submit("async", [&] {
    Executor::Pending p;
    p.requests.push_back(transport_.postRecv(1, 1, {}, nullptr, 0));
    p.requests.push_back(transport_.postSend(1, 2, {}, nullptr, 0));
    p.deadline = Deadline::after(30s);
    p.during = "async receive";
    return p;
  }, false);
  auto after = executor_->submit("after", finished([] {}), true);
  EXPECT_TRUE(after->isCompleted());
  EXPECT_FALSE(pending->wait(50ms)) << "completed before its requests did";
  transport_.release(2);
  EXPECT_TRUE(pending->wait(5s));
  EXPECT_FALSE(pending->failed());
}

// Requests still in flight at their deadline: Timeout, and the group
// breaks (a half-finished transfer leaves the stream unusable).
TEST_F(ExecutorTest, RequestsInFlightPastTheirDeadlineTimeOutAndBreakTheGroup) {
  auto pending = executor_->submit("async", unanswered(100ms, "async receive from rank 1"), false);
  std::string what;
  EXPECT_EQ(catchError([&] { pending->wait(5s); }, &what), Caught::kTimeout);
  EXPECT_NE(what.find("async receive from rank 1: Timed out waiting for"), std::string::npos) << what;
  auto later = executor_->submit("later", finished([] {}), true);
  EXPECT_TRUE(later->failed());
}

// Destroying the executor runs what is queued first; what is still in
// flight then fails with Aborted.
TEST_F(ExecutorTest, DestructionRunsQueuedWorkAndAbortsWorkInFlight) {
  auto inFlight = executor_->submit("never answered", unanswered(60s), false);
  auto slow = executor_->submit("slow", finished([] { std::this_thread::sleep_for(50ms); }), false);
  std::atomic<int> ran{0};
  std::vector<std::shared_ptr<Work>> queued;
  for (int i = 0; i < 5; ++i) queued.push_back(executor_->submit("queued", finished([&] { ++ran; }), false));
  executor_.reset();
  EXPECT_EQ(ran.load(), 5);
  EXPECT_TRUE(slow->isCompleted() && !slow->failed());
  for (auto& w : queued) EXPECT_TRUE(w->isCompleted() && !w->failed());
  ASSERT_TRUE(inFlight->isCompleted());
  std::string what;
  EXPECT_EQ(catchError([&] { inFlight->wait(); }, &what), Caught::kAborted);
  EXPECT_NE(what.find("destroyed before it completed"), std::string::npos) << what;
}

}  // namespace
}  // namespace meshcomm::test

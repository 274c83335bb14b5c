// Receives from any rank (ProcessGroup::recvAnySource) on multi-process
// jobs, through shared memory and, with MESHCOMM_SHM=0, over TCP, and on
// emulated hosts where one receive is served by either: every sender is
// received once with its payload and named by the Work; matching follows
// post order against receives that name their source; a peer that left is
// not waited for; and the errors (a receive nobody answers, a size
// mismatch, bad arguments).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "collective_harness.h"
#include "expect_world.h"
#include "transport_cases.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

Buffer payload(int64_t n, uint64_t salt, int sender) {
  Buffer b(DType::kFloat32, n);
  test::fillInput(DType::kFloat32, Domain::kRaw, salt, sender, 0, static_cast<size_t>(n), b.data());
  return b;
}

// Whether `got` holds what `sender` sends for `salt`.
std::string differenceFrom(const Buffer& got, uint64_t salt, int sender) {
  Buffer want = payload(got.numel, salt, sender);
  return test::firstDifference(got.dtype, got.bytes.data(), want.data(), static_cast<size_t>(got.numel));
}

OpOptions tagged(int tag, bool blocking = false) {
  OpOptions o;
  o.tag = tag;
  o.blocking = blocking;
  return o;
}

test::JobOptions quick() {
  test::JobOptions o;
  o.bound = 60s;
  o.timeout = 30s;
  return o;
}

// Rank 0 receives one message from every other rank without naming any:
// each Work names a different sender and holds that sender's payload. Small
// and multi-megabyte messages (which arrive in pieces), asynchronous and
// blocking receives.
int everySenderOnce(RankEnv& e) {
  ProcessGroup& pg = e.pg();
  uint64_t salt = 40;
  for (int64_t n : {int64_t{3}, int64_t{3} << 20}) {
    for (bool blocking : {false, true}) {
      ++salt;
      if (e.rank != 0) {
        Buffer out = payload(n, salt, e.rank);
        CHILD_CHECK(pg.send(out.ref(), 0, tagged(9))->wait(20s), "send did not finish");
      } else {
        std::vector<Buffer> in;
        for (int i = 1; i < e.size; ++i) in.emplace_back(DType::kFloat32, n);
        std::vector<WorkPtr> works;
        for (auto& b : in) works.push_back(pg.recvAnySource(b.ref(), tagged(9, blocking)));
        std::vector<int> sources;
        for (size_t i = 0; i < works.size(); ++i) {
          CHILD_CHECK(works[i]->wait(20s), "receive " << i << " did not finish");
          const int source = works[i]->sourceRank();
          CHILD_CHECK(source >= 1 && source < e.size, "receive " << i << " names source " << source);
          const std::string diff = differenceFrom(in[i], salt, source);
          CHILD_CHECK(diff.empty(), "receive " << i << " from rank " << source << ": " << diff);
          sources.push_back(source);
        }
        std::sort(sources.begin(), sources.end());
        for (int i = 1; i < e.size; ++i) {
          CHILD_CHECK(sources[static_cast<size_t>(i - 1)] == i,
                      "n=" << n << ": rank " << i << " was not received exactly once");
        }
      }
      // A sender must not run ahead: its next message would match too.
      test::storeBarrier(*e.store, "round " + std::to_string(salt), e.size);
    }
  }
  return test::kExitOk;
}

class AnySource : public ShmOrTcp {};

INSTANTIATE_TEST_SUITE_P(Transports, AnySource, ::testing::Bool(), ShmOrTcp::name);

TEST_P(AnySource, EverySenderIsReceivedOnceAndNamed) {
  for (int p : {2, 3, 5}) {
    auto statuses = test::runWorld(p, quick(), everySenderOnce);
    EXPECT_TRUE(test::allOk(statuses)) << "P=" << p << "\n" << test::describeAll(statuses);
  }
}

// Rank 0 posts, in this order, a receive from rank 2 and one from any rank;
// rank 2 sends, then rank 1: the first message goes to the receive posted
// first. Then the other way round: a receive from any rank, then one from
// rank 2, and rank 2 sends twice: the receive from any rank takes the first.
TEST_P(AnySource, TheEarliestPostedReceiveTakesTheMessage) {
  test::expectWorldOk(3, quick(), [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    const int64_t n = 1000;
    if (e.rank == 0) {
      Buffer fromTwo(DType::kFloat32, n), fromAny(DType::kFloat32, n);
      WorkPtr specific = pg.recv(fromTwo.ref(), 2, tagged(4));
      WorkPtr any = pg.recvAnySource(fromAny.ref(), tagged(4));
      test::storeBarrier(*e.store, "posted", 3);
      CHILD_CHECK(specific->wait(20s) && any->wait(20s), "receives did not finish");
      CHILD_CHECK(differenceFrom(fromTwo, 1, 2).empty(), "the receive from rank 2 got another message");
      CHILD_CHECK(any->sourceRank() == 1, "the receive from any rank names " << any->sourceRank());
      CHILD_CHECK(differenceFrom(fromAny, 1, 1).empty(), "the receive from any rank got another message");

      Buffer first(DType::kFloat32, n), second(DType::kFloat32, n);
      WorkPtr anyFirst = pg.recvAnySource(first.ref(), tagged(5));
      WorkPtr fromTwoLater = pg.recv(second.ref(), 2, tagged(5));
      test::storeBarrier(*e.store, "posted again", 3);
      CHILD_CHECK(anyFirst->wait(20s) && fromTwoLater->wait(20s), "receives did not finish");
      CHILD_CHECK(anyFirst->sourceRank() == 2, "names " << anyFirst->sourceRank());
      CHILD_CHECK(differenceFrom(first, 2, 2).empty(), "the receive from any rank missed rank 2's first message");
      CHILD_CHECK(differenceFrom(second, 3, 2).empty(), "the receive from rank 2 missed its second message");
      CHILD_CHECK(fromTwoLater->sourceRank() == 2, "a receive from rank 2 names " << fromTwoLater->sourceRank());
    } else {
      test::storeBarrier(*e.store, "posted", 3);
      if (e.rank == 1) std::this_thread::sleep_for(100ms);  // rank 2's message comes first
      Buffer out = payload(n, 1, e.rank);
      CHILD_CHECK(pg.send(out.ref(), 0, tagged(4))->wait(20s), "send did not finish");
      test::storeBarrier(*e.store, "posted again", 3);
      if (e.rank == 2) {
        Buffer a = payload(n, 2, 2), b = payload(n, 3, 2);
        CHILD_CHECK(pg.send(a.ref(), 0, tagged(5))->wait(20s) && pg.send(b.ref(), 0, tagged(5))->wait(20s),
                    "sends did not finish");
      }
    }
    test::storeBarrier(*e.store, "end", 3);
    return test::kExitOk;
  });
}

// Rank 3 leaves the job at once: a receive from any rank is then served by
// the ranks still there, and rank 3's departure is no error.
TEST_P(AnySource, ARankThatLeftIsNotWaitedFor) {
  test::expectWorldOk(4, quick(), [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    if (e.rank == 3) {
      e.world.reset();
      return test::kExitOk;
    }
    std::this_thread::sleep_for(200ms);  // rank 3 is gone by now
    if (e.rank == 0) {
      for (int i = 0; i < 2; ++i) {
        int32_t in = -1;
        WorkPtr w = pg.recvAnySource(TensorRef{&in, 1, DType::kInt32}, tagged(1));
        CHILD_CHECK(w->wait(20s) && !w->failed(), "receive " << i << " failed");
        CHILD_CHECK(in == 100 + w->sourceRank(), "got " << in << " from rank " << w->sourceRank());
      }
    } else {
      int32_t out = 100 + e.rank;
      CHILD_CHECK(pg.send(TensorRef{&out, 1, DType::kInt32}, 0, tagged(1))->wait(20s), "send failed");
    }
    return test::kExitOk;
  });
}

// Bad arguments are refused before anything is queued; a receive nobody
// answers times out naming "any rank" (on the world group in the
// background, on a group of ranks 0 and 1 blocking); a message of another
// size fails the receiver with Mismatch naming both sizes, and the
// sender's next call (on a group of ranks 1 and 2).
TEST_P(AnySource, ErrorsAreClear) {
  test::expectWorldOk(3, quick(), [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    std::vector<float> buf(12, 1.0f);
    auto invalid = [&](const std::function<void()>& f, const char* what) {
      test::Caught c = test::catchError(f);
      CHILD_CHECK(c == test::Caught::kInvalidArgument, "" << what << ": " << test::caughtName(c));
    };
    invalid([&] { pg.recvAnySource(TensorRef{buf.data(), 4, DType::kFloat32}, tagged(-1)); }, "negative tag");
    invalid([&] { pg.recvAnySource(TensorRef{nullptr, 4, DType::kFloat32}); }, "null data");
    auto alone = e.world->newGroup({e.rank});
    invalid([&] { alone->recvAnySource(TensorRef{buf.data(), 4, DType::kFloat32}); }, "a group of one");

    std::shared_ptr<ProcessGroup> pair = e.rank < 2 ? e.world->newGroup({0, 1}) : nullptr;
    if (e.rank == 1) {
      for (bool blocking : {false, true}) {
        ProcessGroup& g = blocking ? *pair : pg;
        OpOptions o = tagged(3, blocking);
        o.timeout = 400ms;
        std::string what;
        test::Caught c = test::catchError([&] { g.recvAnySource(TensorRef{buf.data(), 4, DType::kFloat32}, o)->wait(); }, &what);
        CHILD_CHECK(c == test::Caught::kTimeout, "blocking=" << blocking << ": " << test::caughtName(c) << " " << what);
        CHILD_CHECK(what.find("any rank") != std::string::npos, "the message does not say what it waited for: " << what);
      }
    }
    test::storeBarrier(*e.store, "timeouts", 3);

    if (e.rank > 0) {
      auto other = e.world->newGroup({1, 2});
      std::string what;
      if (e.rank == 2) {
        // The send succeeds: its bytes have left before rank 1 can find the
        // mismatch, even when this rank learns of it before reaping the
        // send. The mismatch reaches this rank's next call, whichever way
        // it comes (rank 1's abort frame, its notice, the store), as the
        // Mismatch naming the sizes.
        other->send(TensorRef{buf.data(), 10, DType::kFloat32}, 0)->wait();
        test::Caught c = test::catchError([&] { other->barrier()->wait(); }, &what);
        CHILD_CHECK(c == test::Caught::kMismatch, "sender's next call: " << test::caughtName(c) << " " << what);
      } else {
        test::Caught c = test::catchError([&] { other->recvAnySource(TensorRef{buf.data(), 12, DType::kFloat32})->wait(); }, &what);
        CHILD_CHECK(c == test::Caught::kMismatch, "" << test::caughtName(c) << " " << what);
        CHILD_CHECK(what.find("10 elements") != std::string::npos && what.find("12 elements") != std::string::npos,
                    "message does not name both sizes: " << what);
      }
    }
    test::storeBarrier(*e.store, "end", 3);
    return test::kExitOk;
  });
}

// Two emulated hosts of two ranks: rank 0's receives from any rank are
// served through shared memory (rank 1) and over TCP (ranks 2 and 3).
TEST(AnySourceMixedHosts, ServedBySharedMemoryAndTcp) {
  test::JobOptions o = quick();
  o.rankEnv = [](int rank) {
    return std::vector<std::pair<std::string, std::string>>{{"MESHCOMM_HOST_ID", "host" + std::to_string(rank / 2)}};
  };
  test::expectWorldOk(4, o, everySenderOnce);
}

}  // namespace
}  // namespace meshcomm::test

// Point-to-point on multi-process jobs: tag matching independent of arrival
// order, many messages between one pair in order, large messages in both
// directions at once, batches listed in opposite orders on the two sides,
// a ring exchange through batches, and the errors (size mismatch, a
// receive nobody sends to, bad arguments). Every payload is checked
// bitwise against collective_harness.h's generators. Each test runs twice:
// through shared memory (all ranks share this host) and, with
// MESHCOMM_SHM=0, over TCP.
#include <gtest/gtest.h>

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

Buffer payload(DType d, int64_t n, uint64_t salt, int sender) {
  Buffer b(d, n);
  test::fillInput(d, Domain::kRaw, salt, sender, 0, static_cast<size_t>(n), b.data());
  return b;
}

void expectPayload(const Buffer& got, uint64_t salt, int sender, const std::string& what) {
  Buffer want = payload(got.dtype, got.numel, salt, sender);
  std::string diff = test::firstDifference(got.dtype, got.bytes.data(), want.data(), static_cast<size_t>(got.numel));
  CHILD_CHECK(diff.empty(), "" << what << ": " << diff);
  CHILD_CHECK(got.bytes.back() == 0xA5, "" << what << ": wrote past the end");
}

OpOptions tagged(int tag, bool blocking = false) {
  OpOptions o;
  o.tag = tag;
  o.blocking = blocking;
  return o;
}

class P2P : public ShmOrTcp {};

INSTANTIATE_TEST_SUITE_P(Transports, P2P, ::testing::Bool(), ShmOrTcp::name);

test::JobOptions quick() {
  test::JobOptions o;
  o.bound = 60s;
  o.timeout = 30s;
  return o;
}

// Rank 0 sends A (tag 1) then B (tag 2); rank 1 receives B first, then A.
// A arrives first and must wait, buffered, for its receive. Both small and
// multi-megabyte payloads, and synchronous as well as asynchronous calls.
TEST_P(P2P, ReceiveOrderFollowsTagsNotArrival) {
  test::expectWorldOk(2, quick(), [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    int round = 0;
    for (int64_t aCount : {100, 3 << 20}) {
      for (bool blocking : {false, true}) {
        const uint64_t salt = 10 + static_cast<uint64_t>(round++);
        const int64_t bCount = aCount / 4 + 7;
        if (e.rank == 0) {
          Buffer a = payload(DType::kInt32, aCount, salt, 100);
          Buffer b = payload(DType::kFloat64, bCount, salt, 200);
          WorkPtr wa = pg.send(a.ref(), 1, tagged(1, blocking));
          WorkPtr wb = pg.send(b.ref(), 1, tagged(2, blocking));
          wb->wait();
          wa->wait();
        } else {
          Buffer a(DType::kInt32, aCount), b(DType::kFloat64, bCount);
          WorkPtr wb = pg.recv(b.ref(), 0, tagged(2, blocking));
          wb->wait();
          expectPayload(b, salt, 200, "tag 2 (received first)");
          WorkPtr wa = pg.recv(a.ref(), 0, tagged(1, blocking));
          wa->wait();
          expectPayload(a, salt, 100, "tag 1 (received second)");
        }
      }
    }
    // Both tags posted as receives before anything is sent, in the
    // opposite order of the sends.
    if (e.rank == 1) {
      Buffer a(DType::kUInt16, 5000), b(DType::kUInt16, 6000);
      WorkPtr wb = pg.recv(b.ref(), 0, tagged(9));
      WorkPtr wa = pg.recv(a.ref(), 0, tagged(8));
      test::storeBarrier(*e.store, "posted", 2);
      wa->wait();
      wb->wait();
      expectPayload(a, 50, 0, "tag 8");
      expectPayload(b, 51, 0, "tag 9");
    } else {
      test::storeBarrier(*e.store, "posted", 2);
      Buffer a = payload(DType::kUInt16, 5000, 50, 0), b = payload(DType::kUInt16, 6000, 51, 0);
      pg.send(a.ref(), 1, tagged(8))->wait();
      pg.send(b.ref(), 1, tagged(9))->wait();
    }
    return test::kExitOk;
  });
}

// 1000 messages 0 -> 1 on one tag and 500 messages 1 -> 0 on another, all
// issued before any is waited for; they must match in issue order.
TEST_P(P2P, ThousandsOfMessagesBetweenOnePairStayInOrder) {
  test::expectWorldOk(2, quick(), [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    const int peer = 1 - e.rank;
    const int mine = e.rank == 0 ? 1000 : 500;
    const int theirs = e.rank == 0 ? 500 : 1000;
    auto count = [](int from, int k) { return static_cast<int64_t>(1 + (k * 37 + from * 11) % 300); };
    std::vector<Buffer> out, in;
    std::vector<WorkPtr> works;
    for (int k = 0; k < mine; ++k) out.push_back(payload(DType::kUInt8, count(e.rank, k), 1000 + static_cast<uint64_t>(k), e.rank));
    for (int k = 0; k < theirs; ++k) in.emplace_back(DType::kUInt8, count(peer, k));
    const int kMax = std::max(mine, theirs);
    for (int k = 0; k < kMax; ++k) {
      if (k < mine) works.push_back(pg.send(out[static_cast<size_t>(k)].ref(), peer, tagged(e.rank == 0 ? 4 : 5)));
      if (k < theirs) works.push_back(pg.recv(in[static_cast<size_t>(k)].ref(), peer, tagged(e.rank == 0 ? 5 : 4)));
    }
    for (auto it = works.rbegin(); it != works.rend(); ++it) CHILD_CHECK((*it)->wait(30s));
    for (int k = 0; k < theirs; ++k) {
      expectPayload(in[static_cast<size_t>(k)], 1000 + static_cast<uint64_t>(k), peer, "message #" + std::to_string(k));
    }
    return test::kExitOk;
  });
}

// Both ranks send 8 MiB to each other and only then receive; with
// asynchronous calls nothing may deadlock (both directions progress at
// once). Also with the receive posted first on one side only.
TEST_P(P2P, EightMiBBothDirectionsAtOnce) {
  test::expectWorldOk(2, quick(), [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    const int peer = 1 - e.rank;
    const int64_t n = (8 << 20) / 4;  // 8 MiB of float32
    for (int round = 0; round < 3; ++round) {
      const uint64_t salt = 300 + static_cast<uint64_t>(round);
      Buffer out = payload(DType::kFloat32, n, salt, e.rank);
      Buffer in(DType::kFloat32, n);
      WorkPtr s, r;
      if (round == 2 && e.rank == 1) {
        r = pg.recv(in.ref(), peer);
        s = pg.send(out.ref(), peer);
      } else {
        s = pg.send(out.ref(), peer);
        r = pg.recv(in.ref(), peer);
      }
      CHILD_CHECK(r->wait(30s) && s->wait(30s));
      expectPayload(in, salt, peer, "8 MiB message, round " + std::to_string(round));
    }
    return test::kExitOk;
  });
}

// One side lists [send, recv], the other [recv, send], with 8 MiB each
// way; then four operations on two tags, listed in opposite orders.
TEST_P(P2P, OppositeListingOrdersDoNotDeadlock) {
  test::expectWorldOk(2, quick(), [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    const int peer = 1 - e.rank;
    const int64_t n = (8 << 20) / 8;
    Buffer out = payload(DType::kInt64, n, 400, e.rank);
    Buffer in(DType::kInt64, n);
    std::vector<P2POp> ops = {{P2POp::Kind::kSend, out.ref(), peer, 0}, {P2POp::Kind::kRecv, in.ref(), peer, 0}};
    if (e.rank == 1) std::swap(ops[0], ops[1]);
    CHILD_CHECK(pg.batchIsendIrecv(ops)->wait(30s));
    expectPayload(in, 400, peer, "8 MiB batch");

    Buffer o1 = payload(DType::kBFloat16, 70000, 401, e.rank), o2 = payload(DType::kBool, 12345, 402, e.rank);
    Buffer i1(DType::kBFloat16, 70000), i2(DType::kBool, 12345);
    std::vector<P2POp> four = {{P2POp::Kind::kSend, o1.ref(), peer, 1},
                               {P2POp::Kind::kSend, o2.ref(), peer, 2},
                               {P2POp::Kind::kRecv, i1.ref(), peer, 1},
                               {P2POp::Kind::kRecv, i2.ref(), peer, 2}};
    if (e.rank == 1) std::reverse(four.begin(), four.end());
    OpOptions blocking;
    blocking.blocking = true;
    WorkPtr w = pg.batchIsendIrecv(four, blocking);
    CHILD_CHECK(w->isCompleted() && !w->failed(), "a blocking batch returned before completing");
    expectPayload(i1, 401, peer, "tag 1");
    expectPayload(i2, 402, peer, "tag 2");
    return test::kExitOk;
  });
}

// Every rank sends to both neighbours and receives from both in one batch
// (sizes differ per sender), a few rounds, on 5 and 8 ranks.
// Three rounds of a ring exchange in both directions, the last of them
// large; odd ranks list their operations in the opposite order.
int ringExchangeRounds(RankEnv& e, bool blocking) {
  ProcessGroup& pg = e.pg();
  const int right = (e.rank + 1) % e.size;
  const int left = (e.rank + e.size - 1) % e.size;
  auto count = [](int sender, int round) { return static_cast<int64_t>(1000 * (round + 1) + 10 * sender + (round == 2 ? 200000 : 0)); };
  for (int round = 0; round < 3; ++round) {
    const uint64_t sr = 500 + static_cast<uint64_t>(round) * 2, sl = sr + 1;
    Buffer toRight = payload(DType::kFloat16, count(e.rank, round), sr, e.rank);
    Buffer toLeft = payload(DType::kFloat16, count(e.rank, round), sl, e.rank);
    Buffer fromLeft(DType::kFloat16, count(left, round)), fromRight(DType::kFloat16, count(right, round));
    std::vector<P2POp> ops = {{P2POp::Kind::kSend, toRight.ref(), right, 7},
                              {P2POp::Kind::kRecv, fromLeft.ref(), left, 7},
                              {P2POp::Kind::kSend, toLeft.ref(), left, 8},
                              {P2POp::Kind::kRecv, fromRight.ref(), right, 8}};
    if (e.rank % 2 == 1) std::reverse(ops.begin(), ops.end());
    CHILD_CHECK(pg.batchIsendIrecv(ops, tagged(0, blocking))->wait(30s));
    expectPayload(fromLeft, sr, left, "from the left");
    expectPayload(fromRight, sl, right, "from the right");
  }
  return test::kExitOk;
}

TEST_P(P2P, RingExchangeBothDirections) {
  for (int p : {5, 8}) {
    auto statuses = test::runWorld(p, quick(), [](RankEnv& e) { return ringExchangeRounds(e, false); });
    EXPECT_TRUE(test::allOk(statuses)) << "P=" << p << "\n" << test::describeAll(statuses);
  }
}

// A rank that is done may exit while the others still talk to each other:
// only the peers a wait depends on are checked for liveness, so rank 2
// leaving at once must not fail ranks 0 and 1, whose waits (each over the
// 50 ms liveness interval, async and blocking) outlast it by far.
TEST_P(P2P, RankThatLeftEarlyDoesNotFailTheOthers) {
  test::expectWorldOk(3, quick(), [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    if (e.rank == 2) return test::kExitOk;
    const int peer = 1 - e.rank;
    for (int k = 0; k < 8; ++k) {
      int32_t out = 100 * e.rank + k;
      int32_t in = -1;
      if (e.rank == 0) std::this_thread::sleep_for(80ms);  // rank 1 waits meanwhile
      OpOptions blocking;
      blocking.blocking = e.rank == 1 && (k % 2) == 0;  // rank 0 sends first
      WorkPtr r = pg.recv(TensorRef{&in, 1, DType::kInt32}, peer, blocking);
      WorkPtr s = pg.send(TensorRef{&out, 1, DType::kInt32}, peer);
      CHILD_CHECK(r->wait(20s) && s->wait(20s), "exchange " << k << " did not finish");
      CHILD_CHECK(!r->failed() && !s->failed(), "exchange " << k << " failed");
      CHILD_CHECK(in == 100 * peer + k, "exchange " << k << " received " << in);
    }
    return test::kExitOk;
  });
}

// Ranks on three emulated hosts (0 0 1 1 2): every rank's batch mixes a
// peer through shared memory with one over TCP (rank 4 has only TCP), in
// the background and in a blocking call.
TEST(P2PMixedHosts, RingExchangeOverSharedMemoryAndTcp) {
  for (bool blocking : {false, true}) {
    test::JobOptions o = quick();
    o.rankEnv = [](int rank) {
      return std::vector<std::pair<std::string, std::string>>{{"MESHCOMM_HOST_ID", "host" + std::to_string(rank / 2)}};
    };
    auto statuses = test::runWorld(5, o, [blocking](RankEnv& e) { return ringExchangeRounds(e, blocking); });
    EXPECT_TRUE(test::allOk(statuses)) << "blocking=" << blocking << "\n" << test::describeAll(statuses);
  }
}

// Messages sent before their receives are buffered up to
// MESHCOMM_MAX_UNEXPECTED_BYTES: within it they arrive intact; a message
// beyond it fails the receiving side with an error naming the limit, and
// the sender's next call fails too.
TEST_P(P2P, UnexpectedMessagesAreBufferedUpToTheLimit) {
  test::JobOptions o = quick();
  o.env = {{"MESHCOMM_MAX_UNEXPECTED_BYTES", "300000"}};
  test::expectWorldOk(2, o, [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    const int64_t n = 50000;  // 200 KB of float32: one fits in the limit, two do not
    if (e.rank == 0) {
      Buffer a = payload(DType::kFloat32, n, 71, 0), b = payload(DType::kFloat32, n, 72, 0);
      CHILD_CHECK(pg.send(a.ref(), 1, tagged(1))->wait(20s));
      CHILD_CHECK(pg.send(b.ref(), 1, tagged(2))->wait(20s));
      test::storeBarrier(*e.store, "within", 2);
      Buffer big = payload(DType::kFloat32, 2 * n, 73, 0);
      CHILD_CHECK(pg.send(big.ref(), 1, tagged(3))->wait(20s));
      test::storeBarrier(*e.store, "beyond", 2);
      test::Caught c = test::catchError([&] { pg.barrier()->wait(); });
      CHILD_CHECK(c != test::Caught::kNone, "the sender's next call succeeded");
    } else {
      // Tag 1 arrives first and waits, buffered, while tag 2 is received.
      Buffer b(DType::kFloat32, n), a(DType::kFloat32, n);
      CHILD_CHECK(pg.recv(b.ref(), 0, tagged(2))->wait(20s));
      CHILD_CHECK(pg.recv(a.ref(), 0, tagged(1))->wait(20s));
      expectPayload(a, 71, 0, "tag 1");
      expectPayload(b, 72, 0, "tag 2");
      test::storeBarrier(*e.store, "within", 2);
      Buffer other(DType::kFloat32, 4);
      std::string what;
      test::Caught c = test::catchError([&] { pg.recv(other.ref(), 0, tagged(4))->wait(); }, &what);
      CHILD_CHECK(c == test::Caught::kOtherError, "" << test::caughtName(c) << " " << what);
      CHILD_CHECK(what.find("MESHCOMM_MAX_UNEXPECTED_BYTES") != std::string::npos, "" << what);
      test::storeBarrier(*e.store, "beyond", 2);
    }
    return test::kExitOk;
  });
}

// A receive expecting a different size than was sent fails with Mismatch
// naming both sides; the sender learns on its next call.
TEST_P(P2P, SizeMismatchFailsBothSides) {
  test::expectWorldOk(2, quick(), [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    std::vector<float> buf(12, 1.0f);
    std::string what;
    if (e.rank == 0) {
      pg.send(TensorRef{buf.data(), 10, DType::kFloat32}, 1)->wait();
      test::Caught c = test::catchError([&] { pg.recv(TensorRef{buf.data(), 10, DType::kFloat32}, 1)->wait(); }, &what);
      CHILD_CHECK(c == test::Caught::kMismatch, "sender's next call: " << test::caughtName(c) << " " << what);
    } else {
      auto t0 = test::monoNowNs();
      test::Caught c = test::catchError([&] { pg.recv(TensorRef{buf.data(), 12, DType::kFloat32}, 0)->wait(); }, &what);
      CHILD_CHECK(c == test::Caught::kMismatch, "" << test::caughtName(c) << " " << what);
      CHILD_CHECK(test::msBetween(t0, test::monoNowNs()) < 5000);
      CHILD_CHECK(what.find("10 elements") != std::string::npos && what.find("12 elements") != std::string::npos,
                  "message does not name both sizes: " << what);
    }
    return test::kExitOk;
  });
}

// A receive nobody sends to ends with Timeout at its own deadline, naming
// the peer; bad arguments are refused before anything is queued.
TEST_P(P2P, UnansweredReceiveTimesOutAndBadArgumentsAreRefused) {
  test::expectWorldOk(2, quick(), [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    std::vector<int32_t> buf(4, 0);
    TensorRef t{buf.data(), 4, DType::kInt32};
    auto invalid = [&](const std::function<void()>& f, const char* what) {
      test::Caught c = test::catchError(f);
      CHILD_CHECK(c == test::Caught::kInvalidArgument, "" << what << ": " << test::caughtName(c));
    };
    invalid([&] { pg.send(t, e.rank); }, "send to self");
    invalid([&] { pg.recv(t, 2); }, "peer out of range");
    invalid([&] { pg.send(t, 1 - e.rank, tagged(-1)); }, "negative tag");
    invalid([&] { pg.batchIsendIrecv({}); }, "empty batch");
    invalid([&] { pg.send(TensorRef{nullptr, 4, DType::kInt32}, 1 - e.rank); }, "null data");
    // A second group over the same ranks: a timeout breaks the group it
    // happens on, and both the asynchronous and the blocking path are tried.
    auto pair = e.world->newGroup({0, 1});
    if (e.rank == 1) {
      for (bool blocking : {false, true}) {
        ProcessGroup& g = blocking ? *pair : pg;
        OpOptions o;
        o.timeout = 400ms;
        o.blocking = blocking;
        std::string what;
        auto t0 = test::monoNowNs();
        test::Caught c = test::catchError([&] { g.recv(t, 0, o)->wait(); }, &what);
        const double ms = test::msBetween(t0, test::monoNowNs());
        CHILD_CHECK(c == test::Caught::kTimeout, "blocking=" << blocking << ": " << test::caughtName(c) << " " << what);
        CHILD_CHECK(ms >= 350 && ms < 3000, "blocking=" << blocking << ": timed out after " << ms << " ms (deadline 400 ms)");
        CHILD_CHECK(what.find("rank 0 (world rank 0)") != std::string::npos,
                    "blocking=" << blocking << ": the message does not name the peer: " << what);
      }
    }
    test::storeBarrier(*e.store, "end", 2);
    return test::kExitOk;
  });
}

}  // namespace
}  // namespace meshcomm::test

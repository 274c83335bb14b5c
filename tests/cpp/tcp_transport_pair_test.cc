// Two TcpTransports of one group in one process, over a real in-process
// TCPStore (a PrefixStore for the group, as the runtime makes): the lazy
// connection, messages of every size both ways at once, and errors that
// cross the connection keeping their type (a Mismatch found by one side is
// a Mismatch on the other; an abort with Timeout is a Timeout there).
// Each side is driven by a thread of its own, as two ranks would be.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "store_fixture.h"
#include "tcp_peer.h"
#include "transport_drive.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

const MessageSignature kSig{2, 9, 0, 64, 0};

class TcpTransportPair : public TCPStoreTest {
 protected:
  std::shared_ptr<TCPStore> server_ = std::make_shared<TCPStore>(serverOptions());
  std::shared_ptr<Store> groupStore_ = std::make_shared<PrefixStore>("group", server_);
  TcpTransport rank0_{twoRankOptions(0, groupStore_)};
  TcpTransport rank1_{twoRankOptions(1, groupStore_)};
};

// Each rank sends the other one message of every size and receives the
// other's, all posted before either waits (the ring's full-duplex step).
TEST_F(TcpTransportPair, MessagesOfEverySizeBothWaysAtOnce) {
  std::string what0, what1;
  auto [c0, c1] = exchangeBothWays(rank0_, rank1_, {0, 1, 4097, size_t{8} << 20}, &what0, &what1);
  EXPECT_EQ(c0, Caught::kNone) << what0;
  EXPECT_EQ(c1, Caught::kNone) << what1;
  EXPECT_EQ(rank0_.connectionCount(), 1);
  EXPECT_EQ(rank1_.connectionCount(), 1);
}

// Rank 1 expects another signature than rank 0 sends: Mismatch on rank 1,
// naming both, and Mismatch on rank 0 too, from rank 1's abort frame.
TEST_F(TcpTransportPair, MismatchFoundByOneSideIsAMismatchOnBoth) {
  MessageSignature other = kSig;
  other.dtype = 10;
  std::vector<uint8_t> out(8, 1), in0(8, 0), in1(8, 0);
  std::string what0, what1;
  auto [c0, c1] = onTwoThreads(
      [&] {
        RequestPtr s = rank0_.postSend(1, 3, kSig, out.data(), out.size());
        RequestPtr r = rank0_.postRecv(1, 4, kSig, in0.data(), in0.size());  // never sent
        const RequestPtr both[] = {s, r};
        rank0_.wait(both, opContext(kTestGroup, "sender", 10s));
      },
      [&] {
        RequestPtr r = rank1_.postRecv(0, 3, other, in1.data(), in1.size());
        rank1_.wait({&r, 1}, opContext(kTestGroup, "receiver", 10s));
      },
      &what0, &what1);
  EXPECT_EQ(c1, Caught::kMismatch) << what1;
  EXPECT_NE(what1.find("dtype 9"), std::string::npos) << what1;
  EXPECT_NE(what1.find("dtype 10"), std::string::npos) << what1;
  EXPECT_EQ(c0, Caught::kMismatch) << what0;
  EXPECT_NE(what0.find("rank 1 (world rank 11) aborted the group"), std::string::npos) << what0;
}

// An abort keeps its error's type on the other side, and closes the
// connection on both.
TEST_F(TcpTransportPair, AbortReachesTheBlockedPeerWithItsType) {
  int32_t x = 0, y = 0;  // one buffer per thread
  // Connect first, so the abort has a connection to travel on.
  std::string what0, what1;
  auto [w0, w1] = onTwoThreads(
      [&] {
        RequestPtr s = rank0_.postSend(1, 1, kSig, &x, sizeof(x));
        rank0_.wait({&s, 1}, opContext(kTestGroup, "warm-up", 10s));
      },
      [&] {
        RequestPtr r = rank1_.postRecv(0, 1, kSig, &y, sizeof(y));
        rank1_.wait({&r, 1}, opContext(kTestGroup, "warm-up", 10s));
      },
      &what0, &what1);
  ASSERT_EQ(w0, Caught::kNone) << what0;
  ASSERT_EQ(w1, Caught::kNone) << what1;
  std::thread aborter([&] {
    std::this_thread::sleep_for(100ms);  // rank 1 is blocked by then
    rank0_.abort(std::make_exception_ptr(Timeout("rank 0 gave up waiting")));
  });
  Caught c = catchError(
      [&] {
        RequestPtr r = rank1_.postRecv(0, 2, kSig, &y, sizeof(y));
        rank1_.wait({&r, 1}, opContext(kTestGroup, "blocked", 10s));
      },
      &what1);
  aborter.join();
  EXPECT_EQ(c, Caught::kTimeout) << what1;
  EXPECT_NE(what1.find("rank 0 gave up waiting"), std::string::npos) << what1;
  EXPECT_EQ(rank0_.connectionCount(), 0);
  EXPECT_EQ(rank1_.connectionCount(), 0);
  // Both stay broken with their own error.
  EXPECT_EQ(catchError([&] { rank0_.postSend(1, 3, kSig, &x, sizeof(x)); }), Caught::kTimeout);
  EXPECT_EQ(catchError([&] { rank1_.postSend(0, 3, kSig, &y, sizeof(y)); }), Caught::kTimeout);
}

}  // namespace
}  // namespace meshcomm::test

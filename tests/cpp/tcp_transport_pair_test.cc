// Two TcpTransports of one group in one process, over a real in-process
// TCPStore (a PrefixStore for the group, as the runtime makes): the lazy
// connection, messages of every size both ways at once, and errors that
// cross the connection keeping their type (a Mismatch found by one side is
// a Mismatch on the other; an abort with Timeout is a Timeout there).
// Each side is driven by a thread of its own, as two ranks would be.
#include <gtest/gtest.h>

#include <algorithm>
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

// Sends posted while held leave together, several to a write, and arrive
// whole and in order: sizes from empty to several MiB (writes cut short by
// a full socket), more messages than one write carries, some posted
// before the connection exists. A wait while sends are held writes them.
TEST_F(TcpTransportPair, HeldSendsArriveWholeAndInOrder) {
  std::vector<size_t> sizes;
  for (int i = 0; i < 80; ++i) {
    const size_t pattern[] = {0, 1, 40, 4097, 65536, size_t{3} << 20, 7};
    sizes.push_back(pattern[i % 7]);
  }
  auto fill = [](size_t message, size_t i) { return static_cast<uint8_t>(message * 31 + i * 7); };
  std::vector<std::vector<uint8_t>> out, in;
  for (size_t m = 0; m < sizes.size(); ++m) {
    out.emplace_back(sizes[m]);
    for (size_t i = 0; i < sizes[m]; ++i) out[m][i] = fill(m, i);
    in.emplace_back(sizes[m], 0xee);
  }
  std::string what0, what1;
  auto [c0, c1] = onTwoThreads(
      [&] {
        std::vector<RequestPtr> sends;
        for (int round = 0; round < 2; ++round) {
          SendHold hold(rank0_);
          for (size_t m = 0; m < sizes.size(); ++m) {
            sends.push_back(rank0_.postSend(1, 100 + m % 3, kSig, out[m].data(), out[m].size()));
          }
          // The first round waits with its sends still held.
          if (round == 1) hold.release();
          rank0_.wait(sends, opContext(kTestGroup, "held sends", 20s));
          sends.clear();
        }
      },
      [&] {
        for (int round = 0; round < 2; ++round) {
          std::vector<RequestPtr> recvs;
          for (size_t m = 0; m < sizes.size(); ++m) {
            recvs.push_back(rank1_.postRecv(0, 100 + m % 3, kSig, in[m].data(), in[m].size()));
          }
          rank1_.wait(recvs, opContext(kTestGroup, "receiving held sends", 20s));
          for (size_t m = 0; m < sizes.size(); ++m) {
            ASSERT_EQ(in[m], out[m]) << "round " << round << ", message " << m << " of " << sizes[m] << " bytes";
            std::fill(in[m].begin(), in[m].end(), 0xee);
          }
        }
      },
      &what0, &what1);
  EXPECT_EQ(c0, Caught::kNone) << what0;
  EXPECT_EQ(c1, Caught::kNone) << what1;
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

// A peer that closes its TcpTransport connection at every point of the
// frame stream (tcp_peer.h). While a message from it is expected, the
// close is PeerLost naming the peer, promptly (not at the deadline),
// whether the peer closes cleanly (FIN) or resets (RST). Between messages
// with nothing expected from or queued for it, the close is a peer that
// finished its part: no error until something is posted for it again.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <thread>

#include "store_fixture.h"
#include "tcp_peer.h"
#include "transport_drive.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

const MessageSignature kSig{7, 3, 0, 100, 0};

OpContext context(std::chrono::milliseconds timeout) { return opContext(kTestGroup, "test receive", timeout); }

// Where in the stream the peer stops: how many bytes of one 100-byte
// message frame it writes after the hello.
struct CutPoint {
  const char* name;
  size_t bytes;
};
constexpr size_t kHeader = sizeof(wire::Header);
constexpr CutPoint kCutPoints[] = {
    {"BeforeTheHeader", 0},
    {"MidHeader", kHeader / 2},
    {"AfterTheHeader", kHeader},
    {"MidPayload", kHeader + 50},
};

enum class Ending { kClose, kReset };

struct CloseCase {
  CutPoint cut;
  Ending ending;
};
void PrintTo(const CloseCase& c, std::ostream* os) {
  *os << c.cut.name << (c.ending == Ending::kClose ? ", then close" : ", then reset");
}

class TcpPeerCloses : public TCPStoreTest {
 protected:
  std::shared_ptr<TCPStore> server_ = std::make_shared<TCPStore>(serverOptions());
  RawPeer peer_{std::make_shared<PrefixStore>("group", server_)};

  void end(Ending how) {
    if (how == Ending::kReset) {
      linger l{1, 0};  // close with RST
      ::setsockopt(peer_.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    peer_.close();
  }

  // Posts a receive of a 100-byte message and waits for it.
  Caught receive(std::string* what, Bytes& into) {
    return catchError(
        [&] {
          RequestPtr r = peer_.transport().postRecv(0, 1, kSig, into.data(), into.size());
          peer_.transport().wait({&r, 1}, context(10s));
        },
        what);
  }
};

class TcpTransportClose : public TcpPeerCloses, public ::testing::WithParamInterface<CloseCase> {};

TEST_P(TcpTransportClose, WhileAMessageIsExpectedIsPeerLost) {
  ASSERT_TRUE(peer_.dial());
  Bytes frame = dataFrame(1, kSig, Bytes(100, 0x5A));
  ASSERT_TRUE(peer_.write({frame.data(), GetParam().cut.bytes}));
  end(GetParam().ending);
  Bytes into(100);
  std::string what;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(receive(&what, into), Caught::kPeerLost) << what;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s) << "the close was noticed only near the deadline";
  EXPECT_NE(what.find(std::string("lost the connection to ") + kPeerName + " of group tcp_test_group"),
            std::string::npos)
      << what;
  EXPECT_NE(peer_.transport().brokenError(), nullptr);
  EXPECT_EQ(peer_.transport().connectionCount(), 0);
}

std::vector<CloseCase> closeCases() {
  std::vector<CloseCase> cases;
  for (const CutPoint& cut : kCutPoints) {
    cases.push_back({cut, Ending::kClose});
    cases.push_back({cut, Ending::kReset});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(FrameBoundaries, TcpTransportClose, ::testing::ValuesIn(closeCases()),
                         [](const ::testing::TestParamInfo<CloseCase>& info) {
                           return std::string(info.param.cut.name) +
                                  (info.param.ending == Ending::kClose ? "_Close" : "_Reset");
                         });

// The peer sends its last message and exits cleanly: the message arrives,
// the transport stays whole while nothing is expected from the peer, and
// only a later receive from it is PeerLost.
TEST_F(TcpPeerCloses, BetweenMessagesIsNoErrorUntilSomethingIsPostedForIt) {
  ASSERT_TRUE(peer_.dial());
  const Bytes payload(100, 0x5A);
  ASSERT_TRUE(peer_.write(dataFrame(1, kSig, payload)));
  peer_.shutdownWrite();
  Bytes into(100);
  std::string what;
  ASSERT_EQ(receive(&what, into), Caught::kNone) << what;
  EXPECT_EQ(into, payload);
  peer_.close();
  std::this_thread::sleep_for(20ms);
  peer_.transport().progress(50ms, -1);
  EXPECT_EQ(peer_.transport().brokenError(), nullptr);
  EXPECT_FALSE(peer_.transport().hasPending());
  EXPECT_EQ(receive(&what, into), Caught::kPeerLost) << what;
  EXPECT_NE(what.find(kPeerName), std::string::npos) << what;
}

// A peer that disappears while the transport is still writing a large
// message to it.
TEST_F(TcpPeerCloses, DuringALargeSendIsPeerLost) {
  ASSERT_TRUE(peer_.dial());
  const Bytes payload(32 << 20, 1);
  std::thread closer([&] {
    std::this_thread::sleep_for(50ms);
    uint8_t some[1000];
    [[maybe_unused]] ssize_t n = ::recv(peer_.fd(), some, sizeof(some), 0);
    end(Ending::kClose);
  });
  std::string what;
  Caught c = catchError(
      [&] {
        RequestPtr s = peer_.transport().postSend(0, 1, kSig, payload.data(), payload.size());
        peer_.transport().wait({&s, 1}, context(10s));
      },
      &what);
  closer.join();
  EXPECT_EQ(c, Caught::kPeerLost) << what;
  EXPECT_NE(what.find(kPeerName), std::string::npos) << what;
}

}  // namespace
}  // namespace meshcomm::test

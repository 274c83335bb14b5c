// TcpTransport's receive path against a raw socket peer (tcp_peer.h):
// frames that arrive in pieces, zero-byte and large messages, and every
// malformed or hostile stream the transport must turn into a clear error
// (bad magic, unknown kind, oversized abort, signature mismatch) or into
// the exception an abort frame names. How the transport handles a peer
// that closes the connection is in tcp_transport_close_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store_fixture.h"
#include "tcp_peer.h"
#include "transport_drive.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

const MessageSignature kSig{7, 3, 0, 1000, 42};

OpContext context(std::chrono::milliseconds timeout) { return opContext(kTestGroup, "test receive", timeout); }

Bytes pattern(size_t n, uint8_t seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 11));
  return b;
}

// A store server per test, with the transport's keys under a prefix of
// their own, as a group's are.
class TcpTransportFrames : public TCPStoreTest {
 protected:
  std::shared_ptr<TCPStore> server_ = std::make_shared<TCPStore>(serverOptions());
  std::shared_ptr<Store> groupStore_ = std::make_shared<PrefixStore>("group", server_);
  RawPeer peer_{groupStore_};

  // Posts a receive from the raw peer, waits for it and returns what the
  // wait threw (Caught::kNone when it completed).
  Caught receive(Bytes& into, const MessageSignature& sig = kSig, uint64_t tag = 5,
                 std::chrono::milliseconds timeout = 10s, std::string* what = nullptr) {
    return catchError(
        [&] {
          RequestPtr r = peer_.transport().postRecv(0, tag, sig, into.data(), into.size());
          peer_.transport().wait({&r, 1}, context(timeout));
        },
        what);
  }
  // A 4-byte receive of tag 5 that must fail with `expected`; returns the
  // error's message.
  std::string failedReceive(Caught expected, std::chrono::milliseconds timeout = 10s) {
    Bytes into(4);
    std::string what;
    EXPECT_EQ(receive(into, kSig, 5, timeout, &what), expected) << what;
    return what;
  }
};

// Every byte of the hello and of three frames (0, 1 and 1000 bytes) in a
// send() of its own, with pauses, so the transport reassembles headers and
// payloads from single-byte reads.
TEST_F(TcpTransportFrames, FramesWrittenOneByteAtATimeArriveWhole) {
  Bytes stream = helloFrame(kTestGroup, 0, 1);
  const std::vector<Bytes> payloads = {Bytes{}, pattern(1, 9), pattern(1000, 3)};
  for (size_t i = 0; i < payloads.size(); ++i) {
    Bytes f = dataFrame(100 + i, kSig, payloads[i]);
    stream.insert(stream.end(), f.begin(), f.end());
  }
  ASSERT_TRUE(peer_.dial(Bytes{}));  // the hello goes byte by byte too
  std::thread writer([&] {
    for (uint8_t byte : stream) {
      if (!peer_.write({&byte, 1})) return;
      std::this_thread::sleep_for(20us);
    }
  });
  std::vector<Bytes> got = {Bytes{}, Bytes(1), Bytes(1000)};
  std::vector<RequestPtr> reqs;
  for (size_t i = 0; i < got.size(); ++i) {
    reqs.push_back(peer_.transport().postRecv(0, 100 + i, kSig, got[i].data(), got[i].size()));
  }
  std::string what;
  Caught c = catchError([&] { peer_.transport().wait(reqs, context(20s)); }, &what);
  writer.join();
  ASSERT_EQ(c, Caught::kNone) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], payloads[i]) << "message " << i;
}

// 8 MiB written in random pieces (1 byte to 64 KiB) while the transport
// reads into the receive's buffer.
TEST_F(TcpTransportFrames, LargePayloadInRandomPiecesArrives) {
  const Bytes payload = pattern(8 << 20, 1);
  const Bytes frame = dataFrame(5, kSig, payload);
  ASSERT_TRUE(peer_.dial());
  std::thread writer([&] {
    std::mt19937 rng(12345);
    for (size_t at = 0; at < frame.size();) {
      size_t n = std::min<size_t>(frame.size() - at, 1 + rng() % (64 << 10));
      if (!peer_.write({frame.data() + at, n})) return;
      at += n;
    }
  });
  Bytes got(payload.size());
  std::string what;
  Caught c = receive(got, kSig, 5, 20s, &what);
  writer.join();
  ASSERT_EQ(c, Caught::kNone) << what;
  EXPECT_TRUE(got == payload);
}

// Frames of every size around the transport's read-ahead, all in one
// write, so one recv holds several headers and parts of payloads. The
// receives are posted in another order than the frames', the last one
// only after the others completed: a frame read ahead meanwhile must be
// found without anything more arriving on the socket.
TEST_F(TcpTransportFrames, FramesReadTogetherArriveWholeInAnyOrder) {
  const std::vector<size_t> sizes = {8, 0, 4000, 4096, 5000, 8, 100000, 16, 1};
  std::vector<Bytes> payloads;
  Bytes stream;
  for (size_t i = 0; i < sizes.size(); ++i) {
    payloads.push_back(pattern(sizes[i], static_cast<uint8_t>(i)));
    Bytes f = dataFrame(200 + i, kSig, payloads.back());
    stream.insert(stream.end(), f.begin(), f.end());
  }
  ASSERT_TRUE(peer_.dial());
  ASSERT_TRUE(peer_.write(stream));
  std::vector<Bytes> got;
  for (size_t n : sizes) got.emplace_back(n);
  const size_t last = 7;  // the 16-byte frame, behind the 100000-byte one
  std::vector<RequestPtr> reqs;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (i == last) continue;
    reqs.push_back(peer_.transport().postRecv(0, 200 + i, kSig, got[i].data(), got[i].size()));
  }
  std::string what;
  Caught c = catchError([&] { peer_.transport().wait(reqs, context(10s)); }, &what);
  ASSERT_EQ(c, Caught::kNone) << what;
  c = receive(got[last], kSig, 200 + last, 5s, &what);
  ASSERT_EQ(c, Caught::kNone) << what;
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(got[i], payloads[i]) << "message " << i;
}

// Zero-byte messages both ways: received in the opposite order of their
// tags, and sent as a bare header.
TEST_F(TcpTransportFrames, ZeroByteMessagesBothWays) {
  ASSERT_TRUE(peer_.dial());
  Bytes first = dataFrame(1, kSig, {});
  Bytes second = dataFrame(2, kSig, {});
  ASSERT_TRUE(peer_.write(first) && peer_.write(second));
  RequestPtr r2 = peer_.transport().postRecv(0, 2, kSig, nullptr, 0);
  RequestPtr r1 = peer_.transport().postRecv(0, 1, kSig, nullptr, 0);
  RequestPtr s = peer_.transport().postSend(0, 9, kSig, nullptr, 0);
  const RequestPtr all[] = {r2, r1, s};
  peer_.transport().wait(all, context(10s));
  EXPECT_TRUE(r1->state == Request::State::kDone && r2->state == Request::State::kDone);
  auto sent = peer_.readFrame(5s);
  ASSERT_TRUE(sent.has_value());
  EXPECT_EQ(sent->first.magic, wire::kMagic);
  EXPECT_EQ(sent->first.kind, static_cast<uint8_t>(wire::Kind::kData));
  EXPECT_EQ(sent->first.tag, 9u);
  EXPECT_EQ(sent->first.bytes, 0u);
  EXPECT_EQ(sent->first.opcode, kSig.opcode);
  EXPECT_EQ(sent->first.detail, kSig.detail);
}

// A 16 MiB send leaves in many partial writes while the peer reads slowly;
// the peer gets the header and every byte, in order.
TEST_F(TcpTransportFrames, LargeSendLeavesInPartialWrites) {
  ASSERT_TRUE(peer_.dial());
  const Bytes payload = pattern(16 << 20, 7);
  std::optional<std::pair<wire::Header, Bytes>> got;
  std::thread reader([&] {
    std::this_thread::sleep_for(50ms);  // let the socket buffers fill first
    got = peer_.readFrame(20s);
  });
  RequestPtr s = peer_.transport().postSend(0, 77, kSig, payload.data(), payload.size());
  std::string what;
  Caught c = catchError([&] { peer_.transport().wait({&s, 1}, context(20s)); }, &what);
  reader.join();
  ASSERT_EQ(c, Caught::kNone) << what;
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->first.tag, 77u);
  EXPECT_EQ(got->first.bytes, payload.size());
  EXPECT_TRUE(got->second == payload);
}

// ---- malformed streams --------------------------------------------------------------

TEST_F(TcpTransportFrames, BadMagicIsACorruptHeaderNamingThePeer) {
  ASSERT_TRUE(peer_.dial());
  wire::Header h = dataHeader(5, kSig, 4);
  h.magic = 0x12345678;
  ASSERT_TRUE(peer_.write(frameBytes(h, pattern(4, 0))));
  // A plain Error: nothing about the peer's state can be concluded.
  const std::string what = failedReceive(Caught::kOtherError);
  EXPECT_CONTAINS(what, "bad magic");
  EXPECT_CONTAINS(what, kPeerName);
  // The transport is broken, and says so to every later call.
  EXPECT_NE(peer_.transport().brokenError(), nullptr);
  failedReceive(Caught::kOtherError);
}

TEST_F(TcpTransportFrames, UnknownKindIsRefused) {
  ASSERT_TRUE(peer_.dial());
  wire::Header h = dataHeader(5, kSig, 0);
  h.kind = 7;
  ASSERT_TRUE(peer_.write(frameBytes(h, {})));
  EXPECT_CONTAINS(failedReceive(Caught::kOtherError), "unexpected message kind 7");
}

TEST_F(TcpTransportFrames, SecondHelloOnAConnectionIsRefused) {
  ASSERT_TRUE(peer_.dial());
  ASSERT_TRUE(peer_.write(helloFrame(kTestGroup, 0, 1)));
  EXPECT_CONTAINS(failedReceive(Caught::kOtherError), "unexpected message kind 1");
}

TEST_F(TcpTransportFrames, OversizedAbortIsRefusedBeforeItsPayload) {
  ASSERT_TRUE(peer_.dial());
  wire::Header h;
  h.kind = static_cast<uint8_t>(wire::Kind::kAbort);
  h.bytes = wire::kMaxAbortBytes + 1;  // no payload follows: it must not be awaited
  ASSERT_TRUE(peer_.write(frameBytes(h, {})));
  EXPECT_CONTAINS(failedReceive(Caught::kOtherError), "oversized abort message");
}

// A hello for another group is dropped (its connection closed); a proper
// dial afterwards still connects.
TEST_F(TcpTransportFrames, MisaddressedHelloIsDroppedAndAProperDialStillConnects) {
  RawPeer& good = peer_;
  Fd stray;
  {
    const std::string address = groupStore_->getString("addr/1");
    const size_t colon = address.rfind(':');
    std::string why;
    stray = tryConnectTcp(address.substr(0, colon), static_cast<uint16_t>(std::stoi(address.substr(colon + 1))),
                          Deadline::after(5s), &why);
    ASSERT_TRUE(stray.valid()) << why;
    Bytes hello = helloFrame("another_group", 0, 1);
    ASSERT_TRUE(sendAll(stray.get(), hello.data(), hello.size(), Deadline::after(5s)).ok());
    Bytes junk = dataFrame(5, kSig, pattern(4, 99));
    ASSERT_TRUE(sendAll(stray.get(), junk.data(), junk.size(), Deadline::after(5s)).ok());
  }
  Bytes want = pattern(4, 1);
  ASSERT_TRUE(good.dial());
  ASSERT_TRUE(good.write(dataFrame(5, kSig, want)));
  Bytes into(4);
  std::string what;
  ASSERT_EQ(receive(into, kSig, 5, 10s, &what), Caught::kNone) << what;
  EXPECT_EQ(into, want);  // not the stray connection's bytes
  uint8_t byte;
  EXPECT_TRUE(recvAll(stray.get(), &byte, 1, Deadline::after(5s)).status == IoStatus::kClosed);
}

// ---- aborts and mismatches ------------------------------------------------------------

struct AbortCase {
  const char* name;
  uint8_t reason;
  Caught raises;
};
void PrintTo(const AbortCase& c, std::ostream* os) { *os << c.name; }

class TcpTransportAbortFrame : public TcpTransportFrames,
                               public ::testing::WithParamInterface<AbortCase> {};

// An abort frame from the peer raises the error its reason names, with the
// peer's text, while a message from it is expected.
TEST_P(TcpTransportAbortFrame, RaisesTheExceptionItsReasonNames) {
  ASSERT_TRUE(peer_.dial());
  ASSERT_TRUE(peer_.write(abortFrame(GetParam().reason, "the peer's own account")));
  EXPECT_CONTAINS(failedReceive(GetParam().raises),
                  std::string(kPeerName) + " aborted the group: the peer's own account");
}

INSTANTIATE_TEST_SUITE_P(
    Reasons, TcpTransportAbortFrame,
    ::testing::Values(AbortCase{"PeerLost", static_cast<uint8_t>(wire::AbortReason::kPeerLost), Caught::kPeerLost},
                      AbortCase{"Timeout", static_cast<uint8_t>(wire::AbortReason::kTimeout), Caught::kTimeout},
                      AbortCase{"Mismatch", static_cast<uint8_t>(wire::AbortReason::kMismatch), Caught::kMismatch},
                      AbortCase{"Aborted", static_cast<uint8_t>(wire::AbortReason::kAborted), Caught::kAborted},
                      // A reason this build does not know is still an abort.
                      AbortCase{"UnknownReason", 200, Caught::kAborted}),
    [](const ::testing::TestParamInfo<AbortCase>& info) { return std::string(info.param.name); });

TEST_F(TcpTransportFrames, EmptyAbortIsAnAbort) {
  ASSERT_TRUE(peer_.dial());
  wire::Header h;
  h.kind = static_cast<uint8_t>(wire::Kind::kAbort);
  ASSERT_TRUE(peer_.write(frameBytes(h, {})));
  failedReceive(Caught::kAborted);
}

// A message whose signature differs from the receive's: Mismatch naming
// both signatures, and the peer is told why in an abort frame.
TEST_F(TcpTransportFrames, SignatureMismatchNamesBothSidesAndTellsThePeer) {
  ASSERT_TRUE(peer_.dial());
  MessageSignature theirs = kSig;
  theirs.opcode = 9;
  theirs.opCount = 2000;
  ASSERT_TRUE(peer_.write(dataFrame(5, theirs, pattern(4, 0))));
  const std::string what = failedReceive(Caught::kMismatch);
  EXPECT_CONTAINS(what, kPeerName);
  EXPECT_CONTAINS(what, "it sent [opcode 9, dtype 3, op 0, 2000 elements");
  EXPECT_CONTAINS(what, "this rank expects [opcode 7, dtype 3, op 0, 1000 elements");
  auto told = peer_.readFrame(5s);
  ASSERT_TRUE(told.has_value());
  EXPECT_EQ(told->first.kind, static_cast<uint8_t>(wire::Kind::kAbort));
  ASSERT_FALSE(told->second.empty());
  EXPECT_EQ(told->second[0], static_cast<uint8_t>(wire::AbortReason::kMismatch));
  EXPECT_TRUE(peer_.seesClose(5s));
}

// A message of the right signature but another size is a mismatch too.
TEST_F(TcpTransportFrames, SizeMismatchNamesBothSizes) {
  ASSERT_TRUE(peer_.dial());
  ASSERT_TRUE(peer_.write(dataFrame(5, kSig, pattern(6, 0))));
  const std::string what = failedReceive(Caught::kMismatch);
  EXPECT_CONTAINS(what, "6 bytes] where this rank expects");
  EXPECT_CONTAINS(what, "4 bytes]");
}

// A peer that connected but never sends: Timeout at the deadline, naming it.
TEST_F(TcpTransportFrames, WaitPastItsDeadlineTimesOutNamingThePeer) {
  ASSERT_TRUE(peer_.dial());
  const auto t0 = std::chrono::steady_clock::now();
  const std::string what = failedReceive(Caught::kTimeout, 300ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 3s);
  EXPECT_CONTAINS(what, std::string(kPeerName) + " to send");
  EXPECT_CONTAINS(what, "test receive #0 on group tcp_test_group");
}

}  // namespace
}  // namespace meshcomm::test

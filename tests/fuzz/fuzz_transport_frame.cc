// libFuzzer target for TcpTransport's receive path: the input becomes the
// byte stream a peer sends after a valid hello, read by a real
// TcpTransport over a loopback connection (tests/cpp/tcp_peer.h), so the
// header checks, abort decoding, receive matching and payload placement
// all run exactly as they do between ranks.
//
// Input layout:
//   byte 0     bits 0-1: receives to post (1 to 4); bit 2: also post a
//              send to the peer, so frames arrive while one leaves
//   bytes 1-8  per receive, a tag (0-3) and a size class (0, 1, 40 or
//              4096 bytes); the signature is fixed, so a frame matches only
//              if the fuzzer reproduces it
//   the rest   the stream, followed by end of file
//
// Beyond "does not crash" (ASan/UBSan), each run checks that the wait ends
// well before its deadline (end of file must end it: PeerLost while a
// message is expected), that it ends with a meshcomm::Error or with every
// receive done, and that a broken transport reports the error it threw.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "../cpp/tcp_peer.h"
#include "../cpp/transport_drive.h"
#include "meshcomm/error.h"

namespace {

using namespace meshcomm;

#define FUZZ_REQUIRE(cond) \
  do {                     \
    if (!(cond)) __builtin_trap(); \
  } while (0)

constexpr size_t kScriptBytes = 9;
// Keeps the stream inside the socket buffers, so writing it never waits
// for the transport, which reads only once the stream is complete.
constexpr size_t kMaxStreamBytes = 64 * 1024;
constexpr size_t kSizeClasses[] = {0, 1, 40, 4096};
const MessageSignature kSig{2, 1, 0, 64, 0};

std::shared_ptr<Store> groupStore() {
  static const std::shared_ptr<Store> store = [] {
    TCPStoreOptions o;
    o.isServer = true;
    o.port = 0;
    o.timeout = std::chrono::seconds(10);
    return std::make_shared<PrefixStore>("fuzz", std::make_shared<TCPStore>(o));
  }();
  return store;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kScriptBytes) return 0;
  const int receives = 1 + (data[0] & 3);
  const bool alsoSend = (data[0] & 4) != 0;
  const size_t streamBytes = std::min(size - kScriptBytes, kMaxStreamBytes);

  // A small budget for messages nobody receives yet, so a header that
  // claims gigabytes is refused rather than allocated.
  test::RawPeer peer(groupStore(), /*maxUnexpectedBytes=*/64 * 1024);
  FUZZ_REQUIRE(peer.dial());
  FUZZ_REQUIRE(peer.write({data + kScriptBytes, streamBytes}));
  peer.shutdownWrite();

  TcpTransport& t = peer.transport();
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<RequestPtr> requests;
  const std::vector<uint8_t> outgoing(16, 0xAB);
  bool threw = false;
  const auto start = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < receives; ++i) {
      const uint64_t tag = data[1 + 2 * i] & 3;
      buffers.emplace_back(kSizeClasses[data[2 + 2 * i] & 3]);
      requests.push_back(t.postRecv(0, tag, kSig, buffers.back().data(), buffers.back().size()));
    }
    if (alsoSend) requests.push_back(t.postSend(0, 9, kSig, outgoing.data(), outgoing.size()));
    t.wait(requests, test::opContext(test::kTestGroup, "fuzzed receive", std::chrono::seconds(5)));
  } catch (const Error&) {
    threw = true;  // every malformed stream must end here, never elsewhere
  }
  // End of file ends every wait long before the deadline.
  FUZZ_REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(4));
  if (threw) {
    FUZZ_REQUIRE(t.brokenError() != nullptr);
    FUZZ_REQUIRE(t.connectionCount() == 0);
  } else {
    for (const auto& r : requests) FUZZ_REQUIRE(r->state == Request::State::kDone);
  }
  return 0;
}

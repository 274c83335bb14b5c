// A TcpTransport seen from a raw socket: the transport under test is group
// rank 1 of a two-rank group, and the test plays rank 0 with a plain
// socket that speaks the frame format (src/transport/wire.h,
// docs/transport-protocol.md). The raw side can write anything: frames
// byte by byte, frames cut short, garbage, aborts; and it reads the frames
// the transport writes.
//
// Rank 0 is the dialing side of the pair (the lower rank dials), so the
// raw peer connects to the transport's listener, whose address the
// transport publishes in the group's store, and opens with a hello. The
// kernel completes the connection from the listen backlog, so everything
// the peer writes is queued before the transport even accepts: the
// transport accepts when a request for rank 0 is posted and waited for.
//
// Used by the unit tests (tcp_transport_*_test.cc) and by the libFuzzer
// target tests/fuzz/fuzz_transport_frame.cc, so nothing here depends on
// GoogleTest.
//
// Thread-safety: a RawPeer is used from one thread at a time, except that
// write() may run on another thread than the one driving the transport.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/deadline.h"
#include "common/fd.h"
#include "common/socket.h"
#include "meshcomm/store.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"

namespace meshcomm::test {

// World ranks of the two sides differ from their group ranks, so a test can
// check that a message names a peer by both.
inline constexpr int kPeerWorldRank = 10;       // group rank 0: the raw socket
inline constexpr int kTransportWorldRank = 11;  // group rank 1: the TcpTransport
inline constexpr char kTestGroup[] = "tcp_test_group";
// How the transport names its peer in messages.
inline constexpr char kPeerName[] = "rank 0 (world rank 10)";

// ---- frames ---------------------------------------------------------------------

inline Bytes frameBytes(const wire::Header& h, std::span<const uint8_t> payload) {
  Bytes out(sizeof(h) + payload.size());
  std::memcpy(out.data(), &h, sizeof(h));
  if (!payload.empty()) std::memcpy(out.data() + sizeof(h), payload.data(), payload.size());
  return out;
}

inline wire::Header dataHeader(uint64_t tag, const MessageSignature& sig, uint64_t bytes) {
  wire::Header h;
  h.kind = static_cast<uint8_t>(wire::Kind::kData);
  h.opcode = sig.opcode;
  h.dtype = sig.dtype;
  h.reduceOp = sig.reduceOp;
  h.opCount = sig.opCount;
  h.detail = sig.detail;
  h.tag = tag;
  h.bytes = bytes;
  return h;
}

inline Bytes dataFrame(uint64_t tag, const MessageSignature& sig, std::span<const uint8_t> payload) {
  return frameBytes(dataHeader(tag, sig, payload.size()), payload);
}

// An abort frame: the reason byte, then the text.
inline Bytes abortFrame(uint8_t reason, const std::string& text) {
  // Sized once and copied into: GCC 12 warns falsely (-Warray-bounds) about
  // inserting into a one-byte vector.
  Bytes payload(1 + text.size());
  payload[0] = reason;
  if (!text.empty()) std::memcpy(payload.data() + 1, text.data(), text.size());
  wire::Header h;
  h.kind = static_cast<uint8_t>(wire::Kind::kAbort);
  h.bytes = payload.size();
  return frameBytes(h, payload);
}

// The hello rank `from` sends rank `to` of `group` without authentication.
inline Bytes helloFrame(const std::string& group, int from, int to) {
  std::string text = "meshcomm-hello|" + group + "|" + std::to_string(from) + "|" + std::to_string(to);
  wire::Header h;
  h.kind = static_cast<uint8_t>(wire::Kind::kHello);
  h.tag = static_cast<uint64_t>(from);
  h.opCount = static_cast<uint64_t>(to);
  h.bytes = text.size();
  return frameBytes(h, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

// The options of group rank `rank` of a two-rank kTestGroup whose keys live
// in `groupStore`. No monitor and no token: only the connection matters.
inline TcpTransportOptions twoRankOptions(int rank, std::shared_ptr<Store> groupStore,
                                          size_t maxUnexpectedBytes = size_t{1} << 20) {
  TcpTransportOptions o;
  o.groupName = kTestGroup;
  o.rank = rank;
  o.worldRanks = {kPeerWorldRank, kTransportWorldRank};
  o.advertiseHost = "127.0.0.1";
  o.groupStore = std::move(groupStore);
  o.matcher = std::make_shared<ReceiveMatcher>(maxUnexpectedBytes);
  return o;
}

// ---- the raw peer -----------------------------------------------------------------

class RawPeer {
 public:
  // Creates the transport under test (group rank 1) over `groupStore`.
  explicit RawPeer(std::shared_ptr<Store> groupStore, size_t maxUnexpectedBytes = size_t{1} << 20)
      : store_(groupStore), transport_(twoRankOptions(1, std::move(groupStore), maxUnexpectedBytes)) {}

  TcpTransport& transport() { return transport_; }

  // Connects to the transport's listener as rank 0 and, unless `hello` is
  // given, writes the valid hello. Returns false if the dial failed.
  bool dial(std::optional<Bytes> hello = std::nullopt) {
    const std::string address = store_->getString("addr/1");
    const size_t colon = address.rfind(':');
    const auto port = static_cast<uint16_t>(std::stoi(address.substr(colon + 1)));
    std::string why;
    fd_ = tryConnectTcp(address.substr(0, colon), port, Deadline::after(std::chrono::seconds(5)), &why);
    if (!fd_.valid()) return false;
    return write(hello ? *hello : helloFrame(kTestGroup, 0, 1));
  }

  // Writes every byte, waiting while the socket is full (bounded). Returns
  // false if the transport closed the connection first.
  bool write(std::span<const uint8_t> bytes) {
    if (bytes.empty()) return true;
    return sendAll(fd_.get(), bytes.data(), bytes.size(), Deadline::after(std::chrono::seconds(10))).ok();
  }

  // Reads one whole frame the transport sent, or nullopt on EOF, error or
  // at the deadline.
  std::optional<std::pair<wire::Header, Bytes>> readFrame(std::chrono::milliseconds timeout) {
    const Deadline deadline = Deadline::after(timeout);
    wire::Header h;
    if (!recvAll(fd_.get(), &h, sizeof(h), deadline).ok()) return std::nullopt;
    // The transport never sends more than this in a test; a larger value
    // means the stream is out of step.
    if (h.bytes > (uint64_t{1} << 30)) return std::nullopt;
    Bytes payload(h.bytes);
    if (!payload.empty() && !recvAll(fd_.get(), payload.data(), payload.size(), deadline).ok()) {
      return std::nullopt;
    }
    return std::make_pair(h, std::move(payload));
  }

  // Whether the transport closes the connection within `timeout`
  // (frames it sent first, such as an abort, are skipped).
  bool seesClose(std::chrono::milliseconds timeout) {
    const Deadline deadline = Deadline::after(timeout);
    uint8_t sink[4096];
    for (;;) {
      ssize_t n = ::recv(fd_.get(), sink, sizeof(sink), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
      if (n > 0) continue;
      if (errno == EINTR) continue;
      if (!waitReadable(fd_.get(), deadline).ok()) return false;
    }
  }

  // No more bytes from this side (the transport reads EOF after what was sent).
  void shutdownWrite() { ::shutdown(fd_.get(), SHUT_WR); }
  void close() { fd_.reset(); }
  int fd() const { return fd_.get(); }

 private:
  std::shared_ptr<Store> store_;
  TcpTransport transport_;
  Fd fd_;
};

}  // namespace meshcomm::test

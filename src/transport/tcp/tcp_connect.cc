// How TcpTransport's connections open: within a pair the lower rank dials
// the higher rank's listener (its address in the group's store) and sends
// a hello naming the group and both ranks, with an HMAC of it when the job
// has an authentication token; the higher rank accepts, reads the hello
// without blocking the transport, and keeps the connection only if the
// hello is valid and the pair has none yet.
#include <sys/socket.h>

#include <cstring>
#include <string>

#include "common/check.h"
#include "common/crypto.h"
#include "common/logging.h"
#include "common/socket.h"
#include "meshcomm/error.h"
#include "transport/tcp/tcp_pair.h"
#include "transport/tcp/tcp_transport.h"

namespace meshcomm {
namespace {

constexpr auto kDialTimeout = std::chrono::seconds(30);

}  // namespace

std::string TcpTransport::helloPayload(int from, int to) const {
  std::string text = "meshcomm-hello|" + options_.groupName + "|" + std::to_string(from) +
                     "|" + std::to_string(to);
  if (options_.authToken.empty()) return text;
  Bytes mac = hmacSha256(options_.authToken, Bytes(text.begin(), text.end()));
  static const char* kHex = "0123456789abcdef";
  text += "|";
  for (uint8_t b : mac) {
    text.push_back(kHex[b >> 4]);
    text.push_back(kHex[b & 15]);
  }
  return text;
}

void TcpTransport::ensureConnection(Pair& p) {
  if (p.state != Pair::State::kIdle) return;
  if (options_.rank > p.peer) {
    // The lower rank dials; it will as soon as it posts its side.
    p.state = Pair::State::kAwaitingDial;
    return;
  }
  std::string address = options_.groupStore->getString("addr/" + std::to_string(p.peer));
  size_t colon = address.rfind(':');
  MESHCOMM_CHECK(colon != std::string::npos, "bad address '" << address << "'");
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  auto port = static_cast<uint16_t>(std::stoi(address.substr(colon + 1)));
  std::string why;
  Fd fd = tryConnectTcp(host, port, Deadline::after(kDialTimeout), &why);
  if (!fd) {
    std::string during = "connecting to " + describePeer(p.peer) + " of group " +
                         options_.groupName + " at " + address;
    if (options_.monitor) options_.monitor->check(during);
    throw PeerLost(during + " failed: " + why + " (the peer is gone or unreachable)");
  }
  setSendBuffer(fd.get(), options_.sendBufferBytes);
  std::string payload = helloPayload(options_.rank, p.peer);
  wire::Header h;
  h.kind = static_cast<uint8_t>(wire::Kind::kHello);
  h.tag = static_cast<uint64_t>(options_.rank);
  h.opCount = static_cast<uint64_t>(p.peer);
  h.bytes = payload.size();
  Bytes out(sizeof(h) + payload.size());
  std::memcpy(out.data(), &h, sizeof(h));
  std::memcpy(out.data() + sizeof(h), payload.data(), payload.size());
  IoResult r = sendAll(fd.get(), out.data(), out.size(), Deadline::after(kDialTimeout));
  if (!r.ok()) {
    std::string during = "sending the hello to " + describePeer(p.peer) + " of group " +
                         options_.groupName;
    // A peer that broke the group closes its listener: its reason, when it
    // published one, is the better explanation.
    if (options_.monitor) options_.monitor->check(during);
    throw PeerLost(during + " failed: " + r.describe());
  }
  p.fd = std::move(fd);
  p.state = Pair::State::kConnected;
}

void TcpTransport::acceptPending() {
  for (;;) {
    int raw = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (raw < 0) {
      if (errno == EINTR) continue;
      return;
    }
    setNoDelay(raw);
    setSendBuffer(raw, options_.sendBufferBytes);
    PendingAccept a;
    a.fd = Fd(raw);
    accepting_.push_back(std::move(a));
  }
}

void TcpTransport::readHellos(const std::string& during) {
  for (size_t i = 0; i < accepting_.size();) {
    PendingAccept& a = accepting_[i];
    bool drop = false;
    bool done = false;
    for (;;) {
      uint8_t* dst;
      size_t want;
      if (a.headerFill < sizeof(wire::Header)) {
        dst = reinterpret_cast<uint8_t*>(&a.header) + a.headerFill;
        want = sizeof(wire::Header) - a.headerFill;
      } else {
        if (a.header.magic != wire::kMagic ||
            a.header.kind != static_cast<uint8_t>(wire::Kind::kHello) ||
            a.header.bytes > wire::kMaxHelloBytes) {
          drop = true;
          break;
        }
        a.payload.resize(a.header.bytes);
        if (a.payloadFill == a.payload.size()) {
          done = true;
          break;
        }
        dst = reinterpret_cast<uint8_t*>(a.payload.data()) + a.payloadFill;
        want = a.payload.size() - a.payloadFill;
      }
      ssize_t got = ::recv(a.fd.get(), dst, want, MSG_DONTWAIT);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && wouldBlock(errno)) break;
      if (got <= 0) {
        drop = true;
        break;
      }
      if (a.headerFill < sizeof(wire::Header)) {
        a.headerFill += static_cast<size_t>(got);
      } else {
        a.payloadFill += static_cast<size_t>(got);
      }
    }
    if (done) {
      auto from = static_cast<int64_t>(a.header.tag);
      bool valid = from >= 0 && from < options_.rank &&
                   a.header.opCount == static_cast<uint64_t>(options_.rank) &&
                   a.payload == helloPayload(static_cast<int>(from), options_.rank);
      Pair* p = valid ? &pair(static_cast<int>(from)) : nullptr;
      if (p && p->state != Pair::State::kConnected && p->state != Pair::State::kClosed) {
        p->fd = std::move(a.fd);
        p->state = Pair::State::kConnected;
      } else {
        MESHCOMM_LOG(kWarn, during << ": refused a connection to group " << options_.groupName
                                   << " with an invalid or duplicate hello");
      }
      accepting_.erase(accepting_.begin() + static_cast<ptrdiff_t>(i));
      continue;
    }
    if (drop) {
      accepting_.erase(accepting_.begin() + static_cast<ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
}

}  // namespace meshcomm

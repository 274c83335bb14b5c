#include "transport/tcp/tcp_transport.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "common/check.h"
#include "common/interrupt.h"
#include "common/socket.h"
#include "meshcomm/error.h"
#include "transport/failure.h"
#include "transport/inbox.h"
#include "transport/tcp/tcp_pair.h"

namespace meshcomm {
namespace {

constexpr auto kMonitorInterval = std::chrono::milliseconds(200);
constexpr int kMaxBlockingPollMs = 100;
// A header is read with up to 4 KiB after it, so a message of up to 4 KiB
// (and often the next header) takes one recv rather than two; a larger
// payload's remainder is read straight into its destination. Past a few
// KiB, copying what was read ahead costs about what a recv saves.
constexpr size_t kReadAheadBytes = sizeof(wire::Header) + 4 * 1024;
// One write carries up to half this many queued messages (a header and a
// payload each).
constexpr int kMaxSendIovecs = 64;

}  // namespace

TcpTransport::TcpTransport(TcpTransportOptions options)
    : options_(std::move(options)),
      wakeFd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      matcher_(options_.matcher ? options_.matcher
                                : std::make_shared<ReceiveMatcher>(kDefaultMaxUnexpectedBytes)) {
  MESHCOMM_CHECK(options_.rank >= 0 && options_.rank < size());
  MESHCOMM_CHECK(wakeFd_.valid(), "eventfd failed");
  pairs_.resize(options_.worldRanks.size());
  uint16_t port = 0;
  listener_ = listenTcp("", 0, 1024, &port);
  std::string host = options_.advertiseHost;
  std::string address = host.find(':') != std::string::npos ? "[" + host + "]:" : host + ":";
  address += std::to_string(port);
  options_.groupStore->set("addr/" + std::to_string(options_.rank), address);
}

TcpTransport::~TcpTransport() = default;

std::string TcpTransport::describePeer(int peer) const {
  return "rank " + std::to_string(peer) + " (world rank " +
         std::to_string(options_.worldRanks[static_cast<size_t>(peer)]) + ")";
}

TcpTransport::Pair& TcpTransport::pair(int peer) {
  auto& slot = pairs_[static_cast<size_t>(peer)];
  if (!slot) {
    slot = std::make_unique<Pair>(peer, describePeer(peer), options_.describeSignature, *matcher_);
  }
  return *slot;
}

int TcpTransport::connectionCount() const {
  int n = 0;
  for (const auto& p : pairs_) n += (p && p->fd.valid()) ? 1 : 0;
  return n;
}

bool TcpTransport::hasPending() const {
  for (const auto& p : pairs_) {
    if (p && p->active() && p->state != Pair::State::kClosed) return true;
  }
  return false;
}

TcpTransport::Pair& TcpTransport::pairToPost(int peer) {
  if (broken_) throwBroken();
  MESHCOMM_CHECK(peer >= 0 && peer < size() && peer != options_.rank, "peer " << peer);
  return pair(peer);
}

RequestPtr TcpTransport::postSend(int peer, uint64_t tag, const MessageSignature& sig,
                                  const void* data, size_t bytes) {
  Pair& p = pairToPost(peer);
  RequestPtr r = makeRequest(true, peer, tag, sig, data, bytes);
  try {
    ensureConnection(p);
    if (p.state == Pair::State::kClosed) {
      peerLost(p, "it closed the connection", p.sendingTo);
    }
    Pair::Outgoing out{r, wire::Header(), 0};
    out.header.kind = static_cast<uint8_t>(wire::Kind::kData);
    out.header.opcode = sig.opcode;
    out.header.dtype = sig.dtype;
    out.header.reduceOp = sig.reduceOp;
    out.header.opCount = sig.opCount;
    out.header.detail = sig.detail;
    out.header.tag = tag;
    out.header.bytes = bytes;
    p.sends.push_back(out);
    // Start writing now: a small message usually leaves in this call,
    // before the peer even waits for it. Held sends wait for
    // releaseSends(), which writes each peer's queue at once.
    if (!holdingSends_ && p.sends.size() == 1 && p.state == Pair::State::kConnected) {
      progressSend(p, p.sendingTo);
    }
  } catch (...) {
    failWith(std::current_exception());
    throw;
  }
  return r;
}

void TcpTransport::holdSends() { holdingSends_ = true; }

void TcpTransport::releaseSends() {
  holdingSends_ = false;
  if (broken_) throwBroken();
  try {
    for (auto& slot : pairs_) {
      if (slot && slot->state == Pair::State::kConnected && !slot->sends.empty()) {
        progressSend(*slot, slot->sendingTo);
      }
    }
  } catch (...) {
    failWith(std::current_exception());
    throw;
  }
}

RequestPtr TcpTransport::postRecv(int peer, uint64_t tag, const MessageSignature& sig,
                                  void* data, size_t bytes) {
  Pair& p = pairToPost(peer);
  RequestPtr r = makeRequest(false, peer, tag, sig, data, bytes);
  try {
    ensureConnection(p);
    p.inbox.post(r, p.receivingFrom);
    // A peer that closed its connection can still have left messages here
    // (matched above), but it will send nothing more.
    if (p.state == Pair::State::kClosed && !r->done()) {
      peerLost(p, "it closed the connection", p.receivingFrom);
    }
  } catch (...) {
    failWith(std::current_exception());
    throw;
  }
  return r;
}

RequestPtr TcpTransport::postRecvAny(uint64_t tag, const MessageSignature& sig, void* data,
                                     size_t bytes) {
  if (broken_) throwBroken();
  RequestPtr r = makeRequest(false, kAnyPeer, tag, sig, data, bytes);
  try {
    for (int peer = 0; peer < size(); ++peer) {
      if (peer != options_.rank) expectFrom(peer);
    }
    matcher_->postAny(r, "receiving from any rank");
  } catch (...) {
    failWith(std::current_exception());
    throw;
  }
  return r;
}

void TcpTransport::expectFrom(int peer) {
  if (broken_) throwBroken();
  // Any peer may send, so each needs a connection: this rank dials the
  // higher ranks and waits for the lower ones to dial it. A peer that left
  // the group will send nothing and is not dialled.
  Pair& p = pair(peer);
  if (p.state != Pair::State::kIdle) return;
  const int worldRank = options_.worldRanks[static_cast<size_t>(peer)];
  if (options_.monitor && options_.monitor->departed(worldRank)) return;
  try {
    ensureConnection(p);
  } catch (...) {
    failWith(std::current_exception());
    throw;
  }
}

void TcpTransport::progressSend(Pair& p, const std::string& during) {
  while (!p.sends.empty()) {
    // Every queued message that fits, headers and payloads, in one write:
    // the peer then wakes once for all of them.
    iovec iov[kMaxSendIovecs];
    int n = 0;
    size_t wanted = 0;
    for (auto it = p.sends.begin(); it != p.sends.end() && n + 2 <= kMaxSendIovecs; ++it) {
      Request& r = *it->request;
      if (it->headerSent < sizeof(wire::Header)) {
        iov[n].iov_base = reinterpret_cast<uint8_t*>(&it->header) + it->headerSent;
        iov[n].iov_len = sizeof(wire::Header) - it->headerSent;
        wanted += iov[n++].iov_len;
      }
      if (r.transferred < r.bytes) {
        iov[n].iov_base = r.data + r.transferred;
        iov[n].iov_len = r.bytes - r.transferred;
        wanted += iov[n++].iov_len;
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t sent = ::sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (wouldBlock(errno)) return;
      peerLost(p, std::strerror(errno), during);
    }
    auto left = static_cast<size_t>(sent);
    bytesMoved_ += left;
    while (!p.sends.empty()) {
      Pair::Outgoing& o = p.sends.front();
      Request& r = *o.request;
      size_t headerPart = std::min(left, sizeof(wire::Header) - o.headerSent);
      o.headerSent += headerPart;
      left -= headerPart;
      size_t payloadPart = std::min(left, r.bytes - r.transferred);
      r.transferred += payloadPart;
      left -= payloadPart;
      if (o.headerSent < sizeof(wire::Header) || r.transferred < r.bytes) break;
      r.state = Request::State::kDone;
      p.sends.pop_front();
    }
    // A short write means the socket's buffer is full: poll(2) says when
    // it drains.
    if (static_cast<size_t>(sent) < wanted) return;
  }
}

void TcpTransport::onHeader(Pair& p, const std::string& during) {
  const wire::Header& h = p.inHeader;
  if (h.magic != wire::kMagic) {
    throw Error(during + ": corrupt message header from " + describePeer(p.peer) +
                " (bad magic)");
  }
  auto kind = static_cast<wire::Kind>(h.kind);
  if (kind == wire::Kind::kAbort) {
    if (h.bytes > wire::kMaxAbortBytes) {
      throw Error(during + ": oversized abort message from " + describePeer(p.peer));
    }
    p.abortData.assign(h.bytes, 0);  // read it, then raise (see progressRecv)
    p.abortFill = 0;
    p.inAbort = true;
    return;
  }
  if (kind != wire::Kind::kData) {
    throw Error(during + ": unexpected message kind " + std::to_string(h.kind) + " from " +
                describePeer(p.peer));
  }
  MessageSignature sig{h.opcode, h.dtype, h.reduceOp, h.opCount, h.detail};
  p.inbox.arrive(Envelope{h.tag, sig, h.bytes}, during);
}

void TcpTransport::progressRecv(Pair& p, const std::string& during) {
  while (p.wantsRead()) {
    std::span<uint8_t> space;
    if (!p.inPayload()) {
      space = {reinterpret_cast<uint8_t*>(&p.inHeader) + p.inHeaderFill,
               sizeof(wire::Header) - p.inHeaderFill};
    } else if (p.inAbort) {
      space = {p.abortData.data() + p.abortFill, p.abortData.size() - p.abortFill};
    } else {
      space = p.inbox.space();
    }
    if (!space.empty()) {
      ssize_t got;
      if (p.aheadBegin < p.aheadEnd) {
        got = static_cast<ssize_t>(std::min(space.size(), p.aheadEnd - p.aheadBegin));
        std::memcpy(space.data(), p.ahead.get() + p.aheadBegin, static_cast<size_t>(got));
        p.aheadBegin += static_cast<size_t>(got);
      } else if (!p.inPayload()) {
        if (!p.ahead) p.ahead = std::make_unique<uint8_t[]>(kReadAheadBytes);
        got = ::recv(p.fd.get(), p.ahead.get(), kReadAheadBytes, MSG_DONTWAIT);
        if (got > 0) {
          bytesMoved_ += static_cast<size_t>(got);
          p.aheadBegin = 0;
          p.aheadEnd = static_cast<size_t>(got);
          continue;  // taken from `ahead` on the next pass
        }
      } else {
        got = ::recv(p.fd.get(), space.data(), space.size(), MSG_DONTWAIT);
        if (got > 0) bytesMoved_ += static_cast<size_t>(got);
      }
      if (got == 0 || (got < 0 && errno == ECONNRESET)) {
        // The peer closed its end. Between messages, with nothing expected
        // from or queued for it, that is a peer that finished its part and
        // exited cleanly (it may leave right after sending its last message
        // of the last collective); only a later post to it is an error. A
        // reset says the same when the peer left before it accepted the
        // connection (this rank dialled it for a receive from any peer).
        if (!p.midMessage() && !p.inbox.hasPosted() && p.sends.empty()) {
          p.fd.reset();
          p.state = Pair::State::kClosed;
          p.hangup = false;
          return;
        }
        peerLost(p, got == 0 ? "connection closed" : std::strerror(errno), during);
      }
      if (got < 0) {
        if (errno == EINTR) continue;
        if (wouldBlock(errno)) return;
        peerLost(p, std::strerror(errno), during);
      }
      auto n = static_cast<size_t>(got);
      if (!p.inPayload()) {
        p.inHeaderFill += n;
        if (p.inHeaderFill < sizeof(wire::Header)) continue;
        onHeader(p, during);
        continue;  // a zero-byte payload completes on the next pass
      }
      if (p.inAbort) {
        p.abortFill += n;
      } else {
        p.inbox.arrived(n);
      }
      if (n < space.size()) continue;
    }
    // The payload is complete.
    if (p.inAbort) {
      std::string text;
      auto reason = wire::AbortReason::kAborted;
      if (!p.abortData.empty()) {
        reason = static_cast<wire::AbortReason>(p.abortData[0]);
        text.assign(p.abortData.begin() + 1, p.abortData.end());
      }
      throwAbortReason(reason, during + ": " + describePeer(p.peer) + " aborted the group: " + text);
    }
    p.inbox.finish();
    p.inHeaderFill = 0;
  }
}

bool TcpTransport::pollOnce(int timeoutMs, int interruptFd, const std::string& during) {
  // Reused across calls: this runs in every spin iteration.
  std::vector<pollfd>& fds = pollFds_;
  std::vector<Pair*>& owners = pollOwners_;
  fds.clear();
  owners.clear();
  bool awaitingDial = false;
  for (auto& slot : pairs_) {
    if (!slot) continue;
    Pair& p = *slot;
    if (p.state == Pair::State::kAwaitingDial && p.active()) awaitingDial = true;
    if (p.state != Pair::State::kConnected || !p.active()) continue;
    short events = POLLRDHUP;
    if (p.wantsRead()) events |= POLLIN;
    if (!p.sends.empty()) events |= POLLOUT;
    fds.push_back({p.fd.get(), events, 0});
    owners.push_back(&p);
  }
  size_t fixed = fds.size();
  if (awaitingDial || !accepting_.empty()) fds.push_back({listener_.get(), POLLIN, 0});
  for (auto& a : accepting_) fds.push_back({a.fd.get(), POLLIN, 0});
  fds.push_back({wakeFd_.get(), POLLIN, 0});
  if (interruptFd >= 0) fds.push_back({interruptFd, POLLIN, 0});
  int rc = ::poll(fds.data(), fds.size(), timeoutMs);
  pollSawSignal_ = rc < 0 && errno == EINTR;
  if (rc < 0) {
    if (pollSawSignal_) return true;
    throw Error(during + ": poll failed: " + std::strerror(errno));
  }
  pollSawEvents_ = rc > 0;
  if (rc == 0) return true;
  bool interrupted = interruptFd >= 0 && (fds.back().revents & POLLIN);
  const size_t wakeAt = fds.size() - (interruptFd >= 0 ? 2 : 1);
  if (fds[wakeAt].revents & POLLIN) {
    uint64_t drained;
    [[maybe_unused]] ssize_t n = ::read(wakeFd_.get(), &drained, sizeof(drained));
    interrupted = true;
  }
  bool acceptReady = false;
  for (size_t i = fixed; i < fds.size(); ++i) {
    if (listener_.valid() && fds[i].fd == listener_.get() && fds[i].revents) acceptReady = true;
  }
  for (size_t i = 0; i < fixed; ++i) {
    short re = fds[i].revents;
    if (re == 0) continue;
    Pair& p = *owners[i];
    if (re & (POLLRDHUP | POLLHUP | POLLERR)) p.hangup = true;
    if (re & POLLOUT) progressSend(p, during);
    if (re & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) progressRecv(p, during);
    if (re & (POLLHUP | POLLERR) && !p.sends.empty()) progressSend(p, during);
  }
  if (acceptReady) acceptPending();
  if (!accepting_.empty()) {
    readHellos(during);
    // A connection that just arrived may have data already queued for it.
    for (auto& slot : pairs_) {
      if (!slot || slot->state != Pair::State::kConnected) continue;
      if (!slot->sends.empty()) progressSend(*slot, during);
      if (slot->wantsRead()) progressRecv(*slot, during);
    }
  } else if (acceptReady) {
    readHellos(during);
  }
  return !interrupted;
}

bool TcpTransport::tryConnections(const std::string& during) {
  if (!accepting_.empty()) return false;
  for (auto& slot : pairs_) {
    if (slot && slot->state == Pair::State::kAwaitingDial && slot->active()) return false;
  }
  for (auto& slot : pairs_) {
    if (!slot || slot->state != Pair::State::kConnected) continue;
    if (!slot->sends.empty()) progressSend(*slot, during);
    if (slot->wantsRead()) progressRecv(*slot, during);
  }
  pollSawSignal_ = false;
  return true;
}

void TcpTransport::wait(std::span<const RequestPtr> requests, const OpContext& ctx) {
  if (broken_) throwBroken();
  // Into a buffer the transport keeps, so that a wait allocates nothing.
  ctx.describeInto(waitDuring_);
  const std::string& during = waitDuring_;
  try {
    auto start = Deadline::Clock::now();
    auto spinUntil = start + options_.spin;
    auto yieldUntil = spinUntil + options_.yield;
    auto nextMonitor = start + kMonitorInterval;
    // Pairs that became connected after their requests were posted need an
    // initial push; so do sends queued behind a finished one.
    for (auto& slot : pairs_) {
      if (!slot || slot->state != Pair::State::kConnected) continue;
      if (!slot->sends.empty()) progressSend(*slot, during);
      if (slot->wantsRead()) progressRecv(*slot, during);
    }
    // The spin (and the yield after it) last that long from the last byte
    // moved, not from the start: a message larger than the socket buffers
    // crosses in many turns, and a rank that slept in poll(2) between them
    // had to be woken for each. 2 ranks, 1 MiB broadcast over loopback:
    // 212-363 us with the spin counted from the start, 215-226 us with it
    // counted from the last byte (docs/tuning.md).
    uint64_t movedBefore = bytesMoved_;
    // One clock read per turn of the loop, at its end. A turn of the spin
    // is a recv() or poll() of about a microsecond; with three reads a turn
    // the clock took 9% of the CPU a small call's waits spend (3.7% with
    // one), CPU that ranks sharing cores take from each other.
    auto now = start;
    while (!allDone(requests)) {
      int timeoutMs = 0;
      if (now >= yieldUntil) {
        timeoutMs = std::min(kMaxBlockingPollMs, ctx.deadline.pollTimeoutMs() < 0
                                                     ? kMaxBlockingPollMs
                                                     : ctx.deadline.pollTimeoutMs());
      }
      if (timeoutMs > 0 || !tryConnections(during)) pollOnce(timeoutMs, -1, during);
      if (allDone(requests)) break;
      if (timeoutMs == 0 && now >= spinUntil && now < yieldUntil) sched_yield();
      if (interruptRequested(pollSawSignal_)) {
        throwInterrupted(during, describePeer(options_.rank));
      }
      now = Deadline::Clock::now();
      if (bytesMoved_ != movedBefore) {
        movedBefore = bytesMoved_;
        spinUntil = now + options_.spin;
        yieldUntil = spinUntil + options_.yield;
      }
      if (ctx.deadline.expiredAt(now)) {
        // A peer that died is the better explanation, when there is one.
        if (options_.monitor) options_.monitor->check(during);
        throwWaitTimeout(during, requests, [this](int peer) { return describePeer(peer); });
      }
      if (options_.monitor && now >= nextMonitor) {
        options_.monitor->check(during);
        // A peer that left the job before dialling this rank never will.
        for (auto& slot : pairs_) {
          if (!slot || slot->state != Pair::State::kAwaitingDial || !slot->active()) continue;
          if (options_.monitor->departed(options_.worldRanks[static_cast<size_t>(slot->peer)])) {
            peerLost(*slot, "it never connected", during);
          }
        }
        nextMonitor = now + kMonitorInterval;
      }
    }
  } catch (...) {
    failWith(std::current_exception());
    throw;
  }
}

bool TcpTransport::poll(const std::string& during) {
  if (broken_) throwBroken();
  try {
    pollOnce(0, -1, during);
  } catch (...) {
    failWith(std::current_exception());
    throw;
  }
  return pollSawEvents_;
}

void TcpTransport::progress(std::chrono::milliseconds budget, int interruptFd) {
  if (broken_) return;
  try {
    auto until = Deadline::after(budget);
    const std::string& during = backgroundDuring_;
    for (auto& slot : pairs_) {
      if (!slot || slot->state != Pair::State::kConnected) continue;
      if (!slot->sends.empty()) progressSend(*slot, during);
      if (slot->wantsRead()) progressRecv(*slot, during);
    }
    while (hasPending() && !until.expired()) {
      if (!pollOnce(std::min(until.pollTimeoutMs(), kMaxBlockingPollMs), interruptFd, during)) {
        return;
      }
      if (options_.monitor) options_.monitor->check(during);
    }
  } catch (...) {
    failWith(std::current_exception());
  }
}

void TcpTransport::peerLost(Pair& p, const std::string& why, const std::string& during) {
  // A peer that aborted on purpose published why; prefer that to "lost".
  if (options_.monitor) options_.monitor->check(during);
  const int worldRank = options_.worldRanks[static_cast<size_t>(p.peer)];
  std::string how = options_.monitor ? options_.monitor->howGone(worldRank) : "exited or was killed";
  throw PeerLost(during + ": lost the connection to " + describePeer(p.peer) + " of group " +
                 options_.groupName + " (" + why + "); the peer process " + how);
}

void TcpTransport::failWith(std::exception_ptr error) {
  if (broken_) return;
  broken_ = error;
  auto reason = abortReasonOf(error);
  std::string message = errorMessageOf(error);
  if (options_.monitor) {
    options_.monitor->reportAbort(options_.worldRanks[static_cast<size_t>(options_.rank)],
                                  reason, message);
  }
  std::string payload(1, static_cast<char>(reason));
  payload += message.substr(0, wire::kMaxAbortBytes - 1);
  for (auto& slot : pairs_) {
    if (!slot) continue;
    Pair& p = *slot;
    if (p.fd.valid() && p.betweenSends()) {
      // Best effort, never blocking: a peer blocked on us learns why at once.
      wire::Header h;
      h.kind = static_cast<uint8_t>(wire::Kind::kAbort);
      h.bytes = payload.size();
      Bytes out(sizeof(h) + payload.size());
      std::memcpy(out.data(), &h, sizeof(h));
      std::memcpy(out.data() + sizeof(h), payload.data(), payload.size());
      [[maybe_unused]] ssize_t n = ::send(p.fd.get(), out.data(), out.size(),
                                          MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    for (auto& o : p.sends) o.request->state = Request::State::kFailed;
    p.sends.clear();
    p.inbox.failAll();
    p.fd.reset();
    p.state = Pair::State::kClosed;
  }
  accepting_.clear();
  listener_.reset();
}

void TcpTransport::abort(std::exception_ptr error) { failWith(std::move(error)); }

void TcpTransport::wakeProgress() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wakeFd_.get(), &one, sizeof(one));
}

void TcpTransport::throwBroken() { std::rethrow_exception(broken_); }

}  // namespace meshcomm

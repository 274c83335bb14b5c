#include "transport/shm/shm_transport.h"

#include <poll.h>

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "meshcomm/error.h"
#include "transport/failure.h"

namespace meshcomm {
namespace {

constexpr size_t kLine = 64;
// A sender publishes its progress at least this often within a message,
// so the receiver's copy-out overlaps the copy-in.
constexpr size_t kPiece = 64 * 1024;
constexpr uint32_t kHeaderMagic = 0x6d73'6870;  // "phsm"
constexpr auto kProgressSpin = std::chrono::microseconds(50);
// How often background progress makes sure the local peers still live.
constexpr auto kPeerCheckEvery = std::chrono::milliseconds(50);

struct RingHeader {
  uint32_t magic;
  uint8_t opcode;
  uint8_t dtype;
  uint8_t reduceOp;
  uint8_t pad;
  uint64_t tag;
  uint64_t bytes;
  uint64_t opCount;
  uint64_t detail;
  uint8_t unused[kLine - 40];
};
static_assert(sizeof(RingHeader) == kLine);

size_t padding(uint64_t position) { return static_cast<size_t>((kLine - position % kLine) % kLine); }

// Empty transfers return first: their buffers may be null, which memcpy
// must never see.
void copyIn(const ShmDomain::Ring& ring, uint64_t position, const uint8_t* from, size_t n) {
  if (n == 0) return;
  size_t at = static_cast<size_t>(position % ring.bytes);
  size_t first = std::min(n, ring.bytes - at);
  std::memcpy(ring.data + at, from, first);
  if (n > first) std::memcpy(ring.data, from + first, n - first);
}

void copyOut(const ShmDomain::Ring& ring, uint64_t position, uint8_t* to, size_t n) {
  if (n == 0) return;
  size_t at = static_cast<size_t>(position % ring.bytes);
  size_t first = std::min(n, ring.bytes - at);
  std::memcpy(to, ring.data + at, first);
  if (n > first) std::memcpy(to + first, ring.data, n - first);
}

}  // namespace

struct ShmTransport::Peer {
  Peer(int groupRank, int localRank, const std::string& name, const Inbox::Describe& describe,
       ReceiveMatcher& matcher)
      : rank(groupRank),
        local(localRank),
        receivingFrom("receiving from " + name),
        inbox(groupRank, name, describe, matcher) {}

  int rank;
  int local;
  // What a failed receive says the rank was doing: made once, not per post.
  const std::string receivingFrom;
  // Outgoing, in post order; the front one may be partly in the ring.
  std::deque<RequestPtr> sends;
  bool headerWritten = false;
  uint64_t written = 0;   // this rank's copy of the outgoing ring's counter
  uint64_t consumed = 0;  // this rank's copy of the incoming ring's counter
  Inbox inbox;

  // A send to it or a receive naming it is unfinished: its departure or
  // death fails this rank.
  bool awaited() const { return !sends.empty() || inbox.hasPosted() || inbox.midMessage(); }
  // Its ring needs draining: also for a receive from any peer, which does
  // not wait for this one in particular.
  bool busy() const { return awaited() || inbox.anyPending(); }
};

ShmTransport::ShmTransport(ShmDomain& domain, int groupRank, std::vector<int> localOf,
                           std::shared_ptr<ReceiveMatcher> matcher, Inbox::Describe describe)
    : domain_(domain),
      rank_(groupRank),
      localOf_(std::move(localOf)),
      describe_(std::move(describe)),
      matcher_(std::move(matcher)) {
  MESHCOMM_CHECK(localOf_[static_cast<size_t>(rank_)] == domain_.localRank());
  peers_.resize(localOf_.size());
  for (size_t g = 0; g < localOf_.size(); ++g) {
    if (localOf_[g] < 0 || static_cast<int>(g) == rank_) continue;
    peers_[g] = std::make_unique<Peer>(static_cast<int>(g), localOf_[g],
                                       describePeer(static_cast<int>(g)), describe_, *matcher_);
  }
}

ShmTransport::~ShmTransport() = default;

bool ShmTransport::reaches(int peer) const {
  return peer >= 0 && peer < size() && peers_[static_cast<size_t>(peer)] != nullptr;
}

std::string ShmTransport::describePeer(int peer) const {
  return domain_.describeRank(localOf_[static_cast<size_t>(peer)]);
}

RequestPtr ShmTransport::postSend(int peer, uint64_t tag, const MessageSignature& sig,
                                  const void* data, size_t bytes) {
  if (auto broken = brokenError()) std::rethrow_exception(broken);
  MESHCOMM_CHECK(reaches(peer), "peer " << peer << " is not on this host");
  RequestPtr r = makeRequest(true, peer, tag, sig, data, bytes);
  Peer& p = *peers_[static_cast<size_t>(peer)];
  p.sends.push_back(r);
  // A message that fits leaves now, before the peer even waits for it.
  if (p.sends.size() == 1) pushSends(p);
  return r;
}

RequestPtr ShmTransport::postRecv(int peer, uint64_t tag, const MessageSignature& sig,
                                  void* data, size_t bytes) {
  if (auto broken = brokenError()) std::rethrow_exception(broken);
  MESHCOMM_CHECK(reaches(peer), "peer " << peer << " is not on this host");
  RequestPtr r = makeRequest(false, peer, tag, sig, data, bytes);
  try {
    Peer& p = *peers_[static_cast<size_t>(peer)];
    p.inbox.post(r, p.receivingFrom);
  } catch (...) {
    failAndRethrow();
  }
  return r;
}

RequestPtr ShmTransport::postRecvAny(uint64_t tag, const MessageSignature& sig, void* data,
                                     size_t bytes) {
  if (auto broken = brokenError()) std::rethrow_exception(broken);
  RequestPtr r = makeRequest(false, kAnyPeer, tag, sig, data, bytes);
  try {
    matcher_->postAny(r, "receiving from any rank");
  } catch (...) {
    failAndRethrow();
  }
  return r;
}

bool ShmTransport::pushSends(Peer& p) {
  const ShmDomain::Ring ring = domain_.ring(domain_.localRank(), p.local);
  const uint64_t start = p.written;
  uint64_t published = p.written;
  auto publish = [&] {
    ring.written->store(p.written, std::memory_order_release);
    domain_.notify();
    published = p.written;
  };
  while (!p.sends.empty()) {
    Request& r = *p.sends.front();
    size_t free = ring.bytes - static_cast<size_t>(p.written -
                                                   ring.consumed->load(std::memory_order_acquire));
    if (!p.headerWritten) {
      if (free < kLine) break;
      RingHeader h{};
      h.magic = kHeaderMagic;
      h.opcode = r.signature.opcode;
      h.dtype = r.signature.dtype;
      h.reduceOp = r.signature.reduceOp;
      h.tag = r.tag;
      h.bytes = r.bytes;
      h.opCount = r.signature.opCount;
      h.detail = r.signature.detail;
      copyIn(ring, p.written, reinterpret_cast<const uint8_t*>(&h), sizeof(h));
      p.written += kLine;
      free -= kLine;
      p.headerWritten = true;
    }
    while (r.transferred < r.bytes && free > 0) {
      size_t n = std::min({r.bytes - r.transferred, free, kPiece});
      copyIn(ring, p.written, r.data + r.transferred, n);
      p.written += n;
      r.transferred += n;
      free -= n;
      if (p.written - published >= kPiece) publish();
    }
    if (r.transferred < r.bytes || free < padding(p.written)) break;
    p.written += padding(p.written);
    r.state = Request::State::kDone;
    p.sends.pop_front();
    p.headerWritten = false;
  }
  if (p.written != published) publish();
  return p.written != start;
}

bool ShmTransport::drainRing(Peer& p, const std::string& during) {
  const ShmDomain::Ring ring = domain_.ring(p.local, domain_.localRank());
  const uint64_t written = ring.written->load(std::memory_order_acquire);
  const uint64_t start = p.consumed;
  for (;;) {
    if (!p.inbox.midMessage()) {
      if (written - p.consumed < kLine) break;
      RingHeader h;
      copyOut(ring, p.consumed, reinterpret_cast<uint8_t*>(&h), sizeof(h));
      if (h.magic != kHeaderMagic) {
        throw Error(during + ": corrupt message header from " + describePeer(p.rank) +
                    " in shared memory (bad magic)");
      }
      p.consumed += kLine;
      Envelope e{h.tag, MessageSignature{h.opcode, h.dtype, h.reduceOp, h.opCount, h.detail},
                 h.bytes};
      p.inbox.arrive(e, during);
    }
    std::span<uint8_t> space = p.inbox.space();
    size_t n = std::min<uint64_t>(space.size(), written - p.consumed);
    copyOut(ring, p.consumed, space.data(), n);
    p.consumed += n;
    p.inbox.arrived(n);
    if (n < space.size() || written - p.consumed < padding(p.consumed)) break;
    p.consumed += padding(p.consumed);
    p.inbox.finish();
  }
  if (p.consumed == start) return false;
  ring.consumed->store(p.consumed, std::memory_order_release);
  domain_.notify();
  return true;
}

bool ShmTransport::poll(const std::string& during) {
  bool moved = false;
  try {
    domain_.throwIfAborted();
    for (auto& slot : peers_) {
      if (!slot) continue;
      if (!slot->sends.empty()) moved |= pushSends(*slot);
      moved |= drainRing(*slot, during);
    }
  } catch (...) {
    failAndRethrow();
  }
  return moved;
}

void ShmTransport::wait(std::span<const RequestPtr> requests, const OpContext& ctx) {
  if (auto broken = brokenError()) std::rethrow_exception(broken);
  // Into a buffer the transport keeps, so that a wait allocates nothing.
  ctx.describeInto(waitDuring_);
  const std::string& during = waitDuring_;
  auto awaited = [&] {
    return awaitedPeers(requests, [this](int peer) { return describePeer(peer); }) +
           " on this host (shared memory); a rank that never posted the matching send or "
           "receive is the usual cause";
  };
  try {
    domain_.waitUntil(
        [&] {
          poll(during);
          return allDone(requests);
        },
        ctx, awaited, [this](int local) { return pendingWith(local); });
  } catch (...) {
    failAndRethrow();
  }
  for (const auto& r : requests) {
    if (r->state == Request::State::kFailed) {
      if (auto broken = brokenError()) std::rethrow_exception(broken);
    }
  }
}

void ShmTransport::progress(std::chrono::milliseconds budget, int interruptFd) {
  if (brokenError()) return;
  const auto start = Deadline::Clock::now();
  const auto until = start + budget;
  const std::string during = "background progress of point-to-point operations";
  try {
    while (hasPending()) {
      if (poll(during)) return;
      auto now = Deadline::Clock::now();
      if (now >= nextPeerCheck_) {
        nextPeerCheck_ = now + kPeerCheckEvery;
        domain_.checkPeers(during, [this](int local) { return pendingWith(local); });
      }
      if (now >= until) return;
      if (now - start < kProgressSpin) continue;
      // Idle: sleep until a peer moves a ring (its notify() wakes this
      // thread), the executor calls (wakeProgress()) or the budget ends.
      // The rings are polled once more after registering as a sleeper, or
      // a peer that moved one just before would have found nobody to wake.
      // Each sleep costs a membarrier (an interrupt on every core running a
      // rank), so it is not cut short for the peer checks: those run
      // between sleeps, which last a budget (50 ms) at most.
      bool moved = false;
      auto called = [interruptFd] {
        pollfd fd{interruptFd, POLLIN, 0};
        return interruptFd >= 0 && ::poll(&fd, 1, 0) > 0;
      };
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now);
      domain_.sleepOnce([&] { return (moved = poll(during)) || called(); },
                        std::max(left, std::chrono::milliseconds(1)));
      if (moved || called()) return;
    }
  } catch (const std::exception&) {
    // Broken: the error stays for the next call (brokenError).
    if (!broken_) broken_ = std::current_exception();
    failPending();
  }
}

bool ShmTransport::pendingWith(int local) const {
  for (const auto& p : peers_) {
    if (p && p->local == local && p->awaited()) return true;
  }
  return false;
}

bool ShmTransport::hasPending() const {
  for (const auto& p : peers_) {
    if (p && p->busy()) return true;
  }
  return false;
}

void ShmTransport::failPending() {
  for (auto& p : peers_) {
    if (!p) continue;
    for (const auto& r : p->sends) r->state = Request::State::kFailed;
    p->sends.clear();
    p->inbox.failAll();
  }
}

void ShmTransport::abort(std::exception_ptr error) {
  if (!broken_) broken_ = error;
  domain_.abort(abortReasonOf(error), errorMessageOf(error));
  failPending();
}

void ShmTransport::failAndRethrow() {
  std::exception_ptr error = std::current_exception();
  if (!broken_) broken_ = error;
  failPending();
  domain_.fail(error);
}

}  // namespace meshcomm

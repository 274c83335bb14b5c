#include "transport/inbox.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>

#include "common/check.h"
#include "meshcomm/error.h"
#include "transport/tags.h"

namespace meshcomm {

void Inbox::checkMatch(const Request& r, const Envelope& e, const std::string& during) const {
  if (e.signature == r.signature && e.bytes == r.bytes) return;
  auto describe = [&](const MessageSignature& sig, uint64_t bytes) {
    if (describe_) return describe_(sig, bytes);
    std::ostringstream d;
    d << "opcode " << int(sig.opcode) << ", dtype " << int(sig.dtype) << ", op "
      << int(sig.reduceOp) << ", " << sig.opCount << " elements, detail " << sig.detail << ", "
      << bytes << " bytes";
    return d.str();
  };
  std::ostringstream os;
  os << during << ": " << peerName_ << " is not running the same operation as this rank: it sent ["
     << describe(e.signature, e.bytes) << "] where this rank expects ["
     << describe(r.signature, r.bytes)
     << "]. Every rank must issue the same collectives in the same order, with matching sizes, "
        "dtypes, ops and roots.";
  throw Mismatch(os.str());
}

Inbox::Inbox(int peer, std::string peerName, const Describe& describe, ReceiveMatcher& matcher)
    : peer_(peer), peerName_(std::move(peerName)), describe_(describe), matcher_(matcher) {
  matcher_.attach(this);
}

Inbox::~Inbox() {
  for (const auto& b : buffered_) matcher_.giveBack(b->data.size());
  matcher_.detach(this);
}

void Inbox::handOver(std::deque<std::shared_ptr<Buffered>>::iterator it, const RequestPtr& r,
                     const std::string& during) {
  Buffered& b = **it;
  checkMatch(*r, b.envelope, during);
  if (b.fill > 0) std::memcpy(r->data, b.data.data(), b.fill);
  r->transferred = b.fill;
  matcher_.giveBack(b.data.size());
  if (*it == spill_) {
    // Still arriving: the rest goes straight into the receive's buffer.
    spill_.reset();
    target_ = r;
  } else {
    r->state = Request::State::kDone;
  }
  buffered_.erase(it);
}

void Inbox::post(const RequestPtr& r, const std::string& during) {
  r->postStamp = matcher_.stampPost();
  for (auto it = buffered_.begin(); it != buffered_.end(); ++it) {
    if ((*it)->envelope.tag != r->tag) continue;
    handOver(it, r, during);
    return;
  }
  // Every message of one collective call carries the call's signature, so
  // a buffered message of the same call that disagrees means the peer runs
  // another operation, even when no tag of the two schedules would match.
  for (const auto& b : buffered_) {
    if (tags::sameCollectiveCall(b->envelope.tag, r->tag) && !(b->envelope.signature == r->signature)) {
      checkMatch(*r, b->envelope, during);
    }
  }
  posted_.push_back(r);
}

uint64_t Inbox::firstArrival(uint64_t tag) const {
  for (const auto& b : buffered_) {
    if (b->envelope.tag == tag) return b->arrival;
  }
  return std::numeric_limits<uint64_t>::max();
}

void Inbox::claimBuffered(const RequestPtr& r, const std::string& during) {
  for (auto it = buffered_.begin(); it != buffered_.end(); ++it) {
    if ((*it)->envelope.tag != r->tag) continue;
    handOver(it, r, during);
    return;
  }
  MESHCOMM_CHECK(false, "no buffered message with tag " << r->tag);
}

void Inbox::arriveInto(const RequestPtr& r, const Envelope& e, const std::string& during) {
  checkMatch(*r, e, during);
  target_ = r;
  arriving_ = true;
}

void Inbox::arrive(const Envelope& e, const std::string& during) {
  MESHCOMM_CHECK(!arriving_, "a message arrived inside another");
  auto it = std::find_if(posted_.begin(), posted_.end(),
                         [&](const RequestPtr& r) { return r->tag == e.tag; });
  // A receive from any peer posted before this peer's own one takes the
  // message (there are none unless recvAnySource is in use).
  if (matcher_.anyPending()) {
    const uint64_t before =
        it != posted_.end() ? (*it)->postStamp : std::numeric_limits<uint64_t>::max();
    if (RequestPtr any = matcher_.takeAny(e.tag, before)) {
      any->peer = peer_;
      arriveInto(any, e, during);
      return;
    }
  }
  if (it != posted_.end()) {
    RequestPtr r = std::move(*it);
    posted_.erase(it);
    arriveInto(r, e, during);
    return;
  }
  for (const auto& r : posted_) {
    if (tags::sameCollectiveCall(r->tag, e.tag) && !(e.signature == r->signature)) {
      checkMatch(*r, e, during);
    }
  }
  if (!matcher_.fits(e.bytes)) {
    throw Error(during + ": " + peerName_ + " sent " + std::to_string(e.bytes) +
                " bytes nobody is receiving yet, beyond the buffering limit of " +
                std::to_string(matcher_.limit()) +
                " bytes (MESHCOMM_MAX_UNEXPECTED_BYTES); post matching receives");
  }
  auto b = std::make_shared<Buffered>();
  b->envelope = e;
  b->arrival = matcher_.stampArrival();
  b->data.resize(e.bytes);
  matcher_.take(e.bytes);
  buffered_.push_back(b);
  spill_ = std::move(b);
  arriving_ = true;
}

std::span<uint8_t> Inbox::space() {
  if (target_) return {target_->data + target_->transferred, target_->bytes - target_->transferred};
  if (spill_) return {spill_->data.data() + spill_->fill, spill_->data.size() - spill_->fill};
  return {};
}

void Inbox::arrived(size_t n) {
  if (target_) {
    target_->transferred += n;
  } else if (spill_) {
    spill_->fill += n;
  }
}

void Inbox::finish() {
  if (target_) target_->state = Request::State::kDone;
  target_.reset();
  spill_.reset();
  arriving_ = false;
}

void Inbox::failAll() {
  for (const auto& r : posted_) r->state = Request::State::kFailed;
  posted_.clear();
  if (target_) target_->state = Request::State::kFailed;
  target_.reset();
  // No receive can match the buffered messages any more: give their memory
  // back now, not when the transport goes. The one still arriving keeps its
  // buffer (spill_) until finish(), in case a drain is mid-way.
  for (const auto& b : buffered_) matcher_.giveBack(b->data.size());
  buffered_.clear();
  matcher_.failAny();
}

}  // namespace meshcomm

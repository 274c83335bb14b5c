// ReceiveMatcher: what the inboxes of one group's transport share — every
// link's inboxes, when a routed transport composes several links.
//
//  * The limit on bytes buffered for receives not posted yet
//    (MESHCOMM_MAX_UNEXPECTED_BYTES), which applies to the group as a whole.
//  * Receives from any peer (recvAnySource). Such a receive waits here, not
//    in one inbox, and the inbox of whichever peer's message arrives first
//    takes it.
//  * The order of posts and arrivals across inboxes. Matching follows MPI's
//    rule: a message goes to the earliest-posted receive that accepts it,
//    whether that receive names its peer or takes any; a receive from any
//    peer takes, of the messages already buffered, the one that arrived
//    first.
//
// Thread-safety: as the transport that owns the inboxes (one driving thread
// at a time; a routed transport's links are driven by the same thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace meshcomm {

class Inbox;

// MESHCOMM_MAX_UNEXPECTED_BYTES when it is not set.
inline constexpr size_t kDefaultMaxUnexpectedBytes = size_t{1} << 30;

class ReceiveMatcher {
 public:
  explicit ReceiveMatcher(size_t maxUnexpectedBytes) : limit_(maxUnexpectedBytes) {}
  ReceiveMatcher(const ReceiveMatcher&) = delete;
  ReceiveMatcher& operator=(const ReceiveMatcher&) = delete;

  // ---- the buffering budget ----
  size_t limit() const { return limit_; }
  size_t used() const { return used_; }
  bool fits(size_t bytes) const { return used_ + bytes <= limit_; }
  void take(size_t bytes) { used_ += bytes; }
  void giveBack(size_t bytes) { used_ -= bytes; }

  // ---- order ----
  // Numbers posts and arrivals across every inbox, in the order they happen.
  uint64_t stampPost() { return nextPost_++; }
  uint64_t stampArrival() { return nextArrival_++; }

  // ---- receives from any peer ----
  // Matches `r` (peer kAnyPeer, a point-to-point tag) with the buffered
  // message of its tag that arrived first in any inbox, setting r->peer, or
  // queues it for the next such message. Throws Mismatch when that message
  // disagrees with it.
  void postAny(const RequestPtr& r, const std::string& during);
  // Removes and returns the earliest-posted queued receive for `tag` that
  // was posted before `postedBefore` (a stampPost() value), or null.
  RequestPtr takeAny(uint64_t tag, uint64_t postedBefore);
  bool anyPending() const { return !anySource_.empty(); }
  // Fails every queued receive from any peer (the transport broke).
  void failAny();

  // Inboxes register themselves for the lifetime of the transport.
  void attach(Inbox* inbox) { inboxes_.push_back(inbox); }
  void detach(Inbox* inbox);

 private:
  size_t limit_;
  size_t used_ = 0;
  uint64_t nextPost_ = 0;
  uint64_t nextArrival_ = 0;
  std::deque<RequestPtr> anySource_;  // unmatched, in post order
  std::vector<Inbox*> inboxes_;
};

}  // namespace meshcomm

#include "transport/receive_matcher.h"

#include <algorithm>
#include <limits>

#include "transport/inbox.h"

namespace meshcomm {

void ReceiveMatcher::postAny(const RequestPtr& r, const std::string& during) {
  r->postStamp = stampPost();
  Inbox* from = nullptr;
  uint64_t first = std::numeric_limits<uint64_t>::max();
  for (Inbox* inbox : inboxes_) {
    const uint64_t arrival = inbox->firstArrival(r->tag);
    if (arrival < first) {
      first = arrival;
      from = inbox;
    }
  }
  if (from != nullptr) {
    r->peer = from->peer();
    from->claimBuffered(r, during);
    return;
  }
  anySource_.push_back(r);
}

RequestPtr ReceiveMatcher::takeAny(uint64_t tag, uint64_t postedBefore) {
  for (auto it = anySource_.begin(); it != anySource_.end(); ++it) {
    if ((*it)->postStamp >= postedBefore) break;  // the queue is in post order
    if ((*it)->tag != tag) continue;
    RequestPtr r = std::move(*it);
    anySource_.erase(it);
    return r;
  }
  return nullptr;
}

void ReceiveMatcher::failAny() {
  for (const auto& r : anySource_) r->state = Request::State::kFailed;
  anySource_.clear();
}

void ReceiveMatcher::detach(Inbox* inbox) {
  inboxes_.erase(std::remove(inboxes_.begin(), inboxes_.end(), inbox), inboxes_.end());
}

}  // namespace meshcomm

#include "transport/routed_transport.h"

#include "common/check.h"
#include "common/interrupt.h"
#include "meshcomm/error.h"
#include "transport/failure.h"

namespace meshcomm {

RoutedTransport::RoutedTransport(std::vector<std::unique_ptr<Transport>> links,
                                 std::vector<int> linkOf, std::shared_ptr<ReceiveMatcher> matcher)
    : links_(std::move(links)), linkOf_(std::move(linkOf)), matcher_(std::move(matcher)) {
  MESHCOMM_CHECK(links_.size() >= 2, "a routed transport composes several links");
  for (const auto& link : links_) {
    MESHCOMM_CHECK(link->rank() == links_.front()->rank() && link->size() == links_.front()->size());
  }
  MESHCOMM_CHECK(linkOf_.size() == static_cast<size_t>(size()));
}

RequestPtr RoutedTransport::postSend(int peer, uint64_t tag, const MessageSignature& sig,
                                     const void* data, size_t bytes) {
  throwIfBroken();
  return route(peer).postSend(peer, tag, sig, data, bytes);
}

RequestPtr RoutedTransport::postRecv(int peer, uint64_t tag, const MessageSignature& sig,
                                     void* data, size_t bytes) {
  throwIfBroken();
  return route(peer).postRecv(peer, tag, sig, data, bytes);
}

RequestPtr RoutedTransport::postRecvAny(uint64_t tag, const MessageSignature& sig, void* data,
                                        size_t bytes) {
  throwIfBroken();
  RequestPtr r = makeRequest(false, kAnyPeer, tag, sig, data, bytes);
  try {
    for (int peer = 0; peer < size(); ++peer) {
      if (peer != rank()) route(peer).expectFrom(peer);
    }
    matcher_->postAny(r, "receiving from any rank");
  } catch (...) {
    abort(std::current_exception());
    throw;
  }
  return r;
}

void RoutedTransport::holdSends() {
  for (auto& link : links_) link->holdSends();
}

void RoutedTransport::releaseSends() {
  // Every link stops holding, even when one of them fails.
  std::exception_ptr failed;
  for (auto& link : links_) {
    try {
      link->releaseSends();
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  if (failed) {
    abort(failed);
    std::rethrow_exception(failed);
  }
}

void RoutedTransport::throwIfBroken() const {
  if (auto broken = brokenError()) std::rethrow_exception(broken);
}

void RoutedTransport::wait(std::span<const RequestPtr> requests, const OpContext& ctx) {
  throwIfBroken();
  int only = -1;  // the one link every request goes over, if there is one
  bool several = false;
  for (const auto& r : requests) {
    if (r->peer == kAnyPeer) {  // may arrive over any link
      several = true;
      continue;
    }
    const int link = linkOf_[static_cast<size_t>(r->peer)];
    if (only < 0) only = link;
    several = several || link != only;
  }
  if (!several) {
    // One link may wait alone only while the others have nothing in
    // flight: a send queued on another link can be what the awaited peer
    // needs first (a ring that crosses hosts: rank 1 waits for rank 0 in
    // shared memory, rank 0 for rank 3 over TCP, 3 for 2, and 2 for the
    // TCP send rank 1 has not finished), and only a wait that drives every
    // link moves it.
    const auto link = static_cast<size_t>(only < 0 ? 0 : only);
    bool othersIdle = true;
    for (size_t i = 0; i < links_.size(); ++i) {
      if (i != link && links_[i]->hasPending()) othersIdle = false;
    }
    if (othersIdle) return links_[link]->wait(requests, ctx);
  }

  ctx.describeInto(waitDuring_);
  const std::string& during = waitDuring_;
  try {
    while (!allDone(requests)) {
      bool moved = false;
      for (size_t i = 1; i < links_.size(); ++i) moved = links_[i]->poll(during) || moved;
      // Block on the network only while the more local links are idle.
      links_.front()->progress(std::chrono::milliseconds(moved ? 0 : 1), -1);
      throwIfBroken();
      if (allDone(requests)) break;
      if (interruptRequested(false)) throwInterrupted(during, "rank " + std::to_string(rank()));
      if (ctx.deadline.expired()) {
        throwWaitTimeout(during, requests, [](int peer) { return "rank " + std::to_string(peer); });
      }
    }
  } catch (...) {
    abort(std::current_exception());
    throw;
  }
}

bool RoutedTransport::poll(const std::string& during) {
  bool moved = false;
  for (const auto& link : links_) moved = link->poll(during) || moved;
  return moved;
}

void RoutedTransport::progress(std::chrono::milliseconds budget, int interruptFd) {
  Transport* busy = nullptr;  // the one link with pending requests, if only one has
  int busyLinks = 0;
  for (const auto& link : links_) {
    if (!link->hasPending()) continue;
    busy = link.get();
    ++busyLinks;
  }
  if (busyLinks == 0) return;
  if (busyLinks == 1) return busy->progress(budget, interruptFd);
  const auto until = Deadline::Clock::now() + budget;
  while (Deadline::Clock::now() < until && !brokenError()) {
    for (size_t i = 1; i < links_.size(); ++i) links_[i]->progress(std::chrono::milliseconds(0), interruptFd);
    links_.front()->progress(std::chrono::milliseconds(1), interruptFd);
    int stillBusy = 0;
    for (const auto& link : links_) stillBusy += link->hasPending() ? 1 : 0;
    if (stillBusy < 2) return;
  }
}

void RoutedTransport::wakeProgress() {
  for (const auto& link : links_) link->wakeProgress();
}

bool RoutedTransport::hasPending() const {
  for (const auto& link : links_) {
    if (link->hasPending()) return true;
  }
  return false;
}

void RoutedTransport::abort(std::exception_ptr error) {
  // The most local links first: their peers learn of it soonest.
  for (size_t i = links_.size(); i-- > 0;) links_[i]->abort(error);
}

bool RoutedTransport::broken() const {
  for (const auto& link : links_) {
    if (link->broken()) return true;
  }
  return false;
}

std::exception_ptr RoutedTransport::brokenError() const {
  for (const auto& link : links_) {
    if (auto e = link->brokenError()) return e;
  }
  return nullptr;
}

}  // namespace meshcomm

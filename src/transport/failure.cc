#include "transport/failure.h"

#include <set>

#include "meshcomm/error.h"

namespace meshcomm {

wire::AbortReason abortReasonOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const PeerLost&) {
    return wire::AbortReason::kPeerLost;
  } catch (const Timeout&) {
    return wire::AbortReason::kTimeout;
  } catch (const Mismatch&) {
    return wire::AbortReason::kMismatch;
  } catch (...) {
    return wire::AbortReason::kAborted;
  }
}

std::string errorMessageOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

void throwAbortReason(wire::AbortReason reason, const std::string& text) {
  switch (reason) {
    case wire::AbortReason::kPeerLost: throw PeerLost(text);
    case wire::AbortReason::kTimeout: throw Timeout(text);
    case wire::AbortReason::kMismatch: throw Mismatch(text);
    case wire::AbortReason::kAborted: break;
  }
  throw Aborted(text);
}

std::string awaitedPeers(std::span<const RequestPtr> requests,
                         const std::function<std::string(int peer)>& describePeer) {
  std::set<std::string> waitingOn;
  for (const auto& r : requests) {
    if (r->done()) continue;
    const std::string who = r->peer == kAnyPeer ? std::string("any rank") : describePeer(r->peer);
    waitingOn.insert(who + (r->isSend ? " to receive" : " to send"));
  }
  std::string peers;
  for (const auto& w : waitingOn) peers += (peers.empty() ? "" : ", ") + w;
  return peers;
}

std::string timedOutMessage(const std::string& during, const std::string& waitingFor) {
  return during + ": Timed out waiting for " + waitingFor;
}

void throwWaitTimeout(const std::string& during, std::span<const RequestPtr> requests,
                      const std::function<std::string(int peer)>& describePeer) {
  throw Timeout(timedOutMessage(during, awaitedPeers(requests, describePeer)) +
                ". A rank that never issued this operation, or issued a different one, is the "
                "usual cause (the group timeout can be raised with MESHCOMM_TIMEOUT_MS)");
}

}  // namespace meshcomm

#include "transport/failure.h"

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

}  // namespace meshcomm

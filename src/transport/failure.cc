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

}  // namespace meshcomm

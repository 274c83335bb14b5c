// The one mapping between errors and the reasons peers are told: an abort
// message (TCP frame, shared-memory abort line, store key) carries a
// wire::AbortReason and a text, and the receiving side turns them back into
// the matching exception. Every transport and the peer monitor use these
// three functions, so an error keeps its type on every rank.
//
// Thread-safety: pure functions.
#pragma once

#include <exception>
#include <string>

#include "transport/wire.h"

namespace meshcomm {

// PeerLost, Timeout and Mismatch map to their own reason; anything else is
// kAborted.
wire::AbortReason abortReasonOf(const std::exception_ptr& error);
// what() of the error, or "unknown error".
std::string errorMessageOf(const std::exception_ptr& error);
// The exception a peer's abort with `reason` raises here: PeerLost, Timeout,
// Mismatch, or Aborted (also for a reason byte this build does not know).
[[noreturn]] void throwAbortReason(wire::AbortReason reason, const std::string& text);

}  // namespace meshcomm

// What an error is, in the terms peers are told: the category an abort
// message carries, and its text.
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

}  // namespace meshcomm

// The one mapping between errors and the reasons peers are told: an abort
// message (TCP frame, shared-memory abort line, store key) carries a
// wire::AbortReason and a text, and the receiving side turns them back into
// the matching exception. Every transport and the peer monitor use these
// functions, so an error keeps its type on every rank. The Timeout of a
// wait is worded here too, once for every transport.
//
// Thread-safety: pure functions.
#pragma once

#include <exception>
#include <functional>
#include <span>
#include <string>

#include "transport/transport.h"
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

// "rank 1 to send, rank 3 to receive": the peers the unfinished requests
// wait for, each once, named by `describePeer`.
std::string awaitedPeers(std::span<const RequestPtr> requests,
                         const std::function<std::string(int peer)>& describePeer);
// The message of every operation Timeout: "<during>: Timed out waiting for
// <what>". "Timed out" is the phrase torch's own backends use, which
// torch's tests and users' retry code match (" (Timed out|closed|timeout) "),
// so meshcomm's detail follows it rather than replacing it.
std::string timedOutMessage(const std::string& during, const std::string& waitingFor);
// The Timeout of a wait whose deadline passed, naming the awaited peers.
[[noreturn]] void throwWaitTimeout(const std::string& during, std::span<const RequestPtr> requests,
                                   const std::function<std::string(int peer)>& describePeer);

}  // namespace meshcomm

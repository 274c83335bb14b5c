// The waits' side of meshcomm/interrupt.h: polling the calling thread's
// interrupt check.
//
// A check may be expensive (Python's takes the GIL), so it runs at most
// every kInterruptPollInterval unless a signal has just interrupted a
// system call of the wait, in which case it runs at once.
#pragma once

#include <chrono>
#include <string>

namespace meshcomm {

constexpr auto kInterruptPollInterval = std::chrono::milliseconds(20);

// Whether the calling thread has an interrupt check installed.
bool interruptCheckInstalled();

// Whether the thread's check, if one is installed and due, asks to stop.
// `signalled`: a system call of the caller just failed with EINTR.
bool interruptRequested(bool signalled = false);

// Throws Interrupted for the operation described by `during`, running on
// `rank` ("rank 1 (world rank 3)"); peers are shown the same text.
[[noreturn]] void throwInterrupted(const std::string& during, const std::string& rank);

}  // namespace meshcomm

// The waits' side of meshcomm/interrupt.h: polling the calling thread's
// interrupt check.
//
// A check may be expensive (Python's takes the GIL), so it runs at most
// every kInterruptPollInterval unless a signal has just interrupted a
// system call of the wait, in which case it runs at once.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

namespace meshcomm {

constexpr auto kInterruptPollInterval = std::chrono::milliseconds(20);

// Whether the calling thread has an interrupt check installed.
bool interruptCheckInstalled();

// Whether the thread's abort token is raised, or its check, if one is
// installed and due, asks to stop.
// `signalled`: a system call of the caller just failed with EINTR.
bool interruptRequested(bool signalled = false);

// A group's abort as the waits of the thread driving the group see it.
// Another thread raises it (ProcessGroup::abort); a wait on the driving
// thread then ends as an interrupted one does, but with Aborted and the
// abort's message. Checking it is one atomic load, so waits check it on
// every pass.
//
// Thread-safety: raise() and raised() may be called from any thread.
class AbortToken {
 public:
  // The first call wins and returns true; later ones change nothing.
  bool raise(std::string message);
  bool raised() const { return state_.load(std::memory_order_acquire) == kRaised; }
  // What the first raise() said; valid once raised() is true.
  const std::string& message() const { return message_; }

 private:
  static constexpr int kIdle = 0, kWriting = 1, kRaised = 2;
  std::atomic<int> state_{kIdle};
  std::string message_;
};

// The token the calling thread's waits check (null: none); returns the
// previous one. Set by whoever starts driving a group's transport.
AbortToken* setThreadAbortToken(AbortToken* token);

// Throws Interrupted for the operation described by `during`, running on
// `rank` ("rank 1 (world rank 3)"); peers are shown the same text. When
// the thread's abort token is raised, throws Aborted with its message.
[[noreturn]] void throwInterrupted(const std::string& during, const std::string& rank);

}  // namespace meshcomm

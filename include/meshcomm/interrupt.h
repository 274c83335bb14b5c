// Interrupting a blocking call from the thread that made it.
//
// A synchronous operation may wait a long time: for a peer that never joins,
// up to the group's timeout. A program that must stay responsive (an
// interpreter whose Ctrl-C should end the wait) installs a check on the
// calling thread for the duration of the call. meshcomm's waits on that
// thread call it every few milliseconds, and at once when a signal
// interrupts one of their system calls; when it returns true, the call
// throws meshcomm::Interrupted.
//
// An interrupted collective is abandoned half-way, so its group is aborted:
// every other rank's pending operation on it fails with an error naming
// this rank, and later calls on it fail at once.
//
// A blocking call that has to queue behind operations already issued on its
// group does not abandon them: with a check installed it returns at once
// with the pending Work instead (see OpOptions::blocking), and the caller
// waits on that as it would on an asynchronous call.
//
// Thread-safety: checks are per thread and only ever called on the thread
// that installed them.
#pragma once

#include "meshcomm/export.h"

namespace meshcomm {

// Returns true to interrupt. Must not call into meshcomm.
using InterruptCheck = bool (*)(void* context);

// Installs `check` on the calling thread until destroyed; the previous
// check (if any) is restored then.
class MESHCOMM_API ScopedInterruptCheck {
 public:
  ScopedInterruptCheck(InterruptCheck check, void* context);
  ~ScopedInterruptCheck();
  ScopedInterruptCheck(const ScopedInterruptCheck&) = delete;
  ScopedInterruptCheck& operator=(const ScopedInterruptCheck&) = delete;

 private:
  InterruptCheck previousCheck_;
  void* previousContext_;
};

}  // namespace meshcomm

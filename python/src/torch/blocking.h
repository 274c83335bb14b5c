// One blocking meshcomm operation, run from Python's side of torch: the GIL
// is let go while it runs, and Ctrl-C still ends the wait.
#pragma once

#include <Python.h>

#include <chrono>
#include <exception>

#include "meshcomm/interrupt.h"
#include "meshcomm/process_group.h"

namespace meshcomm::torch_native {

// How long one sleeping slice of a wait lasts: the longest a Ctrl-C waits
// to be noticed while a blocking call waits behind queued operations.
inline constexpr auto kSlice = std::chrono::milliseconds(50);

// The interrupt check of a blocking call: runs Python's signal handlers
// (taking the GIL for that moment). A handler that raised
// (KeyboardInterrupt) leaves its exception set on this thread and sets the
// bool `raised` points to.
bool pythonSignalRaised(void* raised);

// How a blocking call ended.
struct Outcome {
  // A signal handler raised: its exception is Python's error on this thread.
  bool interrupted = false;
  // The operation failed (or could not be issued).
  std::exception_ptr error;

  bool ok() const { return !interrupted && !error; }
};

// Runs the operation `issue` starts (it returns the Work) and waits for it:
// without the GIL, with Python's signal handlers run when meshcomm's waits
// poll and between slices of a wait behind queued operations. Callable with
// the GIL held (released meanwhile) or not (as torch's operator dispatch
// calls); returns holding it exactly as on entry.
template <class Issue>
Outcome runBlocking(Issue&& issue) {
  PyThreadState* released = PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  Outcome outcome;
  {
    ScopedInterruptCheck check(&pythonSignalRaised, &outcome.interrupted);
    try {
      WorkPtr work = issue();
      while (!work->isCompleted() && !pythonSignalRaised(&outcome.interrupted)) {
        work->wait(kSlice);
      }
      if (!outcome.interrupted) outcome.error = work->exception();
    } catch (...) {
      if (!outcome.interrupted) outcome.error = std::current_exception();
    }
  }
  if (released != nullptr) PyEval_RestoreThread(released);
  return outcome;
}

}  // namespace meshcomm::torch_native

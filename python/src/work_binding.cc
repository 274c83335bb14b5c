// Binding of meshcomm::Work, the handle of one queued operation, and the
// interruptible wait every synchronous Python call goes through.
//
// Waiting never holds the GIL, and never sits in C++ for long with signals
// unnoticed: Python only runs its signal handlers (KeyboardInterrupt on
// Ctrl-C) on the main thread between bytecodes, so a wait of minutes inside
// one C++ call would make Ctrl-C do nothing until the operation's deadline.
// waitInterruptibly() therefore waits in slices, and between slices takes
// the GIL back and calls PyErr_CheckSignals().
//
// Short operations finish in microseconds, much less than one condition
// variable sleep and wake-up costs on a loaded machine, so the wait first
// polls for a short while (the spin phase) before it starts sleeping. The
// first few microseconds of it keep the GIL: releasing and retaking it
// costs about as much as a small operation on one host, and other Python
// threads lose nothing they would notice in that time.
#include <Python.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <thread>

#include "bindings.h"
#include "meshcomm/work.h"

namespace py = pybind11;

namespace meshcomm::python {

namespace {

using Clock = std::chrono::steady_clock;

// How long one sleeping slice lasts: the longest a Ctrl-C waits to be noticed.
constexpr auto kSlice = std::chrono::milliseconds(50);

// The spin phase; set by meshcomm/handle.py from the cores per rank
// (spinning on a shared core steals the CPU of the thread that would
// complete the operation).
std::atomic<int64_t> gSpinUs{50};
// The part of it spent holding the GIL.
constexpr auto kHeldSpin = std::chrono::microseconds(20);

// Waits for work, GIL released, in slices with signal checks in between.
// Returns false if timeoutMs (none: no limit) passed first; throws the
// operation's error, or error_already_set when a signal handler raised.
// With runHere and no timeout, first runs the operation on this thread if
// it is still queued on an idle group (Work::runHereIfQueued()); a Ctrl-C
// then interrupts the operation, as it does a blocking call's.
bool waitInterruptibly(Work& work, std::optional<int64_t> timeoutMs, bool runHere) {
  // A completed operation (every blocking submission, and short ones that
  // finished while Python prepared the wait) needs no GIL round trip.
  if (work.isCompleted()) return work.wait(std::chrono::milliseconds(0));
  if (runHere && !timeoutMs) {
    bool ran;
    {
      py::gil_scoped_release release;
      ran = work.runHereIfQueued();
    }
    if (ran && work.isCompleted()) return work.wait(std::chrono::milliseconds(0));
  }
  const auto start = Clock::now();
  const std::optional<Clock::time_point> deadline =
      timeoutMs ? std::optional<Clock::time_point>(start + std::chrono::milliseconds(*timeoutMs))
                : std::nullopt;
  const auto spinUntil = start + std::chrono::microseconds(gSpinUs.load(std::memory_order_relaxed));
  const auto heldUntil = std::min(spinUntil, start + kHeldSpin);
  while (Clock::now() < heldUntil && (!deadline || Clock::now() < *deadline)) {
    if (work.isCompleted()) return work.wait(std::chrono::milliseconds(0));
  }
  bool done = false;
  if (Clock::now() < spinUntil) {
    py::gil_scoped_release release;
    for (;;) {
      if (work.isCompleted()) {
        done = true;
        break;
      }
      auto now = Clock::now();
      if (now >= spinUntil || (deadline && now >= *deadline)) break;
      std::this_thread::yield();
    }
  }
  while (!done) {
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    std::chrono::milliseconds slice = kSlice;
    if (deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
      if (left.count() <= 0) return work.isCompleted() && work.wait(std::chrono::milliseconds(0));
      if (left < slice) slice = left;
    }
    py::gil_scoped_release release;
    done = work.wait(slice) || work.isCompleted();
  }
  // Rethrows the operation's error, translated to its Python class.
  return work.wait(std::chrono::milliseconds(0));
}

}  // namespace

void initWork(py::module_& m) {
  py::class_<Work, std::shared_ptr<Work>>(
      m, "Work", "Handle of one operation queued on a process group (see meshcomm/work.h).")
      .def(
          "wait",
          [](Work& w, std::optional<int64_t> timeoutMs, bool runHere) {
            return waitInterruptibly(w, timeoutMs, runHere);
          },
          py::arg("timeout_ms") = py::none(), py::arg("run_here") = false,
          "Wait for completion (None: no limit of its own; the operation's deadline still "
          "applies). Returns False if timeout_ms passed first; raises the operation's error. "
          "Ctrl-C interrupts the wait (not the operation) within about 50 ms. run_here=True "
          "with no timeout: if the operation is still queued on an idle group, run it on this "
          "thread first (saves the hand-off to the group's thread; Ctrl-C then interrupts "
          "the operation, as it does a blocking call).")
      .def("is_completed", &Work::isCompleted)
      .def("failed", &Work::failed)
      .def(
          "rethrow",
          [](const Work& w) {
            if (auto e = w.exception()) std::rethrow_exception(e);
          },
          "Raise the error that ended the operation, if any (translated to its Python class).")
      .def_property_readonly("description", &Work::description)
      .def_property_readonly("source_rank", &Work::sourceRank,
                             "For a completed receive, the group rank that sent its message; "
                             "-1 otherwise.");

  m.def(
      "set_wait_spin_us", [](int64_t us) { gSpinUs.store(us < 0 ? 0 : us); }, py::arg("us"),
      "Set how long a wait polls before it sleeps, in microseconds.");
  m.def("get_wait_spin_us", [] { return gSpinUs.load(std::memory_order_relaxed); });
}

}  // namespace meshcomm::python

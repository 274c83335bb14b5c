// SIGUSR1 writes this process's flight recorder to its default place
// (FlightRecorder::defaultDirectory()), while at least one group exists.
//
// Only async-signal-safe work happens in the handler: it writes one byte
// to a pipe. A thread of its own reads the pipe and writes the dump, so
// the operations in flight are neither stopped nor touched. A SIGUSR1
// handler the program installed itself is left alone (and then SIGUSR1 is
// the program's, not meshcomm's); the previous disposition is restored
// when the last group goes.
//
// Thread-safety: hold() and release() may be called from any thread.
#pragma once

namespace meshcomm {

class DumpOnSignal {
 public:
  // The first hold starts the thread and installs the handler.
  static void hold();
  // The last release restores the handler and stops the thread.
  static void release();
};

}  // namespace meshcomm

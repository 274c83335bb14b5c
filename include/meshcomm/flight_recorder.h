// The flight recorder: every process keeps a record of its last
// operations (MESHCOMM_FLIGHT_RECORDER of them, default 2000; 0 turns it
// off) and writes it as JSON lines when an operation times out, loses a
// peer or finds a mismatch, on SIGUSR1, and when asked here.
// `meshcomm-diagnose DIR` reads every rank's file and says which rank is
// stuck, where, and since when (docs/errors.md, "Diagnosing a hang").
//
// Thread-safety: may be called from any thread, while operations run.
#pragma once

#include <string>

#include "meshcomm/export.h"

namespace meshcomm {

// Writes this process's flight recorder and returns the file written.
// `path`: "" for rank_<R>.jsonl in MESHCOMM_DUMP_DIR (default
// /tmp/meshcomm-dumps-<job>, under MESHCOMM_DUMP_ROOT when set, a folder
// removed in time: docs/errors.md, "How long dumps are kept"); a directory
// for rank_<R>.jsonl in it; else
// the file itself. Missing directories are created. Never touches the
// network. Throws Error when the file cannot be written, or when the
// recorder is off (MESHCOMM_FLIGHT_RECORDER=0).
MESHCOMM_API std::string dumpFlightRecorder(const std::string& path = "");

}  // namespace meshcomm

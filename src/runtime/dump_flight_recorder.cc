// The public entry point of meshcomm/flight_recorder.h.
#include "meshcomm/error.h"
#include "meshcomm/flight_recorder.h"
#include "runtime/flight_recorder.h"

namespace meshcomm {

std::string dumpFlightRecorder(const std::string& path) {
  FlightRecorder* recorder = FlightRecorder::instance();
  if (recorder == nullptr) {
    throw Error("the flight recorder is off (MESHCOMM_FLIGHT_RECORDER=0); set it to the number "
                "of operations to keep, e.g. 2000, to record and dump them");
  }
  return recorder->dump(path, "on demand");
}

}  // namespace meshcomm

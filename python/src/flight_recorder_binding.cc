// dump_flight_recorder (meshcomm/flight_recorder.h).
#include <string>

#include "bindings.h"
#include "meshcomm/flight_recorder.h"

namespace py = pybind11;

namespace meshcomm::python {

void initFlightRecorder(py::module_& m) {
  m.def(
      "dump_flight_recorder",
      [](const std::string& path) {
        py::gil_scoped_release release;
        return dumpFlightRecorder(path);
      },
      py::arg("path") = "",
      "Writes this process's flight recorder; returns the file written.");
}

}  // namespace meshcomm::python

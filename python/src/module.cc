// The _meshcomm extension module: a thin layer over the C++ library. Argument
// checking, defaults and documentation live in the Python package
// (python/meshcomm/); this module only converts values and releases the GIL
// around every call that may block.
#include <pybind11/pybind11.h>

#include "bindings.h"

PYBIND11_MODULE(_meshcomm, m) {
  m.doc() = "meshcomm native core (use the meshcomm package, not this module)";
  m.attr("__version__") = MESHCOMM_VERSION;  // CMake's project version
  meshcomm::python::initErrors(m);
  meshcomm::python::initStore(m);
  meshcomm::python::initPythonStore(m);
  meshcomm::python::initWork(m);
  meshcomm::python::initProcessGroup(m);
  meshcomm::python::initFlightRecorder(m);
}

#include <pybind11/pybind11.h>
PYBIND11_MODULE(_meshcomm, m) { m.doc() = "meshcomm native core"; }

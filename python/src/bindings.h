// Entry points of the per-area pieces of the _meshcomm extension. Each area
// (errors, store, work handles, process groups) lives in its own
// *_binding.cc and adds its names to the module in one init function, called
// from module.cc in dependency order.
//
// Thread-safety: the init functions run once, under the GIL, while Python
// imports the extension.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>

namespace meshcomm::python {

// Registers the translator that turns meshcomm::Error subclasses into the
// Python classes of meshcomm._errors (and InvalidArgument into ValueError).
// Must run before any other init so that errors raised by later areas are
// translated. Throws pybind11::error_already_set when meshcomm._errors
// cannot be imported.
void initErrors(pybind11::module_& m);

// The Python exception (an instance of the class the translator would
// raise) for a C++ error, or None for a null one. Needs the GIL.
pybind11::object pythonErrorOf(std::exception_ptr error);

// Adds Store (the abstract key-value interface) and TCPStore.
void initStore(pybind11::module_& m);

// Adds PythonStore, a Store backed by a Python object with the methods of
// torch.distributed.Store. Needs initStore first.
void initPythonStore(pybind11::module_& m);

// Adds Work (an operation's handle) and the wait tuning knobs.
void initWork(pybind11::module_& m);

// Adds ProcessGroup, World, and the DTYPE_CODES / REDUCE_OP_CODES tables
// that map numpy-style names to the C++ enum values. Needs initStore and
// initWork first (World takes a Store, operations return a Work).
void initProcessGroup(pybind11::module_& m);

// Adds dump_flight_recorder.
void initFlightRecorder(pybind11::module_& m);

}  // namespace meshcomm::python

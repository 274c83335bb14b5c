// Translation of C++ exceptions into Python ones.
//
// The Python classes are defined in meshcomm/_errors.py, where they carry
// their documentation and can be subclassed or imported without loading the
// extension. The translator looks them up by name in that module each time
// an error crosses the boundary; after the first import this is a dictionary
// lookup, and it keeps no Python object alive in a C++ static (which would
// outlive the interpreter at exit).
//
// Mapping (most derived first):
//   InvalidArgument -> ValueError (bad arguments are not run-time failures)
//   Timeout         -> DistTimeoutError
//   PeerLost        -> DistPeerLostError
//   StoreError      -> DistStoreError
//   Mismatch        -> DistMismatchError
//   Aborted, Error  -> DistError
// Anything else falls through to pybind11's own translation.
#include <Python.h>

#include <exception>
#include <string>

#include "bindings.h"
#include "meshcomm/error.h"

namespace py = pybind11;

namespace meshcomm::python {

namespace {

constexpr const char* kErrorsModule = "meshcomm._errors";

// Sets the pending Python exception to meshcomm._errors.<name>(message).
// Falls back to RuntimeError rather than losing the message if the lookup
// fails (for example while the interpreter is shutting down).
void raiseNamed(const char* name, const char* message) {
  PyObject* type = nullptr;
  if (PyObject* mod = PyImport_ImportModule(kErrorsModule)) {
    type = PyObject_GetAttrString(mod, name);
    Py_DECREF(mod);
  }
  if (type == nullptr) {
    PyErr_Clear();
    PyErr_SetString(PyExc_RuntimeError, message);
    return;
  }
  PyErr_SetString(type, message);
  Py_DECREF(type);
}

void translate(std::exception_ptr p) {
  if (!p) return;
  try {
    std::rethrow_exception(p);
  } catch (const InvalidArgument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const Timeout& e) {
    raiseNamed("DistTimeoutError", e.what());
  } catch (const PeerLost& e) {
    raiseNamed("DistPeerLostError", e.what());
  } catch (const StoreError& e) {
    raiseNamed("DistStoreError", e.what());
  } catch (const Mismatch& e) {
    raiseNamed("DistMismatchError", e.what());
  } catch (const Error& e) {
    // Aborted has no class of its own: the caller's remedy (give up on the
    // object) is the same as for any other failure.
    raiseNamed("DistError", e.what());
  }
  // Exceptions not caught above propagate to the next translator.
}

// Throws the C++ exception named by kind, so tests can check the mapping of
// classes that no current binding can provoke on purpose.
[[noreturn]] void throwForTesting(const std::string& kind, const std::string& message) {
  if (kind == "InvalidArgument") throw InvalidArgument(message);
  if (kind == "Timeout") throw Timeout(message);
  if (kind == "PeerLost") throw PeerLost(message);
  if (kind == "StoreError") throw StoreError(message);
  if (kind == "Mismatch") throw Mismatch(message);
  if (kind == "Aborted") throw Aborted(message);
  if (kind == "Error") throw Error(message);
  throw std::logic_error("unknown error kind '" + kind + "'");
}

}  // namespace

void initErrors(py::module_& m) {
  // Imported now so that a broken installation fails at import time, not at
  // the first error.
  py::module_::import(kErrorsModule);
  py::register_exception_translator(&translate);
  m.def("_throw_for_testing", &throwForTesting, py::arg("kind"), py::arg("message"),
        "Raise the C++ meshcomm exception `kind` with `message` (for tests).");
}

}  // namespace meshcomm::python

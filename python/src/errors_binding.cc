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
//   Aborted         -> DistAbortedError (Interrupted too, when no Python
//                      exception such as KeyboardInterrupt takes its place)
//   Error           -> DistError
// Anything else falls through to pybind11's own translation.
#include <Python.h>

#include <exception>
#include <string>

#include "bindings.h"
#include "error_names.h"
#include "meshcomm/error.h"

namespace py = pybind11;

namespace meshcomm::python {

namespace {

constexpr const char* kErrorsModule = "meshcomm._errors";

void translate(std::exception_ptr p) {
  if (!p) return;
  try {
    std::rethrow_exception(p);
  } catch (const Error&) {
    setPythonError(p);
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

py::object pythonErrorOf(std::exception_ptr error) {
  if (!error) return py::none();
  std::string message;
  const char* name = errorClassName(error, message);
  if (name == nullptr) return py::module_::import("builtins").attr("RuntimeError")(message);
  return py::module_::import(kErrorsModule).attr(name)(message);
}

void initErrors(py::module_& m) {
  // Imported now so that a broken installation fails at import time, not at
  // the first error.
  py::module_::import(kErrorsModule);
  py::register_exception_translator(&translate);
  m.def("_throw_for_testing", &throwForTesting, py::arg("kind"), py::arg("message"),
        "Raise the C++ meshcomm exception `kind` with `message` (for tests).");
}

}  // namespace meshcomm::python

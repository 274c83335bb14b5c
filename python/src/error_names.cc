#include "error_names.h"

#include <Python.h>

#include "meshcomm/error.h"

namespace meshcomm::python {

// Falls back to RuntimeError rather than losing the message if the lookup
// fails (for example while the interpreter is shutting down).
void setNamedError(const char* name, const char* message) {
  PyObject* type = nullptr;
  if (name == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, message);
    return;
  }
  if (PyObject* mod = PyImport_ImportModule("meshcomm._errors")) {
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

void setPythonError(const std::exception_ptr& error) {
  std::string message;
  try {
    std::rethrow_exception(error);
  } catch (const InvalidArgument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
    return;
  } catch (...) {
  }
  const char* name = errorClassName(error, message);
  setNamedError(name, message.c_str());
}

namespace {

template <class E>
bool isA(const std::exception& e) {
  return dynamic_cast<const E*>(&e) != nullptr;
}

// The meshcomm._errors class of `e`, tested from the most derived class up
// (Interrupted, an Aborted, raises DistAbortedError); nullptr for
// InvalidArgument (Python's ValueError) and for what is not a meshcomm Error.
const char* pythonClassOf(const std::exception& e) {
  if (isA<InvalidArgument>(e)) return nullptr;
  if (isA<Timeout>(e)) return "DistTimeoutError";
  if (isA<PeerLost>(e)) return "DistPeerLostError";
  if (isA<StoreError>(e)) return "DistStoreError";
  if (isA<Mismatch>(e)) return "DistMismatchError";
  if (isA<Aborted>(e)) return "DistAbortedError";
  if (isA<Error>(e)) return "DistError";
  return nullptr;
}

}  // namespace

const char* errorClassName(const std::exception_ptr& p, std::string& message) {
  try {
    std::rethrow_exception(p);
  } catch (const std::exception& e) {
    message = e.what();
    return pythonClassOf(e);
  } catch (...) {
    message = "unknown error";
    return nullptr;
  }
}

}  // namespace meshcomm::python

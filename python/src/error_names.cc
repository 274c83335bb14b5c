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

const char* errorClassName(const std::exception_ptr& p, std::string& message) {
  try {
    std::rethrow_exception(p);
  } catch (const InvalidArgument& e) {
    message = e.what();
    return nullptr;
  } catch (const Timeout& e) {
    message = e.what();
    return "DistTimeoutError";
  } catch (const PeerLost& e) {
    message = e.what();
    return "DistPeerLostError";
  } catch (const StoreError& e) {
    message = e.what();
    return "DistStoreError";
  } catch (const Mismatch& e) {
    message = e.what();
    return "DistMismatchError";
  } catch (const Aborted& e) {
    message = e.what();
    return "DistAbortedError";
  } catch (const Error& e) {
    message = e.what();
    return "DistError";
  } catch (const std::exception& e) {
    message = e.what();
    return nullptr;
  } catch (...) {
    message = "unknown error";
    return nullptr;
  }
}

}  // namespace meshcomm::python

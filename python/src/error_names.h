// meshcomm's C++ errors as Python exceptions, with Python's C API only, so
// that every extension module (whichever pybind11 it is built with) raises
// the same classes of meshcomm._errors.
#pragma once

#include <exception>
#include <string>

namespace meshcomm::python {

// The meshcomm._errors class for `error` (DistTimeoutError, ...), with its
// message in `message`; nullptr when it is not a meshcomm runtime error
// (InvalidArgument, or another exception).
const char* errorClassName(const std::exception_ptr& error, std::string& message);

// Sets Python's error indicator to meshcomm._errors.<name>(message), or to
// RuntimeError(message) when that class cannot be found. GIL held.
void setNamedError(const char* name, const char* message);

// Sets Python's error indicator to `error` as Python sees it: ValueError for
// InvalidArgument, the meshcomm._errors class of any other meshcomm error,
// RuntimeError for anything else. GIL held.
void setPythonError(const std::exception_ptr& error);

}  // namespace meshcomm::python

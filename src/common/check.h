// MESHCOMM_CHECK: the one macro for internal invariants. A failed check is a
// bug in meshcomm, not in the caller, so it throws meshcomm::Error with the
// file and line rather than aborting the user's process.
#pragma once

#include <sstream>
#include <string>

#include "meshcomm/error.h"

namespace meshcomm::detail {

[[noreturn]] void checkFailed(const char* file, int line, const char* expr,
                              const std::string& detail);

}  // namespace meshcomm::detail

#define MESHCOMM_CHECK(cond, ...)                                          \
  do {                                                                     \
    if (!(cond)) [[unlikely]] {                                            \
      std::ostringstream meshcomm_check_os_;                               \
      meshcomm_check_os_ << "" __VA_ARGS__;                                \
      ::meshcomm::detail::checkFailed(__FILE__, __LINE__, #cond,           \
                                      meshcomm_check_os_.str());           \
    }                                                                      \
  } while (0)

// Minimal leveled logging to stderr, used for events a user should see
// (a dropped malformed connection, a fallback taken) but that are not errors
// of the current call. MESHCOMM_LOG_LEVEL=debug|info|warn|error|off sets the
// threshold (default warn).
//
// Thread-safety: log lines from different threads never interleave.
#pragma once

#include <sstream>
#include <string>

namespace meshcomm {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

bool logEnabled(LogLevel level);
void logLine(LogLevel level, const std::string& message);
// A line of a trace the user asked for (MESHCOMM_LOG), whatever the level:
// "[meshcomm <tag> pid P] message".
void logTagged(const char* tag, const std::string& message);

}  // namespace meshcomm

#define MESHCOMM_LOG(level, ...)                                     \
  do {                                                               \
    if (::meshcomm::logEnabled(::meshcomm::LogLevel::level)) {       \
      std::ostringstream meshcomm_log_os_;                           \
      meshcomm_log_os_ << __VA_ARGS__;                               \
      ::meshcomm::logLine(::meshcomm::LogLevel::level,               \
                          meshcomm_log_os_.str());                   \
    }                                                                \
  } while (0)

#include "common/logging.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/mutex.h"

namespace meshcomm {
namespace {

LogLevel thresholdFromEnv() {
  const char* v = std::getenv("MESHCOMM_LOG_LEVEL");
  if (v == nullptr) return LogLevel::kWarn;
  if (std::strcmp(v, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(v, "info") == 0) return LogLevel::kInfo;
  if (std::strcmp(v, "error") == 0) return LogLevel::kError;
  if (std::strcmp(v, "off") == 0) return LogLevel::kOff;
  return LogLevel::kWarn;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warning";
    case LogLevel::kError: return "error";
    case LogLevel::kOff: break;
  }
  return "";
}

}  // namespace

bool logEnabled(LogLevel level) {
  static const LogLevel threshold = thresholdFromEnv();
  return level >= threshold && level != LogLevel::kOff;
}

void logLine(LogLevel level, const std::string& message) { logTagged(levelName(level), message); }

void logTagged(const char* tag, const std::string& message) {
  // Guards no field: holding it keeps each line's write and flush to
  // stderr together.
  static Mutex mu;
  MutexLock lock(mu);
  std::fprintf(stderr, "[meshcomm %s pid %d] %s\n", tag, static_cast<int>(getpid()),
               message.c_str());
  std::fflush(stderr);
}

}  // namespace meshcomm

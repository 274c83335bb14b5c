// Reading configuration from environment variables. A set but malformed
// value is an InvalidArgument naming the variable, never silently ignored.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace meshcomm {

std::optional<std::string> envString(const char* name);
// Parses a decimal integer; throws InvalidArgument when malformed.
std::optional<int64_t> envInt(const char* name);
// Accepts 1/0, true/false, yes/no, on/off (any case).
bool envBool(const char* name, bool fallback);
int64_t envIntOr(const char* name, int64_t fallback);

}  // namespace meshcomm

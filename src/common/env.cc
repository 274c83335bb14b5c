#include "common/env.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "meshcomm/error.h"

namespace meshcomm {

std::optional<std::string> envString(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::optional<int64_t> envInt(const char* name) {
  auto s = envString(name);
  if (!s || s->empty()) return std::nullopt;
  int64_t value = 0;
  const char* begin = s->data();
  const char* end = s->data() + s->size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end) {
    throw InvalidArgument(std::string("environment variable ") + name +
                          "='" + *s + "' is not an integer");
  }
  return value;
}

int64_t envIntOr(const char* name, int64_t fallback) {
  return envInt(name).value_or(fallback);
}

bool envBool(const char* name, bool fallback) {
  auto s = envString(name);
  if (!s || s->empty()) return fallback;
  std::string v = *s;
  std::transform(v.begin(), v.end(), v.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  throw InvalidArgument(std::string("environment variable ") + name + "='" +
                        *s + "' is not a boolean (use 1/0, true/false)");
}

}  // namespace meshcomm

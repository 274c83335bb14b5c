#include "common/check.h"

namespace meshcomm::detail {

void checkFailed(const char* file, int line, const char* expr,
                 const std::string& detail) {
  std::ostringstream os;
  os << "meshcomm internal error at " << file << ":" << line << ": check '"
     << expr << "' failed";
  if (!detail.empty()) os << ": " << detail;
  throw Error(os.str());
}

}  // namespace meshcomm::detail

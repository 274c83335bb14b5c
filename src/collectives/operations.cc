#include "collectives/operations.h"

#include <sstream>

#include "meshcomm/types.h"
#include "transport/transport.h"

namespace meshcomm {

const char* opcodeName(uint8_t opcode) {
  // Point to point is the one family with two plain members.
  if (opcode == static_cast<uint8_t>(Opcode::kPointToPoint)) return "send/recv";
  // Otherwise a family is named after its first operation, the plain one
  // (all_gather for all_gather_into_tensor and its uneven form).
  for (const auto& info : kOperations) {
    if (static_cast<uint8_t>(info.family) == opcode) return info.name;
  }
  return "unknown";
}

std::string describeSignature(const MessageSignature& sig, uint64_t bytes) {
  const FamilyTraits family = familyTraits(sig.opcode);
  std::ostringstream os;
  os << opcodeName(sig.opcode);
  if (sig.dtype < kNumDTypes) os << " " << dtypeName(static_cast<DType>(sig.dtype));
  if (family.reduces && sig.reduceOp < kNumReduceOps) {
    os << " " << reduceOpName(static_cast<ReduceOp>(sig.reduceOp));
  }
  os << ", " << sig.opCount << " elements";
  if (family.rooted) {
    os << ", root " << sig.detail;
  } else if (family.splitSizes && sig.detail != 0) {
    os << ", split sizes #" << std::hex << sig.detail << std::dec;
  }
  if (bytes != kNoMessageBytes) os << ", message of " << bytes << " bytes";
  return os.str();
}

}  // namespace meshcomm

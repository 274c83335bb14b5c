#include "collectives/p2p.h"

#include "collectives/operations.h"
#include "transport/tags.h"

namespace meshcomm {

std::vector<RequestPtr> postPointToPoint(Transport& transport, const std::vector<P2POp>& ops) {
  std::vector<RequestPtr> requests;
  requests.reserve(ops.size());
  for (const auto& op : ops) {
    MessageSignature sig{static_cast<uint8_t>(Opcode::kPointToPoint),
                         static_cast<uint8_t>(op.tensor.dtype), 0,
                         static_cast<uint64_t>(op.tensor.numel), 0};
    const uint64_t tag = tags::pointToPoint(op.tag);
    if (op.kind == P2POp::Kind::kSend) {
      requests.push_back(transport.postSend(op.peer, tag, sig, op.tensor.data, op.tensor.bytes()));
    } else {
      requests.push_back(transport.postRecv(op.peer, tag, sig, op.tensor.data, op.tensor.bytes()));
    }
  }
  return requests;
}

}  // namespace meshcomm

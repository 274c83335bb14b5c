#include "collectives/p2p.h"

#include "collectives/operations.h"
#include "transport/tags.h"

namespace meshcomm {

namespace {

// What a point-to-point message says of itself: its dtype and elements.
MessageSignature signatureOf(const TensorRef& tensor) {
  return MessageSignature{static_cast<uint8_t>(Opcode::kPointToPoint),
                          static_cast<uint8_t>(tensor.dtype), 0,
                          static_cast<uint64_t>(tensor.numel), 0};
}

}  // namespace

std::vector<RequestPtr> postPointToPoint(Transport& transport, const std::vector<P2POp>& ops) {
  std::vector<RequestPtr> requests;
  requests.reserve(ops.size());
  // A batch's messages to one peer leave in one write.
  SendHold hold(transport);
  for (const auto& op : ops) {
    const MessageSignature sig = signatureOf(op.tensor);
    const uint64_t tag = tags::pointToPoint(op.tag);
    if (op.kind == P2POp::Kind::kSend) {
      requests.push_back(transport.postSend(op.peer, tag, sig, op.tensor.data, op.tensor.bytes()));
    } else {
      requests.push_back(transport.postRecv(op.peer, tag, sig, op.tensor.data, op.tensor.bytes()));
    }
  }
  hold.release();
  return requests;
}

RequestPtr postReceiveFromAny(Transport& transport, TensorRef tensor, int tag) {
  return transport.postRecvAny(tags::pointToPoint(tag), signatureOf(tensor), tensor.data,
                               tensor.bytes());
}

}  // namespace meshcomm

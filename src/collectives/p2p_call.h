// Point to point as the public operations issue it: the argument rules of
// send, recv and batch_isend_irecv, then `issue(name, post)`, where `post`
// posts the operations on a Transport and returns their requests (the
// runtime's issue runs it and waits for them; runtime/group.h).
#pragma once

#include <string>
#include <vector>

#include "collectives/call_checks.h"
#include "collectives/p2p.h"

namespace meshcomm::collectives::calls {

// A batch of one is named after what it does, as send and recv are.
template <class Issue>
auto batchIsendIrecv(const CallSite& site, const std::vector<P2POp>& ops, Issue&& issue) {
  const Operation op = ops.size() != 1                     ? Operation::kBatchIsendIrecv
                       : ops[0].kind == P2POp::Kind::kSend ? Operation::kSend
                                                           : Operation::kRecv;
  CallChecks call(op, site);
  if (ops.empty()) call.fail("the operation list is empty");
  for (const auto& p : ops) {
    call.tensor(p.tensor, "tensor");
    call.rank(p.peer, p.kind == P2POp::Kind::kSend ? "dst" : "src");
    if (p.peer == site.rank) call.fail("a rank cannot send to or receive from itself");
    if (p.tag < 0) call.fail("tags must be non-negative, got " + std::to_string(p.tag));
  }
  return issue(call.name(), [ops](Transport& t, const OpContext&) {
    return postPointToPoint(t, ops);
  });
}

template <class Issue>
auto recvAnySource(const CallSite& site, TensorRef data, int tag, Issue&& issue) {
  CallChecks call(Operation::kRecv, site);
  call.tensor(data, "tensor");
  if (site.size < 2) call.fail("there is no other rank in the group to receive from");
  if (tag < 0) call.fail("tags must be non-negative, got " + std::to_string(tag));
  return issue(call.name(), [data, tag](Transport& t, const OpContext&) {
    return std::vector<RequestPtr>{postReceiveFromAny(t, data, tag)};
  });
}

}  // namespace meshcomm::collectives::calls

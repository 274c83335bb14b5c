// ProcessGroup: the public operations. Each family's call.h
// (src/collectives/<family>/call.h) checks an operation's arguments and
// says what runs it; here the group queues that, or runs it at once
// (runtime/group.h).
#include "meshcomm/process_group.h"

#include <utility>

#include "collectives/all_gather/call.h"
#include "collectives/all_reduce/call.h"
#include "collectives/all_to_all/call.h"
#include "collectives/barrier/call.h"
#include "collectives/broadcast/call.h"
#include "collectives/gather_scatter/call.h"
#include "collectives/p2p_call.h"
#include "collectives/reduce/call.h"
#include "collectives/reduce_scatter/call.h"
#include "runtime/group.h"

namespace meshcomm {
namespace {

namespace calls = collectives::calls;

collectives::CallSite siteOf(const GroupImpl& g) {
  return {g.name(), g.size(), g.rank(), g.route()};
}

// What a family's call hands a collective to: the group runs it with the
// call's options.
auto collectiveIssue(GroupImpl& g, const OpOptions& o) {
  return [&g, &o](const char* name, const MessageSignature& sig, Algorithm algorithm,
                  auto&& body) {
    return g.runCollective(name, sig, algorithm, o, std::forward<decltype(body)>(body));
  };
}

auto pointToPointIssue(GroupImpl& g, const OpOptions& o) {
  return [&g, &o](const char* name, auto&& post) {
    return g.runPointToPoint(name, o, std::forward<decltype(post)>(post));
  };
}

}  // namespace

ProcessGroup::ProcessGroup(std::shared_ptr<GroupImpl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;

const std::string& ProcessGroup::name() const { return impl_->name(); }
void ProcessGroup::abort() { impl_->abort("abort() was called on it"); }
std::exception_ptr ProcessGroup::error() const { return impl_->error(); }
int ProcessGroup::rank() const { return impl_->rank(); }
int ProcessGroup::size() const { return impl_->size(); }
const std::vector<int>& ProcessGroup::worldRanks() const { return impl_->worldRanks(); }
std::chrono::milliseconds ProcessGroup::timeout() const { return impl_->timeout(); }

int ProcessGroup::toWorldRank(int groupRank) const {
  collectives::CallChecks("get_global_rank", siteOf(*impl_)).rank(groupRank, "group rank");
  return impl_->worldRanks()[static_cast<size_t>(groupRank)];
}

int ProcessGroup::toGroupRank(int worldRank) const {
  const auto& ranks = impl_->worldRanks();
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == worldRank) return static_cast<int>(i);
  }
  return -1;
}

WorkPtr ProcessGroup::allReduce(TensorRef data, const OpOptions& o) {
  return calls::allReduce(siteOf(*impl_), data, o.op, collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::broadcast(TensorRef data, const OpOptions& o) {
  return calls::broadcast(siteOf(*impl_), data, o.root, collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::reduce(TensorRef data, const OpOptions& o) {
  return calls::reduce(siteOf(*impl_), data, o.op, o.root, collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::allGather(const std::vector<TensorRef>& outputs, TensorRef input,
                                const OpOptions& o) {
  return calls::allGather(siteOf(*impl_), outputs, input, collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::allGatherIntoTensor(TensorRef output, TensorRef input, const OpOptions& o) {
  return calls::allGatherIntoTensor(siteOf(*impl_), output, input, collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::allGatherIntoTensorUneven(TensorRef output, TensorRef input,
                                                const std::vector<int64_t>& counts,
                                                const OpOptions& o) {
  return calls::allGatherIntoTensorUneven(siteOf(*impl_), output, input, counts,
                                          collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::reduceScatter(TensorRef output, const std::vector<TensorRef>& inputs,
                                    const OpOptions& o) {
  return calls::reduceScatter(siteOf(*impl_), output, inputs, o.op, collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::reduceScatterTensor(TensorRef output, TensorRef input, const OpOptions& o) {
  return calls::reduceScatterTensor(siteOf(*impl_), output, input, o.op,
                                    collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::reduceScatterTensorUneven(TensorRef output, TensorRef input,
                                                const std::vector<int64_t>& counts,
                                                const OpOptions& o) {
  return calls::reduceScatterTensorUneven(siteOf(*impl_), output, input, counts, o.op,
                                          collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::gather(const std::vector<TensorRef>& outputs, TensorRef input,
                             const OpOptions& o) {
  return calls::rootedList<Operation::kGather>(siteOf(*impl_), input, outputs, o.root,
                                               collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::gatherIntoTensor(TensorRef output, TensorRef input, const OpOptions& o) {
  return calls::rootedTensor<Operation::kGatherIntoTensor>(siteOf(*impl_), input, output, o.root,
                                                           collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::scatter(TensorRef output, const std::vector<TensorRef>& inputs,
                              const OpOptions& o) {
  return calls::rootedList<Operation::kScatter>(siteOf(*impl_), output, inputs, o.root,
                                                collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::scatterTensor(TensorRef output, TensorRef input, const OpOptions& o) {
  return calls::rootedTensor<Operation::kScatterTensor>(siteOf(*impl_), output, input, o.root,
                                                        collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::allToAll(const std::vector<TensorRef>& outputs,
                               const std::vector<TensorRef>& inputs, const OpOptions& o) {
  return calls::allToAll(siteOf(*impl_), outputs, inputs, collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::allToAllSingle(TensorRef output, TensorRef input,
                                     const std::vector<int64_t>& recvCounts,
                                     const std::vector<int64_t>& sendCounts, const OpOptions& o) {
  return calls::allToAllSingle(siteOf(*impl_), output, input, recvCounts, sendCounts,
                               collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::barrier(const OpOptions& o) {
  return calls::barrier(siteOf(*impl_), collectiveIssue(*impl_, o));
}

WorkPtr ProcessGroup::send(TensorRef data, int dst, const OpOptions& o) {
  return batchIsendIrecv({P2POp{P2POp::Kind::kSend, data, dst, o.tag}}, o);
}

WorkPtr ProcessGroup::recv(TensorRef data, int src, const OpOptions& o) {
  return batchIsendIrecv({P2POp{P2POp::Kind::kRecv, data, src, o.tag}}, o);
}

WorkPtr ProcessGroup::recvAnySource(TensorRef data, const OpOptions& o) {
  return calls::recvAnySource(siteOf(*impl_), data, o.tag, pointToPointIssue(*impl_, o));
}

WorkPtr ProcessGroup::batchIsendIrecv(const std::vector<P2POp>& ops, const OpOptions& o) {
  return calls::batchIsendIrecv(siteOf(*impl_), ops, pointToPointIssue(*impl_, o));
}

}  // namespace meshcomm

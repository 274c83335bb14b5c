// gather's and scatter's public operations as they are issued (the form:
// all_reduce/call.h), each in a list and a tensor form. The four differ
// only in which way the data flows and in how the root's blocks are laid
// out (a list, or one tensor's equal blocks; none away from the root).
#pragma once

#include <utility>

#include "collectives/agreement.h"
#include "collectives/call_checks.h"

namespace meshcomm::collectives::calls {

// This rank's own block (gather's input, scatter's output) and the root.
inline void ownBlockAndRoot(const CallChecks& call, TensorRef own, const char* ownName, int root) {
  call.tensor(own, ownName);
  call.root(root);
}

// Issues a gather (kGathers) or scatter whose root's blocks are `blocks`.
template <bool kGathers, class Issue>
auto issueRooted(const CallChecks& call, TensorRef own, int root, BlockList blocks, Issue&& issue) {
  return issue(call.name(), call.signature(own.dtype, own.numel, root), call.algorithm(),
               [own, root, blocks = std::move(blocks),
                args = call.arguments(own.dtype, own.numel, ReduceOp::kSum, root)](Comm& c) {
                 if constexpr (kGathers) {
                   agreeAndGather(c, args, own.data, own.bytes(), blocks, root);
                 } else {
                   agreeAndScatter(c, args, blocks, own.data, own.bytes(), root);
                 }
               });
}

template <class Issue>
auto gather(const CallSite& site, const std::vector<TensorRef>& outputs, TensorRef input, int root,
            Issue&& issue) {
  CallChecks call(Operation::kGather, site);
  ownBlockAndRoot(call, input, "input", root);
  BlockList blocks = call.rootList(outputs, input, root, "the gather list", "output", "input");
  return issueRooted<true>(call, input, root, std::move(blocks), issue);
}

template <class Issue>
auto gatherIntoTensor(const CallSite& site, TensorRef output, TensorRef input, int root,
                      Issue&& issue) {
  CallChecks call(Operation::kGatherIntoTensor, site);
  ownBlockAndRoot(call, input, "input", root);
  BlockList blocks;
  if (site.rank == root) blocks = call.equalBlocks(output, "output", input, "input");
  return issueRooted<true>(call, input, root, std::move(blocks), issue);
}

template <class Issue>
auto scatter(const CallSite& site, TensorRef output, const std::vector<TensorRef>& inputs, int root,
             Issue&& issue) {
  CallChecks call(Operation::kScatter, site);
  ownBlockAndRoot(call, output, "output", root);
  BlockList blocks = call.rootList(inputs, output, root, "the scatter list", "input", "output");
  return issueRooted<false>(call, output, root, std::move(blocks), issue);
}

template <class Issue>
auto scatterTensor(const CallSite& site, TensorRef output, TensorRef input, int root,
                   Issue&& issue) {
  CallChecks call(Operation::kScatterTensor, site);
  ownBlockAndRoot(call, output, "output", root);
  BlockList blocks;
  if (site.rank == root) blocks = call.equalBlocks(input, "input", output, "output");
  return issueRooted<false>(call, output, root, std::move(blocks), issue);
}

}  // namespace meshcomm::collectives::calls

// gather's and scatter's public operations as they are issued (the form:
// all_reduce/call.h), each in a list and a tensor form. The four differ
// only in which way the data flows and in how the root's blocks are laid
// out (a list, or one tensor's equal blocks; none away from the root):
// rootedList and rootedTensor, for kGather / kGatherIntoTensor and
// kScatter / kScatterTensor.
#pragma once

#include <utility>

#include "collectives/agreement.h"
#include "collectives/call_checks.h"

namespace meshcomm::collectives::calls {

// The names a gather's or a scatter's arguments go by in its messages.
struct RootedNames {
  const char* own;    // this rank's block: gather's input, scatter's output
  const char* whole;  // the root's tensor form: gather's output, scatter's input
  const char* list;   // the root's list form
};
template <Operation kOp>
constexpr bool gathers() {
  return operationInfo(kOp).family == Opcode::kGather;
}
template <Operation kOp>
constexpr RootedNames rootedNames() {
  return gathers<kOp>() ? RootedNames{"input", "output", "the gather list"}
                        : RootedNames{"output", "input", "the scatter list"};
}

// Checks this rank's own block and the root, then issues the call with the
// root's blocks that `rootBlocks(call)` makes (none away from the root).
template <Operation kOp, class RootBlocks, class Issue>
auto rooted(const CallSite& site, TensorRef own, int root, RootBlocks&& rootBlocks,
            Issue&& issue) {
  CallChecks call(kOp, site);
  call.tensor(own, rootedNames<kOp>().own);
  call.root(root);
  BlockList blocks = site.rank == root ? rootBlocks(call) : BlockList{};
  return issue(call.name(), call.signature(own.dtype, own.numel, root), call.algorithm(),
               [own, root, blocks = std::move(blocks),
                args = call.arguments(own.dtype, own.numel, ReduceOp::kSum, root)](Comm& c) {
                 if constexpr (gathers<kOp>()) {
                   agreeAndGather(c, args, own.data, own.bytes(), blocks, root);
                 } else {
                   agreeAndScatter(c, args, blocks, own.data, own.bytes(), root);
                 }
               });
}

// gather and scatter: at the root, one tensor per rank, each like `own`.
template <Operation kOp, class Issue>
auto rootedList(const CallSite& site, TensorRef own, const std::vector<TensorRef>& list, int root,
                Issue&& issue) {
  constexpr RootedNames kNames = rootedNames<kOp>();
  return rooted<kOp>(
      site, own, root,
      [&](const CallChecks& call) {
        call.matchingList(list, own, kNames.list, kNames.whole, kNames.own);
        return blocksOf(list);
      },
      issue);
}

// gather_into_tensor and scatter_tensor: at the root, one tensor of a
// block like `own` per rank.
template <Operation kOp, class Issue>
auto rootedTensor(const CallSite& site, TensorRef own, TensorRef whole, int root, Issue&& issue) {
  constexpr RootedNames kNames = rootedNames<kOp>();
  auto blocks = [&](const CallChecks& call) {
    return call.equalBlocks(whole, kNames.whole, own, kNames.own);
  };
  return rooted<kOp>(site, own, root, blocks, issue);
}

}  // namespace meshcomm::collectives::calls

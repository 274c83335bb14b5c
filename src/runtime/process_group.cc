// ProcessGroup: the public operations. Each checks its arguments here,
// before anything is queued, then hands the matching algorithm from
// src/collectives/ to the group's executor.
#include "meshcomm/process_group.h"

#include <cstring>
#include <numeric>

#include "collectives/agreement.h"
#include "collectives/blocks.h"
#include "collectives/collectives.h"
#include "collectives/operations.h"
#include "collectives/p2p.h"
#include "common/mix.h"
#include "meshcomm/error.h"
#include "runtime/group.h"

namespace meshcomm {
namespace {

uint64_t digest(const std::vector<int64_t>& values) { return mixWords(values.size(), values); }

BlockList blocksOf(const std::vector<TensorRef>& tensors) {
  BlockList out;
  for (const auto& t : tensors) out.push_back({static_cast<uint8_t*>(t.data), t.bytes()});
  return out;
}

size_t totalBytes(std::span<const Block> blocks) {
  size_t total = 0;
  for (const Block& b : blocks) total += b.bytes;
  return total;
}

// `n` blocks of `each` elements of `t`, in order.
BlockList equalBlocksOf(TensorRef t, int64_t each, int n) {
  BlockList out(static_cast<size_t>(n));
  const size_t bytes = static_cast<size_t>(each) * dtypeSize(t.dtype);
  auto* p = static_cast<uint8_t*>(t.data);
  for (Block& b : out) {
    b = {p, bytes};
    p += bytes;
  }
  return out;
}

BlockList blocksOf(TensorRef t, std::span<const int64_t> counts) {
  BlockList out;
  size_t es = dtypeSize(t.dtype);
  auto* p = static_cast<uint8_t*>(t.data);
  for (int64_t c : counts) {
    out.push_back({p, static_cast<size_t>(c) * es});
    p += static_cast<size_t>(c) * es;
  }
  return out;
}

// One operation being issued: the name its errors carry, the signature
// its messages carry (both from the operation table), and the argument
// checks, each throwing InvalidArgument naming the operation and group.
class Call {
 public:
  Call(Operation op, const GroupImpl& g) : Call(operationName(op), g) { info_ = &operationInfo(op); }
  // A call that is not an operation of the table (rank translation).
  Call(const char* name, const GroupImpl& g) : name_(name), g_(g) {}

  const char* name() const { return name_; }
  // What ranks must agree on beyond the signature (collectives/agreement.h).
  // REQUIRES: made from an Operation.
  CallArguments arguments(DType dtype, uint64_t count, const OpOptions& o) const {
    CallArguments a;
    a.operation = info_->operation;
    a.dtype = dtype;
    a.count = count;
    a.op = o.op;
    a.root = o.root;
    return a;
  }
  // REQUIRES (here and in root()): made from an Operation.
  MessageSignature signature(DType dtype, uint64_t count, uint64_t detail = 0,
                             ReduceOp op = ReduceOp::kSum) const {
    return MessageSignature{static_cast<uint8_t>(info_->family), static_cast<uint8_t>(dtype),
                            static_cast<uint8_t>(op), count, detail};
  }

  // What runs the call (collectives/tuning.h), asked once, here: a forced
  // algorithm this group cannot run fails the call before it is queued.
  // `bytes` as chooseAlgorithm takes it.
  Algorithm algorithm(size_t bytes = 0) const {
    return chooseAlgorithm(info_->family, bytes, g_.size(), g_.route());
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(std::string(name_) + " on group " + g_.name() + ": " + what);
  }
  void tensor(const TensorRef& t, const char* name) const {
    if (t.numel < 0) fail(std::string(name) + " has a negative element count");
    if (t.numel > 0 && t.data == nullptr) fail(std::string(name) + " has no data");
  }
  // The names make the message only when it is needed: the checks run on
  // every call, the messages almost never.
  void sameDtype(const TensorRef& a, const TensorRef& b, const char* aName,
                 const char* bName = nullptr) const {
    if (a.dtype != b.dtype) {
      fail(std::string(aName) + (bName != nullptr ? std::string(" and ") + bName : "") +
           " dtypes differ (" + dtypeName(a.dtype) + " vs " + dtypeName(b.dtype) + ")");
    }
  }
  void reduceOp(ReduceOp op, DType dtype) const {
    if (!reduceOpSupports(op, dtype)) {
      fail(std::string("op '") + reduceOpName(op) + "' is not defined for " + dtypeName(dtype));
    }
  }
  // The operation's root, named as its callers name it (src or dst).
  void root(int r) const { rank(r, info_->rootName()); }
  void rank(int r, const char* name) const {
    if (r < 0 || r >= g_.size()) {
      fail(std::string(name) + " " + std::to_string(r) + " is not a rank of this group (size " +
           std::to_string(g_.size()) + ")");
    }
  }
  void listSize(size_t n, const char* name) const {
    if (n != static_cast<size_t>(g_.size())) {
      fail(std::string(name) + " has " + std::to_string(n) + " entries; the group has " +
           std::to_string(g_.size()) + " ranks");
    }
  }
  // A per-rank list whose every tensor must match `like` in dtype and size.
  void matchingList(const std::vector<TensorRef>& list, const TensorRef& like,
                    const char* listName, const char* element, const char* other) const {
    listSize(list.size(), listName);
    for (const auto& t : list) {
      tensor(t, element);
      if (t.dtype != like.dtype) {
        fail(std::string(element) + " and " + other + " dtypes differ (" + dtypeName(t.dtype) +
             " vs " + dtypeName(like.dtype) + ")");
      }
      if (t.numel != like.numel) {
        fail(std::string("every ") + element + " must have the " + other + "'s " +
             std::to_string(like.numel) + " elements, one has " + std::to_string(t.numel));
      }
    }
  }
  // `whole`, the other buffer of a collective whose `block` is one rank's
  // share, must hold the group's size of such blocks, of the same dtype.
  // Returns those blocks.
  // `whole` holds one `block`-sized block per rank, of one dtype.
  void equalShape(const TensorRef& whole, const char* wholeName, const TensorRef& block,
                  const char* blockName) const {
    tensor(whole, wholeName);
    sameDtype(whole, block, wholeName, blockName);
    if (whole.numel != block.numel * g_.size()) {
      fail(std::string("the ") + wholeName + " must hold size x " + blockName + " = " +
           std::to_string(block.numel * g_.size()) + " elements, it has " + std::to_string(whole.numel));
    }
  }
  // equalShape, and those blocks.
  BlockList equalBlocks(const TensorRef& whole, const char* wholeName, const TensorRef& block,
                                 const char* blockName) const {
    equalShape(whole, wholeName, block, blockName);
    return equalBlocksOf(whole, block.numel, g_.size());
  }
  // `part` is this rank's share of `whole` as `splits` divide it among
  // the ranks (the uneven all_gather and reduce_scatter): both valid, one
  // dtype, the split sizes adding up to `whole` with this rank's equal to
  // `part`, and `part` apart from `whole` or exactly its share of it.
  void unevenShare(const TensorRef& part, const char* partName, const TensorRef& whole,
                   const char* wholeName, const std::vector<int64_t>& splits,
                   const char* splitsName) const {
    tensor(part, partName);
    tensor(whole, wholeName);
    sameDtype(whole, part, wholeName, partName);
    counts(splits, whole.numel, splitsName);
    const auto me = static_cast<size_t>(g_.rank());
    if (splits[me] != part.numel) {
      fail("this rank's split size is " + std::to_string(splits[me]) + " but its " + partName +
           " has " + std::to_string(part.numel) + " elements");
    }
    const int64_t own = std::accumulate(splits.begin(), splits.begin() + g_.rank(), int64_t{0});
    apartOrOwnBlock(part, whole, own, partName, wholeName);
  }
  // The blocks of gather's or scatter's per-rank list, named `listName`
  // with elements `element`, that only the root uses: there, one tensor
  // per rank, each matching `like` (named `other`); elsewhere none.
  BlockList rootList(const std::vector<TensorRef>& list, const TensorRef& like, int root,
                              const char* listName, const char* element, const char* other) const {
    if (g_.rank() != root) return {};
    matchingList(list, like, listName, element, other);
    return blocksOf(list);
  }
  // `part`, one rank's block of a collective whose other buffer is
  // `whole`, must lie apart from `whole` or be exactly this rank's block of
  // it, `ownOffset` elements in (the in-place form). Anything in between
  // would have the collective overwrite data it has yet to read.
  void apartOrOwnBlock(const TensorRef& part, const TensorRef& whole, int64_t ownOffset,
                       const char* partName, const char* wholeName) const {
    if (!rangesOverlap(part.data, part.bytes(), whole.data, whole.bytes())) return;
    const size_t own = static_cast<size_t>(ownOffset) * dtypeSize(whole.dtype);
    if (part.data == static_cast<uint8_t*>(whole.data) + own) return;
    fail(std::string("the ") + partName + " overlaps the " + wholeName + " without being this rank's block of it (" +
         std::to_string(ownOffset) + " elements in); pass separate buffers, or exactly that block for an "
         "in-place call");
  }
  // No byte of any `outputs` block may be one of the `inputs` blocks: an
  // exchange writes some outputs before it has sent every input.
  void apart(std::span<const Block> outputs, std::span<const Block> inputs) const {
    for (const Block& o : outputs) {
      for (const Block& i : inputs) apart(o, i);
    }
  }
  void apart(const Block& output, const Block& input) const {
    if (rangesOverlap(output.data, output.bytes, input.data, input.bytes)) {
      fail("an output overlaps an input; the outputs need buffers of their own");
    }
  }
  void counts(const std::vector<int64_t>& counts, int64_t total, const char* name) const {
    listSize(counts.size(), name);
    int64_t sum = 0;
    for (int64_t c : counts) {
      if (c < 0) fail(std::string(name) + " has a negative entry");
      sum += c;
    }
    if (sum != total) {
      fail(std::string(name) + " add up to " + std::to_string(sum) + " elements but the tensor has " +
           std::to_string(total));
    }
  }

 private:
  const char* name_;
  const OperationInfo* info_ = nullptr;
  const GroupImpl& g_;
};

// gather and scatter, each in a list and a tensor form, differ only in
// which way the data flows and in how the root's blocks are laid out: all
// four check this rank's own block `own` (gather's input, scatter's
// output) and the root, take the root's blocks of every rank from
// `rootBlocks(call)` (none elsewhere) and issue the collective here.
template <Operation kOp, class RootBlocks>
WorkPtr rootedCall(GroupImpl& group, TensorRef own, const OpOptions& o, RootBlocks&& rootBlocks) {
  constexpr bool kGathers = kOp == Operation::kGather || kOp == Operation::kGatherIntoTensor;
  Call call(kOp, group);
  call.tensor(own, kGathers ? "input" : "output");
  call.root(o.root);
  BlockList blocks = rootBlocks(call);
  return group.runCollective(
      call.name(), call.signature(own.dtype, own.numel, o.root), call.algorithm(), o,
      [own, blocks = std::move(blocks), o, args = call.arguments(own.dtype, own.numel, o)](Comm& c) {
        if constexpr (kGathers) {
          collectives::agreeAndGather(c, args, own.data, own.bytes(), blocks, o.root);
        } else {
          collectives::agreeAndScatter(c, args, blocks, own.data, own.bytes(), o.root);
        }
      });
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
  Call("get_global_rank", *impl_).rank(groupRank, "group rank");
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
  Call call(Operation::kAllReduce, *impl_);
  call.tensor(data, "tensor");
  call.reduceOp(o.op, data.dtype);
  return impl_->runCollective(
      call.name(), call.signature(data.dtype, data.numel, 0, o.op), call.algorithm(data.bytes()), o,
      [data, o](Comm& c) {
        collectives::allReduce(c, data.data, static_cast<size_t>(data.numel), data.dtype, o.op);
      });
}

WorkPtr ProcessGroup::broadcast(TensorRef data, const OpOptions& o) {
  Call call(Operation::kBroadcast, *impl_);
  call.tensor(data, "tensor");
  call.root(o.root);
  return impl_->runCollective(
      call.name(), call.signature(data.dtype, data.numel, o.root), call.algorithm(data.bytes()), o,
      [data, o, args = call.arguments(data.dtype, data.numel, o)](Comm& c) {
        collectives::agreeAndBroadcast(c, args, data.data, data.bytes(), o.root);
      });
}

WorkPtr ProcessGroup::reduce(TensorRef data, const OpOptions& o) {
  Call call(Operation::kReduce, *impl_);
  call.tensor(data, "tensor");
  call.root(o.root);
  call.reduceOp(o.op, data.dtype);
  return impl_->runCollective(
      call.name(), call.signature(data.dtype, data.numel, o.root, o.op),
      call.algorithm(data.bytes()), o,
      [data, o, args = call.arguments(data.dtype, data.numel, o)](Comm& c) {
        collectives::agreeAndReduce(c, args, data.data, static_cast<size_t>(data.numel), data.dtype,
                                    o.op, o.root);
      });
}

WorkPtr ProcessGroup::allGather(const std::vector<TensorRef>& outputs, TensorRef input,
                                const OpOptions& o) {
  Call call(Operation::kAllGather, *impl_);
  call.tensor(input, "input");
  call.matchingList(outputs, input, "the output list", "output", "input");
  auto blocks = blocksOf(outputs);
  const Algorithm algorithm = call.algorithm(totalBytes(blocks));
  return impl_->runCollective(call.name(), call.signature(input.dtype, input.numel), algorithm, o,
                              [input, blocks = std::move(blocks)](Comm& c) {
                                collectives::allGather(c, input.data, input.bytes(), blocks);
                              });
}

WorkPtr ProcessGroup::allGatherIntoTensor(TensorRef output, TensorRef input, const OpOptions& o) {
  Call call(Operation::kAllGatherIntoTensor, *impl_);
  call.tensor(input, "input");
  auto blocks = call.equalBlocks(output, "output", input, "input");
  call.apartOrOwnBlock(input, output, input.numel * rank(), "input", "output");
  const Algorithm algorithm = call.algorithm(output.bytes());
  return impl_->runCollective(call.name(), call.signature(input.dtype, input.numel), algorithm, o,
                              [input, blocks = std::move(blocks)](Comm& c) {
                                collectives::allGather(c, input.data, input.bytes(), blocks);
                              });
}

WorkPtr ProcessGroup::allGatherIntoTensorUneven(TensorRef output, TensorRef input,
                                                const std::vector<int64_t>& counts,
                                                const OpOptions& o) {
  Call call(Operation::kAllGatherIntoTensorUneven, *impl_);
  call.unevenShare(input, "input", output, "output", counts, "output_split_sizes");
  auto blocks = blocksOf(output, counts);
  CallArguments args = call.arguments(input.dtype, static_cast<uint64_t>(output.numel), o);
  args.splits = Counts(counts);
  return impl_->runCollective(
      call.name(),
      call.signature(input.dtype, static_cast<uint64_t>(output.numel), digest(counts)),
      call.algorithm(totalBytes(blocks)), o, [input, blocks, args](Comm& c) {
        collectives::agreeAndAllGather(c, args, input.data, input.bytes(), blocks);
      });
}

WorkPtr ProcessGroup::reduceScatter(TensorRef output, const std::vector<TensorRef>& inputs,
                                    const OpOptions& o) {
  Call call(Operation::kReduceScatter, *impl_);
  call.tensor(output, "output");
  call.reduceOp(o.op, output.dtype);
  call.matchingList(inputs, output, "the input list", "input", "output");
  // The ring reads one contiguous input; gather the list into one.
  return impl_->runCollective(
      call.name(), call.signature(output.dtype, output.numel, 0, o.op),
      call.algorithm(output.bytes() * inputs.size()), o, [output, inputs, o](Comm& c) {
        uint8_t* packed = c.scratch(Scratch::kPacked, output.bytes() * inputs.size());
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (output.bytes() > 0) {
            std::memcpy(packed + i * output.bytes(), inputs[i].data, output.bytes());
          }
        }
        std::vector<size_t> counts(inputs.size(), static_cast<size_t>(output.numel));
        collectives::reduceScatter(c, packed, counts, output.data, output.dtype, o.op);
      });
}

WorkPtr ProcessGroup::reduceScatterTensor(TensorRef output, TensorRef input, const OpOptions& o) {
  Call call(Operation::kReduceScatterTensor, *impl_);
  call.tensor(output, "output");
  call.equalShape(input, "input", output, "output");
  call.reduceOp(o.op, output.dtype);
  call.apartOrOwnBlock(output, input, output.numel * rank(), "output", "input");
  std::vector<size_t> counts(static_cast<size_t>(size()), static_cast<size_t>(output.numel));
  return impl_->runCollective(
      call.name(), call.signature(output.dtype, output.numel, 0, o.op), call.algorithm(input.bytes()), o,
      [output, input, counts = std::move(counts), o](Comm& c) {
        collectives::reduceScatter(c, input.data, counts, output.data, output.dtype, o.op);
      });
}

WorkPtr ProcessGroup::reduceScatterTensorUneven(TensorRef output, TensorRef input,
                                                const std::vector<int64_t>& counts,
                                                const OpOptions& o) {
  Call call(Operation::kReduceScatterTensorUneven, *impl_);
  call.unevenShare(output, "output", input, "input", counts, "input_split_sizes");
  call.reduceOp(o.op, output.dtype);
  std::vector<size_t> sizes(counts.begin(), counts.end());
  CallArguments args = call.arguments(output.dtype, static_cast<uint64_t>(input.numel), o);
  args.splits = Counts(counts);
  return impl_->runCollective(
      call.name(),
      call.signature(output.dtype, static_cast<uint64_t>(input.numel), digest(counts), o.op),
      call.algorithm(input.bytes()), o, [output, input, sizes, o, args](Comm& c) {
        collectives::agreeAndReduceScatter(c, args, input.data, sizes, output.data, output.dtype, o.op);
      });
}

WorkPtr ProcessGroup::gather(const std::vector<TensorRef>& outputs, TensorRef input,
                             const OpOptions& o) {
  return rootedCall<Operation::kGather>(*impl_, input, o, [&](const Call& call) {
    return call.rootList(outputs, input, o.root, "the gather list", "output", "input");
  });
}

WorkPtr ProcessGroup::gatherIntoTensor(TensorRef output, TensorRef input, const OpOptions& o) {
  return rootedCall<Operation::kGatherIntoTensor>(*impl_, input, o, [&](const Call& call) {
    return rank() == o.root ? call.equalBlocks(output, "output", input, "input") : BlockList{};
  });
}

WorkPtr ProcessGroup::scatter(TensorRef output, const std::vector<TensorRef>& inputs,
                              const OpOptions& o) {
  return rootedCall<Operation::kScatter>(*impl_, output, o, [&](const Call& call) {
    return call.rootList(inputs, output, o.root, "the scatter list", "input", "output");
  });
}

WorkPtr ProcessGroup::scatterTensor(TensorRef output, TensorRef input, const OpOptions& o) {
  return rootedCall<Operation::kScatterTensor>(*impl_, output, o, [&](const Call& call) {
    return rank() == o.root ? call.equalBlocks(input, "input", output, "output") : BlockList{};
  });
}

WorkPtr ProcessGroup::allToAll(const std::vector<TensorRef>& outputs,
                               const std::vector<TensorRef>& inputs, const OpOptions& o) {
  Call call(Operation::kAllToAll, *impl_);
  call.listSize(outputs.size(), "the output list");
  call.listSize(inputs.size(), "the input list");
  for (size_t i = 0; i < inputs.size(); ++i) {
    call.tensor(inputs[i], "input");
    call.tensor(outputs[i], "output");
    call.sameDtype(inputs[i], inputs[0], "input");
    call.sameDtype(outputs[i], inputs[0], "output", "input");
  }
  DType dtype = inputs.empty() ? DType::kUInt8 : inputs[0].dtype;
  auto sends = blocksOf(inputs);
  auto recvs = blocksOf(outputs);
  call.apart(recvs, sends);
  return impl_->runCollective(call.name(), call.signature(dtype, 0), call.algorithm(), o,
                              [sends, recvs](Comm& c) { collectives::allToAll(c, sends, recvs); });
}

WorkPtr ProcessGroup::allToAllSingle(TensorRef output, TensorRef input,
                                     const std::vector<int64_t>& recvCounts,
                                     const std::vector<int64_t>& sendCounts, const OpOptions& o) {
  Call call(Operation::kAllToAllSingle, *impl_);
  call.tensor(output, "output");
  call.tensor(input, "input");
  call.sameDtype(output, input, "output", "input");
  auto split = [&](const std::vector<int64_t>& given, TensorRef t, const char* name) {
    if (!given.empty()) {
      call.counts(given, t.numel, name);
      return Counts(given);
    }
    if (t.numel % size() != 0) {
      call.fail(std::string("without ") + name + ", the " + std::to_string(t.numel) +
                " elements must divide evenly among " + std::to_string(size()) + " ranks");
    }
    return Counts(static_cast<size_t>(size()), t.numel / size());
  };
  CallArguments args = call.arguments(input.dtype, 0, o);
  args.sendSplits = split(sendCounts, input, "input_split_sizes");
  args.recvSplits = split(recvCounts, output, "output_split_sizes");
  auto sends = blocksOf(input, args.sendSplits);
  auto recvs = blocksOf(output, args.recvSplits);
  call.apart(Block{static_cast<uint8_t*>(output.data), output.bytes()},
             Block{static_cast<uint8_t*>(input.data), input.bytes()});
  return impl_->runCollective(call.name(), call.signature(input.dtype, 0), call.algorithm(), o,
                              [sends = std::move(sends), recvs = std::move(recvs),
                               args = std::move(args)](Comm& c) {
                                collectives::agreeAndAllToAll(c, args, sends, recvs);
                              });
}

WorkPtr ProcessGroup::barrier(const OpOptions& o) {
  Call call(Operation::kBarrier, *impl_);
  return impl_->runCollective(call.name(), call.signature(DType::kUInt8, 0), call.algorithm(), o,
                              [](Comm& c) { collectives::barrier(c); });
}

WorkPtr ProcessGroup::send(TensorRef data, int dst, const OpOptions& o) {
  return batchIsendIrecv({P2POp{P2POp::Kind::kSend, data, dst, o.tag}}, o);
}

WorkPtr ProcessGroup::recv(TensorRef data, int src, const OpOptions& o) {
  return batchIsendIrecv({P2POp{P2POp::Kind::kRecv, data, src, o.tag}}, o);
}

WorkPtr ProcessGroup::recvAnySource(TensorRef data, const OpOptions& o) {
  Call call(Operation::kRecv, *impl_);
  call.tensor(data, "tensor");
  if (size() < 2) call.fail("there is no other rank in the group to receive from");
  if (o.tag < 0) call.fail("tags must be non-negative, got " + std::to_string(o.tag));
  return impl_->runPointToPoint(call.name(), o, [data, tag = o.tag](Transport& t, const OpContext&) {
    return std::vector<RequestPtr>{postReceiveFromAny(t, data, tag)};
  });
}

WorkPtr ProcessGroup::batchIsendIrecv(const std::vector<P2POp>& ops, const OpOptions& o) {
  // A batch of one is named after what it does, as send and recv are.
  const Operation op = ops.size() != 1                   ? Operation::kBatchIsendIrecv
                       : ops[0].kind == P2POp::Kind::kSend ? Operation::kSend
                                                           : Operation::kRecv;
  Call call(op, *impl_);
  if (ops.empty()) call.fail("the operation list is empty");
  for (const auto& p : ops) {
    call.tensor(p.tensor, "tensor");
    call.rank(p.peer, p.kind == P2POp::Kind::kSend ? "dst" : "src");
    if (p.peer == rank()) call.fail("a rank cannot send to or receive from itself");
    if (p.tag < 0) call.fail("tags must be non-negative, got " + std::to_string(p.tag));
  }
  return impl_->runPointToPoint(call.name(), o, [ops](Transport& t, const OpContext&) {
    return postPointToPoint(t, ops);
  });
}

}  // namespace meshcomm

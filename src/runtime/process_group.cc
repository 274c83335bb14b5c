// ProcessGroup: the public operations. Each checks its arguments here,
// before anything is queued, then hands the matching algorithm from
// src/collectives/ to the group's executor.
#include "meshcomm/process_group.h"

#include <cstring>
#include <numeric>

#include "collectives/blocks.h"
#include "collectives/collectives.h"
#include "collectives/opcode.h"
#include "collectives/p2p.h"
#include "meshcomm/error.h"
#include "runtime/group.h"

namespace meshcomm {
namespace {

uint64_t digest(const std::vector<int64_t>& values) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (int64_t v : values) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
      h *= 1099511628211ull;
    }
  }
  return h;
}

MessageSignature signature(Opcode opcode, DType dtype, uint64_t count, uint64_t detail = 0,
                           ReduceOp op = ReduceOp::kSum) {
  return MessageSignature{static_cast<uint8_t>(opcode), static_cast<uint8_t>(dtype),
                          static_cast<uint8_t>(op), count, detail};
}

class Checker {
 public:
  Checker(const char* op, const GroupImpl& g) : op_(op), g_(g) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(std::string(op_) + " on group " + g_.name() + ": " + what);
  }
  void tensor(const TensorRef& t, const char* name) const {
    if (t.numel < 0) fail(std::string(name) + " has a negative element count");
    if (t.numel > 0 && t.data == nullptr) fail(std::string(name) + " has no data");
  }
  void sameDtype(const TensorRef& a, const TensorRef& b, const char* what) const {
    if (a.dtype != b.dtype) {
      fail(std::string(what) + " dtypes differ (" + dtypeName(a.dtype) + " vs " +
           dtypeName(b.dtype) + ")");
    }
  }
  void reduceOp(ReduceOp op, DType dtype) const {
    if (!reduceOpSupports(op, dtype)) {
      fail(std::string("op '") + reduceOpName(op) + "' is not defined for " + dtypeName(dtype));
    }
  }
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
  // `part`, one rank's block of a collective whose other buffer is
  // `whole`, must lie apart from `whole` or be exactly this rank's block of
  // it, `ownOffset` elements in (the in-place form). Anything in between
  // would have the collective overwrite data it has yet to read.
  void apartOrOwnBlock(const TensorRef& part, const TensorRef& whole, int64_t ownOffset,
                       const char* partName, const char* wholeName) const {
    if (!rangesOverlap(part.data, part.bytes(), whole.data, whole.bytes())) return;
    const size_t own = static_cast<size_t>(ownOffset) * dtypeSize(whole.dtype);
    if (part.data == static_cast<uint8_t*>(whole.data) + own) return;
    fail(std::string(partName) + " overlaps the " + wholeName + " without being this rank's block of it (" +
         std::to_string(ownOffset) + " elements in); pass separate buffers, or exactly that block for an "
         "in-place call");
  }
  // No byte of any `outputs` block may be one of the `inputs` blocks: an
  // exchange writes some outputs before it has sent every input.
  void apart(const std::vector<Block>& outputs, const std::vector<Block>& inputs) const {
    for (const Block& o : outputs) {
      for (const Block& i : inputs) {
        if (rangesOverlap(o.data, o.bytes, i.data, i.bytes)) {
          fail("an output overlaps an input; the outputs need buffers of their own");
        }
      }
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
  const char* op_;
  const GroupImpl& g_;
};

std::vector<Block> blocksOf(const std::vector<TensorRef>& tensors) {
  std::vector<Block> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back({static_cast<uint8_t*>(t.data), t.bytes()});
  return out;
}

std::vector<Block> blocksOf(TensorRef t, const std::vector<int64_t>& counts) {
  std::vector<Block> out;
  size_t es = dtypeSize(t.dtype);
  auto* p = static_cast<uint8_t*>(t.data);
  for (int64_t c : counts) {
    out.push_back({p, static_cast<size_t>(c) * es});
    p += static_cast<size_t>(c) * es;
  }
  return out;
}

std::vector<int64_t> equalCounts(int64_t each, int n) {
  return std::vector<int64_t>(static_cast<size_t>(n), each);
}

}  // namespace

ProcessGroup::ProcessGroup(std::shared_ptr<GroupImpl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;

const std::string& ProcessGroup::name() const { return impl_->name(); }
int ProcessGroup::rank() const { return impl_->rank(); }
int ProcessGroup::size() const { return impl_->size(); }
const std::vector<int>& ProcessGroup::worldRanks() const { return impl_->worldRanks(); }
std::chrono::milliseconds ProcessGroup::timeout() const { return impl_->timeout(); }

int ProcessGroup::toWorldRank(int groupRank) const {
  Checker("get_global_rank", *impl_).rank(groupRank, "group rank");
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
  Checker check("all_reduce", *impl_);
  check.tensor(data, "tensor");
  check.reduceOp(o.op, data.dtype);
  checkForcedAlgorithm(Opcode::kAllReduce, size(), impl_->route());
  return impl_->runCollective(
      "all_reduce", signature(Opcode::kAllReduce, data.dtype, data.numel, 0, o.op), o,
      [data, o](Comm& c) {
        collectives::allReduce(c, data.data, static_cast<size_t>(data.numel), data.dtype, o.op);
      });
}

WorkPtr ProcessGroup::broadcast(TensorRef data, const OpOptions& o) {
  Checker check("broadcast", *impl_);
  check.tensor(data, "tensor");
  check.rank(o.root, "src");
  checkForcedAlgorithm(Opcode::kBroadcast, size(), impl_->route());
  return impl_->runCollective(
      "broadcast", signature(Opcode::kBroadcast, data.dtype, data.numel, o.root), o,
      [data, o](Comm& c) { collectives::broadcast(c, data.data, data.bytes(), o.root); });
}

WorkPtr ProcessGroup::reduce(TensorRef data, const OpOptions& o) {
  Checker check("reduce", *impl_);
  check.tensor(data, "tensor");
  check.rank(o.root, "dst");
  check.reduceOp(o.op, data.dtype);
  checkForcedAlgorithm(Opcode::kReduce, size(), impl_->route());
  return impl_->runCollective(
      "reduce", signature(Opcode::kReduce, data.dtype, data.numel, o.root, o.op), o,
      [data, o](Comm& c) {
        collectives::reduce(c, data.data, static_cast<size_t>(data.numel), data.dtype, o.op, o.root);
      });
}

WorkPtr ProcessGroup::allGather(const std::vector<TensorRef>& outputs, TensorRef input,
                                const OpOptions& o) {
  Checker check("all_gather", *impl_);
  check.tensor(input, "input");
  check.matchingList(outputs, input, "the output list", "output", "input");
  auto blocks = blocksOf(outputs);
  return impl_->runCollective("all_gather", signature(Opcode::kAllGather, input.dtype, input.numel),
                              o, [input, blocks](Comm& c) {
                                collectives::allGather(c, input.data, input.bytes(), blocks);
                              });
}

WorkPtr ProcessGroup::allGatherInto(TensorRef output, TensorRef input, const OpOptions& o) {
  Checker check("all_gather_into_tensor", *impl_);
  check.tensor(input, "input");
  check.tensor(output, "output");
  check.sameDtype(output, input, "output and input");
  if (output.numel != input.numel * size()) {
    check.fail("the output must hold size x input = " + std::to_string(input.numel * size()) +
               " elements, it has " + std::to_string(output.numel));
  }
  check.apartOrOwnBlock(input, output, input.numel * rank(), "the input", "output");
  auto blocks = blocksOf(output, equalCounts(input.numel, size()));
  return impl_->runCollective("all_gather_into_tensor",
                              signature(Opcode::kAllGather, input.dtype, input.numel), o,
                              [input, blocks](Comm& c) {
                                collectives::allGather(c, input.data, input.bytes(), blocks);
                              });
}

WorkPtr ProcessGroup::allGatherUneven(TensorRef output, TensorRef input,
                                      const std::vector<int64_t>& counts, const OpOptions& o) {
  Checker check("all_gather_into_tensor_uneven", *impl_);
  check.tensor(input, "input");
  check.tensor(output, "output");
  check.sameDtype(output, input, "output and input");
  check.counts(counts, output.numel, "output_split_sizes");
  if (counts[static_cast<size_t>(rank())] != input.numel) {
    check.fail("this rank's split size is " + std::to_string(counts[static_cast<size_t>(rank())]) +
               " but its input has " + std::to_string(input.numel) + " elements");
  }
  check.apartOrOwnBlock(input, output, std::accumulate(counts.begin(), counts.begin() + rank(), int64_t{0}),
                        "the input", "output");
  auto blocks = blocksOf(output, counts);
  return impl_->runCollective(
      "all_gather_into_tensor_uneven",
      signature(Opcode::kAllGather, input.dtype, static_cast<uint64_t>(output.numel), digest(counts)),
      o, [input, blocks](Comm& c) { collectives::allGather(c, input.data, input.bytes(), blocks); });
}

WorkPtr ProcessGroup::reduceScatter(TensorRef output, const std::vector<TensorRef>& inputs,
                                    const OpOptions& o) {
  Checker check("reduce_scatter", *impl_);
  check.tensor(output, "output");
  check.reduceOp(o.op, output.dtype);
  check.matchingList(inputs, output, "the input list", "input", "output");
  // The ring reads one contiguous input; gather the list into one.
  return impl_->runCollective(
      "reduce_scatter", signature(Opcode::kReduceScatter, output.dtype, output.numel, 0, o.op), o,
      [output, inputs, o](Comm& c) {
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
  Checker check("reduce_scatter_tensor", *impl_);
  check.tensor(output, "output");
  check.tensor(input, "input");
  check.sameDtype(input, output, "input and output");
  check.reduceOp(o.op, output.dtype);
  if (input.numel != output.numel * size()) {
    check.fail("the input must hold size x output = " + std::to_string(output.numel * size()) +
               " elements, it has " + std::to_string(input.numel));
  }
  check.apartOrOwnBlock(output, input, output.numel * rank(), "the output", "input");
  std::vector<size_t> counts(static_cast<size_t>(size()), static_cast<size_t>(output.numel));
  return impl_->runCollective(
      "reduce_scatter_tensor",
      signature(Opcode::kReduceScatter, output.dtype, output.numel, 0, o.op), o,
      [output, input, counts, o](Comm& c) {
        collectives::reduceScatter(c, input.data, counts, output.data, output.dtype, o.op);
      });
}

WorkPtr ProcessGroup::reduceScatterUneven(TensorRef output, TensorRef input,
                                          const std::vector<int64_t>& counts, const OpOptions& o) {
  Checker check("reduce_scatter_tensor_uneven", *impl_);
  check.tensor(output, "output");
  check.tensor(input, "input");
  check.sameDtype(input, output, "input and output");
  check.reduceOp(o.op, output.dtype);
  check.counts(counts, input.numel, "input_split_sizes");
  if (counts[static_cast<size_t>(rank())] != output.numel) {
    check.fail("this rank's split size is " + std::to_string(counts[static_cast<size_t>(rank())]) +
               " but its output has " + std::to_string(output.numel) + " elements");
  }
  check.apartOrOwnBlock(output, input, std::accumulate(counts.begin(), counts.begin() + rank(), int64_t{0}),
                        "the output", "input");
  std::vector<size_t> sizes(counts.begin(), counts.end());
  return impl_->runCollective(
      "reduce_scatter_tensor_uneven",
      signature(Opcode::kReduceScatter, output.dtype, static_cast<uint64_t>(input.numel),
                digest(counts), o.op),
      o, [output, input, sizes, o](Comm& c) {
        collectives::reduceScatter(c, input.data, sizes, output.data, output.dtype, o.op);
      });
}

WorkPtr ProcessGroup::gather(const std::vector<TensorRef>& outputs, TensorRef input,
                             const OpOptions& o) {
  Checker check("gather", *impl_);
  check.tensor(input, "input");
  check.rank(o.root, "dst");
  std::vector<Block> blocks;
  if (rank() == o.root) {
    check.matchingList(outputs, input, "the gather list", "output", "input");
    blocks = blocksOf(outputs);
  }
  return impl_->runCollective(
      "gather", signature(Opcode::kGather, input.dtype, input.numel, o.root), o,
      [input, blocks, o](Comm& c) { collectives::gather(c, input.data, input.bytes(), blocks, o.root); });
}

WorkPtr ProcessGroup::gatherInto(TensorRef output, TensorRef input, const OpOptions& o) {
  Checker check("gather_into_tensor", *impl_);
  check.tensor(input, "input");
  check.rank(o.root, "dst");
  std::vector<Block> blocks;
  if (rank() == o.root) {
    check.tensor(output, "output");
    check.sameDtype(output, input, "output and input");
    if (output.numel != input.numel * size()) {
      check.fail("the output must hold size x input = " + std::to_string(input.numel * size()) +
                 " elements, it has " + std::to_string(output.numel));
    }
    blocks = blocksOf(output, equalCounts(input.numel, size()));
  }
  return impl_->runCollective(
      "gather_into_tensor", signature(Opcode::kGather, input.dtype, input.numel, o.root), o,
      [input, blocks, o](Comm& c) { collectives::gather(c, input.data, input.bytes(), blocks, o.root); });
}

WorkPtr ProcessGroup::scatter(TensorRef output, const std::vector<TensorRef>& inputs,
                              const OpOptions& o) {
  Checker check("scatter", *impl_);
  check.tensor(output, "output");
  check.rank(o.root, "src");
  std::vector<Block> blocks;
  if (rank() == o.root) {
    check.matchingList(inputs, output, "the scatter list", "input", "output");
    blocks = blocksOf(inputs);
  }
  return impl_->runCollective(
      "scatter", signature(Opcode::kScatter, output.dtype, output.numel, o.root), o,
      [output, blocks, o](Comm& c) {
        collectives::scatter(c, blocks, output.data, output.bytes(), o.root);
      });
}

WorkPtr ProcessGroup::scatterTensor(TensorRef output, TensorRef input, const OpOptions& o) {
  Checker check("scatter_tensor", *impl_);
  check.tensor(output, "output");
  check.rank(o.root, "src");
  std::vector<Block> blocks;
  if (rank() == o.root) {
    check.tensor(input, "input");
    check.sameDtype(input, output, "input and output");
    if (input.numel != output.numel * size()) {
      check.fail("the input must hold size x output = " + std::to_string(output.numel * size()) +
                 " elements, it has " + std::to_string(input.numel));
    }
    blocks = blocksOf(input, equalCounts(output.numel, size()));
  }
  return impl_->runCollective(
      "scatter_tensor", signature(Opcode::kScatter, output.dtype, output.numel, o.root), o,
      [output, blocks, o](Comm& c) {
        collectives::scatter(c, blocks, output.data, output.bytes(), o.root);
      });
}

WorkPtr ProcessGroup::allToAll(const std::vector<TensorRef>& outputs,
                               const std::vector<TensorRef>& inputs, const OpOptions& o) {
  Checker check("all_to_all", *impl_);
  check.listSize(outputs.size(), "the output list");
  check.listSize(inputs.size(), "the input list");
  for (size_t i = 0; i < inputs.size(); ++i) {
    check.tensor(inputs[i], "input");
    check.tensor(outputs[i], "output");
    check.sameDtype(inputs[i], inputs[0], "input");
    check.sameDtype(outputs[i], inputs[0], "output and input");
  }
  DType dtype = inputs.empty() ? DType::kUInt8 : inputs[0].dtype;
  auto sends = blocksOf(inputs);
  auto recvs = blocksOf(outputs);
  check.apart(recvs, sends);
  return impl_->runCollective("all_to_all", signature(Opcode::kAllToAll, dtype, 0), o,
                              [sends, recvs](Comm& c) { collectives::allToAll(c, sends, recvs); });
}

WorkPtr ProcessGroup::allToAllSingle(TensorRef output, TensorRef input,
                                     const std::vector<int64_t>& recvCounts,
                                     const std::vector<int64_t>& sendCounts, const OpOptions& o) {
  Checker check("all_to_all_single", *impl_);
  check.tensor(output, "output");
  check.tensor(input, "input");
  check.sameDtype(output, input, "output and input");
  auto split = [&](const std::vector<int64_t>& given, TensorRef t, const char* name) {
    if (!given.empty()) {
      check.counts(given, t.numel, name);
      return given;
    }
    if (t.numel % size() != 0) {
      check.fail(std::string("without ") + name + ", the " + std::to_string(t.numel) +
                 " elements must divide evenly among " + std::to_string(size()) + " ranks");
    }
    return equalCounts(t.numel / size(), size());
  };
  auto sends = blocksOf(input, split(sendCounts, input, "input_split_sizes"));
  auto recvs = blocksOf(output, split(recvCounts, output, "output_split_sizes"));
  check.apart({Block{static_cast<uint8_t*>(output.data), output.bytes()}},
              {Block{static_cast<uint8_t*>(input.data), input.bytes()}});
  return impl_->runCollective("all_to_all_single", signature(Opcode::kAllToAll, input.dtype, 0), o,
                              [sends, recvs](Comm& c) { collectives::allToAll(c, sends, recvs); });
}

WorkPtr ProcessGroup::barrier(const OpOptions& o) {
  return impl_->runCollective("barrier", signature(Opcode::kBarrier, DType::kUInt8, 0), o,
                              [](Comm& c) { collectives::barrier(c); });
}

WorkPtr ProcessGroup::send(TensorRef data, int dst, const OpOptions& o) {
  return batchSendRecv({P2POp{P2POp::Kind::kSend, data, dst, o.tag}}, o);
}

WorkPtr ProcessGroup::recv(TensorRef data, int src, const OpOptions& o) {
  return batchSendRecv({P2POp{P2POp::Kind::kRecv, data, src, o.tag}}, o);
}

WorkPtr ProcessGroup::batchSendRecv(const std::vector<P2POp>& ops, const OpOptions& o) {
  Checker check(ops.size() == 1 ? (ops[0].kind == P2POp::Kind::kSend ? "send" : "recv")
                                : "batch_isend_irecv",
                *impl_);
  if (ops.empty()) check.fail("the operation list is empty");
  for (const auto& op : ops) {
    check.tensor(op.tensor, "tensor");
    check.rank(op.peer, op.kind == P2POp::Kind::kSend ? "dst" : "src");
    if (op.peer == rank()) check.fail("a rank cannot send to or receive from itself");
    if (op.tag < 0) check.fail("tags must be non-negative, got " + std::to_string(op.tag));
  }
  const char* name = ops.size() == 1 ? (ops[0].kind == P2POp::Kind::kSend ? "send" : "recv")
                                     : "batch_isend_irecv";
  return impl_->runPointToPoint(name, o, [ops](Transport& t, const OpContext&) {
    return postPointToPoint(t, ops);
  });
}

}  // namespace meshcomm

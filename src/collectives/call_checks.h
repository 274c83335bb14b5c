// What every public operation checks before anything is queued, and what
// follows from its arguments: the signature its messages carry, the
// algorithm that runs it (asked once, here), what ranks must agree on.
// Each family's call.h states its operations' rules with these; a failed
// check is an InvalidArgument naming the operation and the group.
//
// Thread-safety: a CallChecks is used by the one thread issuing the call.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "collectives/agreement.h"
#include "collectives/blocks.h"
#include "collectives/operations.h"
#include "collectives/tuning.h"
#include "meshcomm/types.h"
#include "transport/transport.h"

namespace meshcomm::collectives {

// The group a call is issued on, as far as its checks need it.
struct CallSite {
  const std::string& group;  // its name, for messages
  int size;
  int rank;
  Route route;
};

class CallChecks {
 public:
  CallChecks(Operation op, const CallSite& site)
      : name_(operationName(op)), info_(&operationInfo(op)), site_(site) {}
  // A call that is not an operation of the table (rank translation).
  CallChecks(const char* name, const CallSite& site) : name_(name), site_(site) {}

  const char* name() const { return name_; }

  // What ranks must agree on beyond the signature (agreement.h).
  // REQUIRES (here, in signature() and root()): made from an Operation.
  CallArguments arguments(DType dtype, uint64_t count, ReduceOp op, int root) const {
    CallArguments a;
    a.operation = info_->operation;
    a.dtype = dtype;
    a.count = count;
    a.op = op;
    a.root = root;
    return a;
  }
  MessageSignature signature(DType dtype, uint64_t count, uint64_t detail = 0,
                             ReduceOp op = ReduceOp::kSum) const {
    return MessageSignature{static_cast<uint8_t>(info_->family), static_cast<uint8_t>(dtype),
                            static_cast<uint8_t>(op), count, detail};
  }
  // What runs the call (tuning.h): a forced algorithm this group cannot run
  // fails the call before it is queued. `bytes` as chooseAlgorithm takes it.
  Algorithm algorithm(size_t bytes = 0) const {
    return chooseAlgorithm(info_->family, bytes, site_.size, site_.route);
  }

  [[noreturn]] void fail(const std::string& what) const;
  void tensor(const TensorRef& t, const char* name) const {
    if (t.numel < 0 || (t.numel > 0 && t.data == nullptr)) badTensor(t, name);
  }
  // The names make the message only when it is needed: the checks run on
  // every call, the messages almost never.
  void sameDtype(const TensorRef& a, const TensorRef& b, const char* aName,
                 const char* bName = nullptr) const {
    if (a.dtype != b.dtype) dtypesDiffer(a, b, aName, bName);
  }
  void reduceOp(ReduceOp op, DType dtype) const {
    if (!reduceOpSupports(op, dtype)) reduceOpUndefined(op, dtype);
  }
  // The operation's root, named as its callers name it (src or dst).
  void root(int r) const { rank(r, info_->rootName()); }
  void rank(int r, const char* name) const {
    if (r < 0 || r >= site_.size) notARank(r, name);
  }
  void listSize(size_t n, const char* name) const {
    if (n != static_cast<size_t>(site_.size)) wrongListSize(n, name);
  }
  // A per-rank list whose every tensor must match `like` in dtype and size.
  void matchingList(const std::vector<TensorRef>& list, const TensorRef& like,
                    const char* listName, const char* element, const char* other) const;
  // `whole` holds one `block`-sized block per rank, of one dtype.
  void equalShape(const TensorRef& whole, const char* wholeName, const TensorRef& block,
                  const char* blockName) const;
  // equalShape, and those blocks.
  BlockList equalBlocks(const TensorRef& whole, const char* wholeName, const TensorRef& block,
                        const char* blockName) const;
  // `part` is this rank's share of `whole` as `splits` divide it among
  // the ranks (the uneven all_gather and reduce_scatter): both valid, one
  // dtype, the split sizes adding up to `whole` with this rank's equal to
  // `part`, and `part` apart from `whole` or exactly its share of it.
  void unevenShare(const TensorRef& part, const char* partName, const TensorRef& whole,
                   const char* wholeName, const std::vector<int64_t>& splits,
                   const char* splitsName) const;
  // `part`, one rank's block of a collective whose other buffer is
  // `whole`, must lie apart from `whole` or be exactly this rank's block of
  // it, `ownOffset` elements in (the in-place form). Anything in between
  // would have the collective overwrite data it has yet to read.
  void apartOrOwnBlock(const TensorRef& part, const TensorRef& whole, int64_t ownOffset,
                       const char* partName, const char* wholeName) const;
  // No byte of any `outputs` block may be one of the `inputs` blocks: an
  // exchange writes some outputs before it has sent every input.
  void apart(std::span<const Block> outputs, std::span<const Block> inputs) const;
  void apart(const Block& output, const Block& input) const;
  // Per-rank element counts, none negative, adding up to `total`.
  void counts(const std::vector<int64_t>& counts, int64_t total, const char* name) const;

 private:
  [[noreturn]] void badTensor(const TensorRef& t, const char* name) const;
  [[noreturn]] void dtypesDiffer(const TensorRef& a, const TensorRef& b, const char* aName,
                                 const char* bName) const;
  [[noreturn]] void reduceOpUndefined(ReduceOp op, DType dtype) const;
  [[noreturn]] void notARank(int r, const char* name) const;
  [[noreturn]] void wrongListSize(size_t n, const char* name) const;

  const char* name_;
  const OperationInfo* info_ = nullptr;
  CallSite site_;
};

// The blocks of a list of tensors, one each.
BlockList blocksOf(const std::vector<TensorRef>& tensors);
// `t` cut into blocks of `counts` elements, in order.
BlockList blocksOf(TensorRef t, std::span<const int64_t> counts);
// A digest of split sizes, carried in a signature's detail.
uint64_t splitsDigest(const std::vector<int64_t>& values);

}  // namespace meshcomm::collectives

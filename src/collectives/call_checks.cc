#include "collectives/call_checks.h"

#include <numeric>

#include "common/mix.h"
#include "meshcomm/error.h"

namespace meshcomm::collectives {

void CallChecks::fail(const std::string& what) const {
  throw InvalidArgument(std::string(name_) + " on group " + site_.group + ": " + what);
}

void CallChecks::badTensor(const TensorRef& t, const char* name) const {
  fail(std::string(name) + (t.numel < 0 ? " has a negative element count" : " has no data"));
}

void CallChecks::dtypesDiffer(const TensorRef& a, const TensorRef& b, const char* aName,
                              const char* bName) const {
  fail(std::string(aName) + (bName != nullptr ? std::string(" and ") + bName : "") +
       " dtypes differ (" + dtypeName(a.dtype) + " vs " + dtypeName(b.dtype) + ")");
}

void CallChecks::reduceOpUndefined(ReduceOp op, DType dtype) const {
  fail(std::string("op '") + reduceOpName(op) + "' is not defined for " + dtypeName(dtype));
}

void CallChecks::notARank(int r, const char* name) const {
  fail(std::string(name) + " " + std::to_string(r) + " is not a rank of this group (size " +
       std::to_string(site_.size) + ")");
}

void CallChecks::wrongListSize(size_t n, const char* name) const {
  fail(std::string(name) + " has " + std::to_string(n) + " entries; the group has " +
       std::to_string(site_.size) + " ranks");
}

void CallChecks::matchingList(const std::vector<TensorRef>& list, const TensorRef& like,
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

void CallChecks::equalShape(const TensorRef& whole, const char* wholeName, const TensorRef& block,
                            const char* blockName) const {
  tensor(whole, wholeName);
  sameDtype(whole, block, wholeName, blockName);
  if (whole.numel != block.numel * site_.size) {
    fail(std::string("the ") + wholeName + " must hold size x " + blockName + " = " +
         std::to_string(block.numel * site_.size) + " elements, it has " +
         std::to_string(whole.numel));
  }
}

BlockList CallChecks::equalBlocks(const TensorRef& whole, const char* wholeName,
                                  const TensorRef& block, const char* blockName) const {
  equalShape(whole, wholeName, block, blockName);
  BlockList out(static_cast<size_t>(site_.size));
  const size_t bytes = block.bytes();
  auto* p = static_cast<uint8_t*>(whole.data);
  for (Block& b : out) {
    b = {p, bytes};
    p += bytes;
  }
  return out;
}

void CallChecks::unevenShare(const TensorRef& part, const char* partName, const TensorRef& whole,
                             const char* wholeName, const std::vector<int64_t>& splits,
                             const char* splitsName) const {
  tensor(part, partName);
  tensor(whole, wholeName);
  sameDtype(whole, part, wholeName, partName);
  counts(splits, whole.numel, splitsName);
  const auto me = static_cast<size_t>(site_.rank);
  if (splits[me] != part.numel) {
    fail("this rank's split size is " + std::to_string(splits[me]) + " but its " + partName +
         " has " + std::to_string(part.numel) + " elements");
  }
  const int64_t own = std::accumulate(splits.begin(), splits.begin() + site_.rank, int64_t{0});
  apartOrOwnBlock(part, whole, own, partName, wholeName);
}

void CallChecks::apartOrOwnBlock(const TensorRef& part, const TensorRef& whole, int64_t ownOffset,
                                 const char* partName, const char* wholeName) const {
  if (!rangesOverlap(part.data, part.bytes(), whole.data, whole.bytes())) return;
  const size_t own = static_cast<size_t>(ownOffset) * dtypeSize(whole.dtype);
  if (part.data == static_cast<uint8_t*>(whole.data) + own) return;
  fail(std::string("the ") + partName + " overlaps the " + wholeName +
       " without being this rank's block of it (" + std::to_string(ownOffset) +
       " elements in); pass separate buffers, or exactly that block for an in-place call");
}

void CallChecks::apart(std::span<const Block> outputs, std::span<const Block> inputs) const {
  for (const Block& o : outputs) {
    for (const Block& i : inputs) apart(o, i);
  }
}

void CallChecks::apart(const Block& output, const Block& input) const {
  if (rangesOverlap(output.data, output.bytes, input.data, input.bytes)) {
    fail("an output overlaps an input; the outputs need buffers of their own");
  }
}

void CallChecks::counts(const std::vector<int64_t>& counts, int64_t total, const char* name) const {
  listSize(counts.size(), name);
  int64_t sum = 0;
  for (int64_t c : counts) {
    if (c < 0) fail(std::string(name) + " has a negative entry");
    sum += c;
  }
  if (sum != total) {
    fail(std::string(name) + " add up to " + std::to_string(sum) +
         " elements but the tensor has " + std::to_string(total));
  }
}

BlockList blocksOf(const std::vector<TensorRef>& tensors) {
  BlockList out;
  for (const auto& t : tensors) out.push_back({static_cast<uint8_t*>(t.data), t.bytes()});
  return out;
}

BlockList blocksOf(TensorRef t, std::span<const int64_t> counts) {
  BlockList out;
  const size_t es = dtypeSize(t.dtype);
  auto* p = static_cast<uint8_t*>(t.data);
  for (int64_t c : counts) {
    out.push_back({p, static_cast<size_t>(c) * es});
    p += static_cast<size_t>(c) * es;
  }
  return out;
}

uint64_t splitsDigest(const std::vector<int64_t>& values) {
  return mixWords(values.size(), values);
}

}  // namespace meshcomm::collectives

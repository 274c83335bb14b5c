#include "ops.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace meshcomm::bench {
namespace {

constexpr size_t kAlignment = 4096;
constexpr size_t kSlotAlignment = 64;  // a cache line: slots never share one
constexpr size_t kCoverBytes = size_t{64} << 20;
constexpr size_t kMaxTotalBytes = size_t{256} << 20;
constexpr int kMinSlots = 4;

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

}  // namespace

const std::vector<CollectiveInfo>& allCollectives() {
  static const std::vector<CollectiveInfo> kAll = {
      {Operation::kAllReduce, "all_reduce", true, 1},
      {Operation::kBroadcast, "broadcast", true, 1},
      {Operation::kReduce, "reduce", true, 1},
      {Operation::kAllGatherIntoTensor, "all_gather", false, 1},
      {Operation::kReduceScatterTensor, "reduce_scatter", false, 1},
      // The uneven forms with every rank's block alike: what their split
      // sizes' agreement costs beside the even forms.
      {Operation::kAllGatherIntoTensorUneven, "all_gather_uneven", false, 1},
      {Operation::kReduceScatterTensorUneven, "reduce_scatter_uneven", false, 1},
      {Operation::kAllToAllSingle, "all_to_all", false, 1},
      {Operation::kGatherIntoTensor, "gather", false, 1},
      {Operation::kScatterTensor, "scatter", false, 1},
      {Operation::kBarrier, "barrier", false, 1},
      {Operation::kBatchIsendIrecv, "sendrecv", false, 2},
  };
  return kAll;
}

const CollectiveInfo* findCollective(std::string_view name) {
  for (const auto& c : allCollectives()) {
    if (name == c.name || name == operationName(c.operation)) return &c;
  }
  return nullptr;
}

Shape shapeFor(const CollectiveInfo& info, uint64_t bytes, DType dtype, int nranks, int rank,
               int root) {
  const auto w = static_cast<int64_t>(dtypeSize(dtype));
  const int64_t count = static_cast<int64_t>(bytes) / w;
  const int64_t n = nranks;
  const int64_t block = count / n;
  const double share = static_cast<double>(n - 1) / static_cast<double>(n);
  Shape s;
  switch (info.operation) {
    case Operation::kBarrier:
      return s;
    case Operation::kAllReduce:
    case Operation::kBroadcast:
    case Operation::kReduce:
    case Operation::kBatchIsendIrecv:
      s.sendCount = s.recvCount = s.paramCount = count;
      s.algBytes = static_cast<double>(count * w);
      s.busFactor = info.operation == Operation::kAllReduce ? 2.0 * share : 1.0;
      break;
    default: {
      // The block collectives: one block in, n out (gathers), n in, one out
      // (scatters) or n both ways; the count is one block, the bandwidth
      // counts all n blocks.
      const bool gathers = info.operation == Operation::kAllGatherIntoTensor ||
                           info.operation == Operation::kAllGatherIntoTensorUneven ||
                           info.operation == Operation::kGatherIntoTensor;
      const bool scatters = info.operation == Operation::kReduceScatterTensor ||
                            info.operation == Operation::kReduceScatterTensorUneven ||
                            info.operation == Operation::kScatterTensor;
      s.sendCount = gathers ? block : block * n;
      s.recvCount = scatters ? block : block * n;
      s.paramCount = block;
      s.algBytes = static_cast<double>(block * n * w);
      s.busFactor = share;
      break;
    }
  }
  s.printedBytes = static_cast<uint64_t>(std::max(s.sendCount, s.recvCount) * w);
  // Buffers that exist only at the root are not allocated elsewhere.
  if (info.operation == Operation::kGatherIntoTensor && rank != root) s.recvCount = 0;
  if (info.operation == Operation::kScatterTensor && rank != root) s.sendCount = 0;
  return s;
}

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  void* p = std::aligned_alloc(kAlignment, roundUp(bytes, kAlignment));
  if (p == nullptr) throw std::bad_alloc();
  data_.reset(static_cast<std::byte*>(p));
}

void AlignedBuffer::Free::operator()(std::byte* p) const { std::free(p); }

int defaultSlotCount(const Shape& shape, DType dtype, bool inPlace) {
  const size_t w = dtypeSize(dtype);
  size_t slotBytes = roundUp(static_cast<size_t>(shape.sendCount) * w, kSlotAlignment);
  if (!inPlace) slotBytes += roundUp(static_cast<size_t>(shape.recvCount) * w, kSlotAlignment);
  if (slotBytes == 0) return 1;
  size_t cover = (kCoverBytes + slotBytes - 1) / slotBytes;
  size_t slots = std::max<size_t>(cover, kMinSlots);
  slots = std::min(slots, std::max<size_t>(1, kMaxTotalBytes / slotBytes));
  return static_cast<int>(std::min<size_t>(slots, 1 << 24));
}

Slots::Slots(const Shape& shape, DType dtype, bool inPlace, int count)
    : dtype_(dtype),
      count_(count),
      inPlace_(inPlace),
      sendCount_(shape.sendCount),
      recvCount_(inPlace ? shape.sendCount : shape.recvCount) {
  const size_t w = dtypeSize(dtype);
  sendStride_ = roundUp(static_cast<size_t>(sendCount_) * w, kSlotAlignment);
  send_ = AlignedBuffer(sendStride_ * static_cast<size_t>(count));
  if (!inPlace_) {
    recvStride_ = roundUp(static_cast<size_t>(recvCount_) * w, kSlotAlignment);
    recv_ = AlignedBuffer(recvStride_ * static_cast<size_t>(count));
  }
}

TensorRef Slots::at(const AlignedBuffer& buf, int64_t numel, int slot) const {
  TensorRef t;
  t.dtype = dtype_;
  t.numel = numel;
  if (numel > 0) {
    size_t stride = &buf == &send_ ? sendStride_ : recvStride_;
    t.data = buf.data() + stride * static_cast<size_t>(slot);
  }
  return t;
}

TensorRef Slots::input(int slot) const { return at(send_, sendCount_, slot); }

TensorRef Slots::output(int slot) const {
  return inPlace_ ? at(send_, sendCount_, slot) : at(recv_, recvCount_, slot);
}

void Slots::fillAll(ValueClass cls, int rank) {
  TensorRef first = input(0);
  fillValues(first, cls, rank, 0);
  for (int k = 1; k < count_; ++k) {
    TensorRef t = input(k);
    if (t.bytes() > 0) std::memcpy(t.data, first.data, t.bytes());
  }
  if (!inPlace_ && recv_.size() > 0) std::memset(recv_.data(), 0, recv_.size());
}

WorkPtr issue(const CollectiveInfo& info, ProcessGroup& group, const Slots& slots, int slot,
              const OpOptions& options) {
  TensorRef in = slots.input(slot);
  TensorRef out = slots.output(slot);
  switch (info.operation) {
    case Operation::kAllReduce: return group.allReduce(in, options);
    case Operation::kBroadcast: return group.broadcast(in, options);
    case Operation::kReduce: return group.reduce(in, options);
    case Operation::kAllGatherIntoTensor: return group.allGatherIntoTensor(out, in, options);
    case Operation::kReduceScatterTensor: return group.reduceScatterTensor(out, in, options);
    case Operation::kAllGatherIntoTensorUneven:
      return group.allGatherIntoTensorUneven(out, in, std::vector<int64_t>(group.size(), in.numel), options);
    case Operation::kReduceScatterTensorUneven:
      return group.reduceScatterTensorUneven(out, in, std::vector<int64_t>(group.size(), out.numel), options);
    case Operation::kAllToAllSingle: return group.allToAllSingle(out, in, {}, {}, options);
    case Operation::kGatherIntoTensor: return group.gatherIntoTensor(out, in, options);
    case Operation::kScatterTensor: return group.scatterTensor(out, in, options);
    case Operation::kBarrier: return group.barrier(options);
    case Operation::kBatchIsendIrecv: {
      // A ring: send to the next rank, receive from the previous one.
      const int n = group.size();
      const int r = group.rank();
      std::vector<P2POp> ops = {
          {P2POp::Kind::kSend, in, (r + 1) % n, options.tag},
          {P2POp::Kind::kRecv, out, (r + n - 1) % n, options.tag},
      };
      return group.batchIsendIrecv(ops, options);
    }
    default:
      break;
  }
  return nullptr;
}

void prepareCheck(const CollectiveInfo& info, Slots& slots, ValueClass cls, int rank, int root) {
  TensorRef in = slots.input(0);
  TensorRef out = slots.output(0);
  if (info.operation == Operation::kBroadcast && rank != root) {
    poison(in);  // only the root's data may arrive
    return;
  }
  fillValues(in, cls, rank, 0);
  if (!info.inPlace) poison(out);
}

CheckResult verify(const CollectiveInfo& info, const Slots& slots, ValueClass cls, ReduceOp op,
                   int rank, int nranks, int root) {
  TensorRef out = slots.output(0);
  CheckResult result;
  // Block b of an n-block buffer, as its own tensor.
  auto blockOf = [](TensorRef t, int64_t block, int b) {
    TensorRef part = t;
    part.numel = block;
    part.data = static_cast<std::byte*>(t.data) + static_cast<size_t>(b * block) * dtypeSize(t.dtype);
    return part;
  };
  const int64_t block = out.numel / std::max(1, nranks);
  switch (info.operation) {
    case Operation::kAllReduce:
      return expectReduced(out, cls, op, nranks, 0);
    case Operation::kBroadcast:
      return expectValues(out, cls, root, 0);
    case Operation::kReduce:
      // Non-roots must still hold their own input.
      return rank == root ? expectReduced(out, cls, op, nranks, 0)
                          : expectValues(out, cls, rank, 0);
    case Operation::kAllGatherIntoTensor:
    case Operation::kAllGatherIntoTensorUneven:
    case Operation::kGatherIntoTensor:
      if (info.operation == Operation::kGatherIntoTensor && rank != root) return result;
      for (int j = 0; j < nranks; ++j) result.merge(expectValues(blockOf(out, block, j), cls, j, 0));
      return result;
    case Operation::kReduceScatterTensor:
    case Operation::kReduceScatterTensorUneven:
      return expectReduced(out, cls, op, nranks, rank * out.numel);
    case Operation::kAllToAllSingle:
      for (int j = 0; j < nranks; ++j) {
        result.merge(expectValues(blockOf(out, block, j), cls, j, rank * block));
      }
      return result;
    case Operation::kScatterTensor:
      return expectValues(out, cls, root, rank * out.numel);
    case Operation::kBatchIsendIrecv:
      return expectValues(out, cls, (rank + nranks - 1) % nranks, 0);
    default:
      return result;
  }
}

}  // namespace meshcomm::bench

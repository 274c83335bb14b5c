#include "ops.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <new>
#include <tuple>
#include <type_traits>

#include "runtime/operation_methods.h"

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
  static const std::vector<CollectiveInfo> kAll = [] {
    std::vector<CollectiveInfo> all;
    for (const OperationInfo& op : kOperations) {
      if (op.benchName == nullptr) continue;
      const bool pointToPoint = op.family == Opcode::kPointToPoint;
      // One tensor serves as input and output in the whole-buffer
      // collectives; a send and its receive need buffers of their own, and
      // a peer to go to.
      all.push_back({op.operation, op.benchName, op.layout == Layout::kWhole && !pointToPoint,
                     pointToPoint ? 2 : 1});
    }
    return all;
  }();
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
  const OperationInfo& op = operationInfo(info.operation);
  const auto w = static_cast<int64_t>(dtypeSize(dtype));
  const int64_t count = static_cast<int64_t>(bytes) / w;
  const int64_t n = nranks;
  const int64_t block = count / n;
  const double share = static_cast<double>(n - 1) / static_cast<double>(n);
  Shape s;
  switch (op.layout) {
    case Layout::kNone:
      return s;
    case Layout::kWhole:
      s.sendCount = s.recvCount = s.paramCount = count;
      s.algBytes = static_cast<double>(count * w);
      // all_reduce's bus carries the data twice (reduce-scatter, then gather).
      s.busFactor = op.reduces && !op.rooted() ? 2.0 * share : 1.0;
      break;
    case Layout::kGathers:
    case Layout::kScatters:
    case Layout::kExchanges:
      // One block in, n out (gathers), n in, one out (scatters) or n both
      // ways; the count is one block, the bandwidth counts all n blocks.
      s.sendCount = op.layout == Layout::kGathers ? block : block * n;
      s.recvCount = op.layout == Layout::kScatters ? block : block * n;
      s.paramCount = block;
      s.algBytes = static_cast<double>(block * n * w);
      s.busFactor = share;
      break;
  }
  s.printedBytes = static_cast<uint64_t>(std::max(s.sendCount, s.recvCount) * w);
  // The per-rank side of a rooted gather or scatter exists at the root alone.
  if (op.rooted() && rank != root) {
    if (op.layout == Layout::kGathers) s.recvCount = 0;
    if (op.layout == Layout::kScatters) s.sendCount = 0;
  }
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

namespace {

// One argument of kind Kind (runtime/operation_methods.h) for a call on
// slot buffers `in` and `out`. Lists are the tensors' equal blocks; split
// sizes are equal; point to point is a ring: send to the next rank,
// receive from the previous one.
template <class Kind>
auto argumentFor(ProcessGroup& group, TensorRef in, TensorRef out, const OpOptions& options) {
  const int n = group.size();
  const int r = group.rank();
  auto blocks = [n](TensorRef t) {
    std::vector<TensorRef> list(static_cast<size_t>(n), t);
    const size_t blockBytes = static_cast<size_t>(t.numel / n) * dtypeSize(t.dtype);
    for (size_t i = 0; i < list.size(); ++i) {
      list[i].numel = t.numel / n;
      list[i].data = static_cast<std::byte*>(t.data) + i * blockBytes;
    }
    return list;
  };
  if constexpr (std::is_same_v<Kind, argument::Data> || std::is_same_v<Kind, argument::Sent> ||
                std::is_same_v<Kind, argument::Input>) {
    return in;
  } else if constexpr (std::is_same_v<Kind, argument::Output>) {
    return out;
  } else if constexpr (std::is_same_v<Kind, argument::Outputs>) {
    return blocks(out);
  } else if constexpr (std::is_same_v<Kind, argument::Inputs>) {
    return blocks(in);
  } else if constexpr (std::is_same_v<Kind, argument::Splits>) {
    return std::vector<int64_t>(static_cast<size_t>(n), std::max(in.numel, out.numel) / n);
  } else if constexpr (std::is_same_v<Kind, argument::RecvSplits> ||
                       std::is_same_v<Kind, argument::SendSplits>) {
    return std::vector<int64_t>{};
  } else if constexpr (std::is_same_v<Kind, argument::Dst>) {
    return (r + 1) % n;
  } else if constexpr (std::is_same_v<Kind, argument::Src>) {
    return (r + n - 1) % n;
  } else {
    static_assert(std::is_same_v<Kind, argument::P2POps>, "an argument kind the bench cannot make");
    return std::vector<P2POp>{{P2POp::Kind::kSend, in, (r + 1) % n, options.tag},
                              {P2POp::Kind::kRecv, out, (r + n - 1) % n, options.tag}};
  }
}

template <class Method, class... Kinds>
WorkPtr call(ProcessGroup& group, [[maybe_unused]] TensorRef in, [[maybe_unused]] TensorRef out,
             const OpOptions& options, std::tuple<Kinds...>) {
  return (group.*Method::kPointer)(argumentFor<Kinds>(group, in, out, options)..., options);
}

using Issuer = WorkPtr (*)(ProcessGroup&, TensorRef, TensorRef, const OpOptions&);

// Each operation's issuer, at its index in the operation table (which
// operation_methods.h follows), so a timed call costs one indirect call.
template <size_t... I>
constexpr std::array<Issuer, sizeof...(I)> issuers(std::index_sequence<I...>) {
  return {[](ProcessGroup& group, TensorRef in, TensorRef out, const OpOptions& options) {
    using Method = std::tuple_element_t<I, OperationMethods>;
    return call<Method>(group, in, out, options, typename Method::ArgumentKinds{});
  }...};
}
constexpr auto kIssuers = issuers(std::make_index_sequence<std::tuple_size_v<OperationMethods>>());

}  // namespace

WorkPtr issue(const CollectiveInfo& info, ProcessGroup& group, const Slots& slots, int slot,
              const OpOptions& options) {
  return kIssuers[static_cast<size_t>(info.operation)](group, slots.input(slot),
                                                       slots.output(slot), options);
}

void prepareCheck(const CollectiveInfo& info, Slots& slots, ValueClass cls, int rank, int root) {
  const OperationInfo& op = operationInfo(info.operation);
  TensorRef in = slots.input(0);
  TensorRef out = slots.output(0);
  if (op.layout == Layout::kWhole && op.root == Root::kSrc && rank != root) {
    poison(in);  // only the root's data may arrive
    return;
  }
  fillValues(in, cls, rank, 0);
  if (!info.inPlace) poison(out);
}

CheckResult verify(const CollectiveInfo& info, const Slots& slots, ValueClass cls,
                   ReduceOp reduceOp, int rank, int nranks, int root) {
  const OperationInfo& op = operationInfo(info.operation);
  TensorRef out = slots.output(0);
  CheckResult result;
  // Block b of an n-block buffer, as its own tensor.
  auto blockOf = [](TensorRef t, int64_t block, int b) {
    TensorRef part = t;
    part.numel = block;
    part.data =
        static_cast<std::byte*>(t.data) + static_cast<size_t>(b * block) * dtypeSize(t.dtype);
    return part;
  };
  // Block j of the output holds rank j's data, `firstIndex` elements into it.
  auto blockPerRank = [&](int64_t firstIndex) {
    const int64_t block = out.numel / std::max(1, nranks);
    for (int j = 0; j < nranks; ++j) {
      result.merge(expectValues(blockOf(out, block, j), cls, j, firstIndex));
    }
    return result;
  };
  switch (op.layout) {
    case Layout::kNone:
      return result;
    case Layout::kWhole:
      // The bench's sendrecv is a ring: each rank hears from the previous.
      if (op.family == Opcode::kPointToPoint) {
        return expectValues(out, cls, (rank + nranks - 1) % nranks, 0);
      }
      if (!op.reduces) return expectValues(out, cls, root, 0);  // the root's data
      // A rooted reduction's other ranks must still hold their own input.
      if (op.rooted() && rank != root) return expectValues(out, cls, rank, 0);
      return expectReduced(out, cls, reduceOp, nranks, 0);
    case Layout::kGathers:
      if (op.rooted() && rank != root) return result;
      return blockPerRank(0);
    case Layout::kScatters:
      // This rank's block of the reduced whole, or of the root's input.
      return op.reduces ? expectReduced(out, cls, reduceOp, nranks, rank * out.numel)
                        : expectValues(out, cls, root, rank * out.numel);
    case Layout::kExchanges:
      return blockPerRank(rank * (out.numel / std::max(1, nranks)));
  }
  return result;
}

}  // namespace meshcomm::bench

// reduce among the ranks of one host, on the shared-memory segment.
#include <algorithm>
#include <vector>

#include "host/shm/variants.h"
#include "host/shm/rounds.h"
#include "reduce/reduce.h"

namespace meshcomm::host::shm {

// With the agreement's records, the first round of each path carries them,
// and every rank, the leaves too, judges them before the root reads a byte.
void reduce(ShmOp& op, void* data, size_t count, DType dtype, ReduceOp rop, int root,
            const HostCollectives::Agreement* agreement) {
  reduce(op, data, data, count, dtype, rop, root, agreement);
}

void reduce(ShmOp& op, const void* data, void* result, size_t count, DType dtype, ReduceOp rop,
            int root, const HostCollectives::Agreement* agreement) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  auto* out = static_cast<uint8_t*>(result);
  const size_t es = dtypeSize(dtype);
  const int p = op.size();
  const int me = op.rank();
  const bool isRoot = me == root;
  // Two ranks with cores of their own: the leaf copies in ahead of the
  // root, which reduces each round as it lands, instead of both reducing
  // a slice and the root copying both out (1 MiB 0.71x, 16 MiB 0.57x the
  // time; docs/tuning.md).
  const size_t total = count * es;
  if (p == 2 && roundsAreCheap(op) && !fitsInline(total)) {
    reduceAtRoot(op, data, result, count, dtype, rop, root, aheadRoundBytes(op, total), agreement);
    return;
  }
  if (fitsInline(total)) {
    // The mirror image of a small broadcast: the leaves publish and return,
    // up to kDepth rounds ahead of the root.
    op.beginCell();
    copy(op.inlineData(), bytes, total);
    publishWithRecords(op, agreement);
    if (!isRoot) return;
    alignas(64) uint8_t own[ShmDomain::kInlineBytes];  // see reduceInlineLines
    copy(own, bytes, total);
    op.waitAll();
    reduceInlineLines(op, own, 0, out, count, dtype, rop);
    return;
  }
  // Every rank reduces its slice, the root collects the slices: the root
  // does 1/P of the reduction instead of all of it.
  const size_t chunk = std::max<size_t>(1, op.chunkBytes() / es);
  for (size_t off = 0; off < count; off += chunk) {
    const size_t n = std::min(chunk, count - off);
    const std::vector<size_t> slice = sliceOffsets(n, es, p);
    reduceOwnSlice(op, bytes + off * es, n, dtype, rop, slice, off == 0 ? agreement : nullptr);
    if (isRoot) copySlicesOut(op, out + off * es, es, slice);
  }
}

void reduceAtRoot(ShmOp& op, const void* data, void* result, size_t count, DType dtype,
                  ReduceOp rop, int root) {
  reduceAtRoot(op, data, result, count, dtype, rop, root, op.slotBytes());
}

void reduceAtRoot(ShmOp& op, const void* data, void* result, size_t count, DType dtype,
                  ReduceOp rop, int root, size_t roundBytes,
                  const HostCollectives::Agreement* agreement) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  auto* out = static_cast<uint8_t*>(result);
  const size_t es = dtypeSize(dtype);
  if (fitsInline(count * es)) {
    // The small reduce already works so, through the flag lines.
    reduce(op, data, result, count, dtype, rop, root, agreement);
    return;
  }
  const bool isRoot = op.rank() == root;
  const void* onStack[kStackInputs];
  std::vector<const void*> heap;
  const void** inputs = inputArray(onStack, heap, op.size());
  // The leaves' rounds need nobody's data: they run as many rounds ahead
  // of the root as the parts allow (see broadcast).
  const size_t parts = partsFor(op, roundBytes);
  const size_t chunk = std::max<size_t>(1, std::min(roundBytes, op.slotPartBytes(parts)) / es);
  for (size_t off = 0; off < count; off += chunk) {
    const size_t n = std::min(chunk, count - off);
    const HostCollectives::Agreement* records = off == 0 ? agreement : nullptr;
    if (!isRoot) {
      copyIn(op, op.begin(parts), bytes + off * es, n * es);
      publishWithRecords(op, records);
      continue;  // the root's waits check the leaves, as in a broadcast
    }
    op.beginReading(parts);
    publishWithRecords(op, records);
    op.waitAll();
    // The root's own data first, so that `result` may be its `data`.
    size_t k = 0;
    inputs[k++] = bytes + off * es;
    for (int i = 0; i < op.size(); ++i) {
      if (i != root) inputs[k++] = op.slot(i);
    }
    reduce::reduceInto(rop, dtype, out + off * es, inputs, k, n);
  }
}

}  // namespace meshcomm::host::shm

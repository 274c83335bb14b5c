// reduce_scatter among the ranks of one host, on the shared-memory segment.
#include <algorithm>
#include <vector>

#include "host/shm/variants.h"
#include "host/shm/rounds.h"
#include "common/check.h"
#include "reduce/reduce.h"

namespace meshcomm::host::shm {
namespace {

// reduce_scatter of at most kInlineBytes in all: the whole input travels in
// the flag line. Reducing this rank's part from a private copy (see
// reduceInlineLines) also keeps an in-place output from aliasing an input.
void inlineReduceScatter(ShmOp& op, const uint8_t* in, const BlockOffsets& offs,
                         void* output, DType dtype, ReduceOp rop,
                         const HostCollectives::Agreement* agreement) {
  const size_t es = dtypeSize(dtype);
  const auto me = static_cast<size_t>(op.rank());
  alignas(64) uint8_t own[ShmDomain::kInlineBytes];
  copy(own, in, offs.back() * es);
  op.beginCell();
  copy(op.inlineData(), in, offs.back() * es);
  publishWithRecords(op, agreement);
  op.waitAll();
  reduceInlineLines(op, own, offs[me] * es, output, offs[me + 1] - offs[me], dtype, rop);
}

}  // namespace

// With records, the output is written only after they are judged: the
// first round publishes them with the first pieces and reduces nothing
// before every rank's is in.
void reduceScatter(ShmOp& op, const void* input, std::span<const size_t> blockCounts,
                   void* output, DType dtype, ReduceOp rop, const HostCollectives::Agreement* agreement) {
  const auto* in = static_cast<const uint8_t*>(input);
  const size_t es = dtypeSize(dtype);
  const int p = op.size();
  const int me = op.rank();
  const BlockOffsets offs = offsetsOf(blockCounts);
  if (fitsInline(offs.back() * es)) {
    inlineReduceScatter(op, in, offs, output, dtype, rop, agreement);
    return;
  }
  const size_t largest = *std::max_element(blockCounts.begin(), blockCounts.end());
  // Each round moves `chunk` elements of every block; block j's piece sits
  // at region j of the slot. A region is a p-th of the chunk, or what the
  // largest block needs if less: then the round takes a part of the slot
  // area, and the calls rotate through its parts (partsFor).
  const size_t region =
      std::max(kAlign, std::min(alignDown(op.chunkBytes() / static_cast<size_t>(p)),
                                alignUp(largest * es)));
  const size_t chunk = std::max<size_t>(1, region / es);
  const size_t parts = partsFor(op, region * static_cast<size_t>(p));
  MESHCOMM_CHECK(chunk * es * static_cast<size_t>(p) <= op.chunkBytes(),
                 "shared-memory slot too small for " << p << " ranks");
  const size_t rounds = roundsFor(largest, chunk);
  std::vector<const void*> inputs(static_cast<size_t>(p));
  // This rank's own block is reduced straight from the input, unless the
  // output overlaps it (in place), which the kernels allow only as their
  // first input.
  const size_t ownBytes = blockCounts[static_cast<size_t>(me)] * es;
  const bool ownFromInput =
      !rangesOverlap(output, ownBytes, in + offs[static_cast<size_t>(me)] * es, ownBytes);
  for (size_t k = 0; k < rounds; ++k) {
    const size_t first = k * chunk;
    uint8_t* mine = op.begin(parts);
    for (int j = 0; j < p; ++j) {
      size_t count = blockCounts[static_cast<size_t>(j)];
      if ((j == me && ownFromInput) || first >= count) continue;
      copyIn(op, mine + static_cast<size_t>(j) * chunk * es, in + (offs[static_cast<size_t>(j)] + first) * es,
           std::min(chunk, count - first) * es);
    }
    publishWithRecords(op, k == 0 ? agreement : nullptr);
    op.waitAll();
    size_t myCount = blockCounts[static_cast<size_t>(me)];
    if (first >= myCount) continue;
    for (int i = 0; i < p; ++i) {
      inputs[static_cast<size_t>(i)] = op.slot(i) + static_cast<size_t>(me) * chunk * es;
    }
    if (ownFromInput) inputs[static_cast<size_t>(me)] = in + (offs[static_cast<size_t>(me)] + first) * es;
    reduce::reduceInto(rop, dtype, static_cast<uint8_t*>(output) + first * es, inputs.data(),
                       inputs.size(), std::min(chunk, myCount - first));
  }
}

}  // namespace meshcomm::host::shm

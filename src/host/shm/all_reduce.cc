// all_reduce among the ranks of one host, on the shared-memory segment:
// one-shot, slice-parallel reduce-scatter, or single copies out of the
// peers' buffers (variants.h says which is which).
#include <algorithm>
#include <cstring>
#include <vector>

#include "host/shm/variants.h"
#include "host/shm/rounds.h"
#include "reduce/reduce.h"
#include "transport/shm/single_copy.h"

namespace meshcomm::host::shm {
namespace {

// One round of the one-shot all-reduce on `count` elements at `data`.
void oneShotRound(ShmOp& op, uint8_t* data, size_t count, DType dtype, ReduceOp rop,
                  bool useInline) {
  const size_t bytes = count * dtypeSize(dtype);
  alignas(64) uint8_t own[ShmDomain::kInlineBytes];  // see reduceInlineLines
  uint8_t* mine;
  if (useInline) {
    // The payload travels in the flag line: the slot is left alone, so
    // the round claims none (140 of an 8-byte call's 1,860 instructions).
    op.beginReading();
    copy(own, data, bytes);
    mine = op.inlineData();
  } else {
    mine = op.begin(partsFor(op, bytes));  // rotates (partsFor)
  }
  copyIn(op, mine, data, bytes);
  op.publish();
  op.waitAll();
  if (useInline) {
    reduceInlineLines(op, own, 0, data, count, dtype, rop);
    return;
  }
  const void* onStack[kStackInputs];
  std::vector<const void*> heap;
  const void** in = inputArray(onStack, heap, op.size());
  for (int i = 0; i < op.size(); ++i) in[i] = op.slot(i);
  reduce::reduceInto(rop, dtype, data, in, static_cast<size_t>(op.size()), count);
}

// Publishes this rank's buffer address (and passes the round's signature
// check), returning every rank's.
std::vector<uintptr_t> exchangeAddresses(ShmOp& op, const void* mine) {
  op.beginReading();
  auto address = reinterpret_cast<uintptr_t>(mine);
  std::memcpy(op.inlineData(), &address, sizeof(address));
  op.publish();
  op.waitAll();
  std::vector<uintptr_t> out(static_cast<size_t>(op.size()));
  for (int i = 0; i < op.size(); ++i) std::memcpy(&out[static_cast<size_t>(i)], op.inlineOf(i), sizeof(uintptr_t));
  return out;
}

// Reduce-scatter + all-gather straight out of the peers' buffers. Rank r
// owns slice r: it reads slice r of every peer (in cache-sized pieces),
// reduces them into its own buffer in place, and once every slice is
// final, reads the other slices from their owners. Each rank moves about
// 2.5x the buffer through memory (P=2), against about 5.5x through the
// segment. The peers' buffers must stay put until every reader is done,
// hence the closing round.
void singleCopyAllReduce(ShmOp& op, uint8_t* data, size_t count, DType dtype, ReduceOp rop,
                         ScratchArena& scratch) {
  const int p = op.size();
  const int me = op.rank();
  const size_t es = dtypeSize(dtype);
  const std::vector<size_t> slice = sliceOffsets(count, es, p);
  std::vector<uintptr_t> peers = exchangeAddresses(op, data);
  std::vector<pid_t> pids(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) pids[static_cast<size_t>(i)] = op.domain().pidOf(i);

  // Pieces of 256 KiB: larger than this and the staged copies fall out of
  // cache, smaller and the per-call cost of pinning pages dominates.
  const size_t piece = std::max<size_t>(1, (size_t{256} << 10) / es);
  uint8_t* staged = scratch.get(Scratch::kRecv, piece * es * static_cast<size_t>(p));
  std::vector<const void*> inputs(static_cast<size_t>(p));
  const size_t first = slice[static_cast<size_t>(me)];
  const size_t last = slice[static_cast<size_t>(me) + 1];
  for (size_t off = first; off < last; off += piece) {
    const size_t n = std::min(piece, last - off);
    // This rank's own values first: the output must be inputs[0].
    inputs[0] = data + off * es;
    size_t k = 1;
    for (int i = 0; i < p; ++i) {
      if (i == me) continue;
      uint8_t* to = staged + (k - 1) * piece * es;
      single_copy::read(pids[static_cast<size_t>(i)], peers[static_cast<size_t>(i)] + off * es, to,
                        n * es);
      inputs[k++] = to;
    }
    reduce::reduceInto(rop, dtype, data + off * es, inputs.data(), inputs.size(), n);
  }
  barrier(op);  // every slice is final
  for (int i = 0; i < p; ++i) {
    if (i == me) continue;
    size_t from = slice[static_cast<size_t>(i)] * es;
    size_t to = slice[static_cast<size_t>(i) + 1] * es;
    if (to > from) {
      single_copy::read(pids[static_cast<size_t>(i)], peers[static_cast<size_t>(i)] + from,
                        data + from, to - from);
    }
  }
  barrier(op);  // nobody reads this rank's buffer any more
}

}  // namespace

void allReduce(ShmOp& op, void* data, size_t count, DType dtype, ReduceOp rop, Algorithm algo,
               ScratchArena& scratch) {
  auto* bytes = static_cast<uint8_t*>(data);
  const size_t es = dtypeSize(dtype);
  const size_t total = count * es;
  if (fitsInline(total)) {
    oneShotRound(op, bytes, count, dtype, rop, /*useInline=*/true);
    return;
  }
  if (algo == Algorithm::kShmSingleCopy && op.domain().singleCopy()) {
    singleCopyAllReduce(op, bytes, count, dtype, rop, scratch);
    return;
  }
  const size_t chunk = std::max<size_t>(1, op.chunkBytes() / es);
  if (algo == Algorithm::kShmOneShot) {
    for (size_t off = 0; off < count; off += chunk) {
      oneShotRound(op, bytes + off * es, std::min(chunk, count - off), dtype, rop, false);
    }
    return;
  }
  for (size_t off = 0; off < count; off += chunk) {
    const size_t n = std::min(chunk, count - off);
    uint8_t* part = bytes + off * es;
    const std::vector<size_t> slice = sliceOffsets(n, es, op.size());
    reduceOwnSlice(op, part, n, dtype, rop, slice);
    copySlicesOut(op, part, es, slice);
  }
}

}  // namespace meshcomm::host::shm

#include "host/shm/rounds.h"

#include "reduce/reduce.h"

namespace meshcomm::host::shm {
namespace {

// Pointers to the same offset of every rank's slot of the current round.
std::vector<const void*> slotsAt(ShmOp& op, size_t offset) {
  std::vector<const void*> out(static_cast<size_t>(op.size()));
  for (int i = 0; i < op.size(); ++i) out[static_cast<size_t>(i)] = op.slot(i) + offset;
  return out;
}

}  // namespace

void reduceInlineLines(ShmOp& op, const uint8_t* own, size_t offset, void* out, size_t count,
                       DType dtype, ReduceOp rop) {
  const void* onStack[kStackInputs];
  std::vector<const void*> heap;
  const void** in = inputArray(onStack, heap, op.size());
  for (int i = 0; i < op.size(); ++i) in[i] = op.inlineOf(i) + offset;
  in[op.rank()] = own + offset;
  reduce::reduceInto(rop, dtype, out, in, static_cast<size_t>(op.size()), count);
}

void reduceOwnSlice(ShmOp& op, const uint8_t* part, size_t n, DType dtype, ReduceOp rop,
                    const std::vector<size_t>& slice, const HostCollectives::Agreement* agreement) {
  const size_t es = dtypeSize(dtype);
  const auto me = static_cast<size_t>(op.rank());
  const size_t mySliceBytes = slice[me] * es;
  const size_t mySliceEnd = slice[me + 1] * es;
  // Only the slices the others reduce go through the slot: this rank reads
  // its own straight from `part`.
  uint8_t* mine = op.begin();
  copyIn(op, mine, part, mySliceBytes);
  copyIn(op, mine + mySliceEnd, part + mySliceEnd, n * es - mySliceEnd);
  publishWithRecords(op, agreement);
  op.waitAll();
  std::vector<const void*> inputs = slotsAt(op, mySliceBytes);
  inputs[me] = part + mySliceBytes;
  uint8_t* reduced = op.begin();
  reduce::reduceInto(rop, dtype, reduced + mySliceBytes, inputs.data(), inputs.size(),
                     slice[me + 1] - slice[me]);
  op.publish();
}

void copySlicesOut(ShmOp& op, uint8_t* part, size_t elementSize, const std::vector<size_t>& slice) {
  op.waitAll();
  for (int i = 0; i < op.size(); ++i) {
    size_t from = slice[static_cast<size_t>(i)] * elementSize;
    size_t to = slice[static_cast<size_t>(i) + 1] * elementSize;
    copy(part + from, op.slot(i) + from, to - from);
  }
}

std::vector<size_t> sliceOffsets(size_t count, size_t elementSize, int parts) {
  size_t perLine = std::max<size_t>(1, kAlign / elementSize);
  size_t lines = ceilDiv(count, perLine);
  std::vector<size_t> split = evenSplit(lines, parts);
  std::vector<size_t> offs(static_cast<size_t>(parts) + 1, 0);
  for (int i = 0; i < parts; ++i) {
    offs[static_cast<size_t>(i) + 1] =
        std::min(count, offs[static_cast<size_t>(i)] + split[static_cast<size_t>(i)] * perLine);
  }
  return offs;
}

void shareRecordsInRound(ShmOp& op, const HostCollectives::Agreement& agreement) {
  agreement.write(reinterpret_cast<int64_t*>(op.ownCell()));
  op.publishWord(agreement.digest);
  op.waitAll();
  constexpr int kOnStack = 64;  // ranks whose records and digests are listed on the stack
  const int64_t* recordsOnStack[kOnStack];
  uint64_t digestsOnStack[kOnStack];
  std::vector<const int64_t*> recordsOnHeap;
  std::vector<uint64_t> digestsOnHeap;
  const int64_t** records = recordsOnStack;
  uint64_t* digests = digestsOnStack;
  const auto p = static_cast<size_t>(op.size());
  if (p > kOnStack) {
    recordsOnHeap.resize(p);
    digestsOnHeap.resize(p);
    records = recordsOnHeap.data();
    digests = digestsOnHeap.data();
  }
  for (int local = 0; local < op.size(); ++local) {
    const auto r = static_cast<size_t>(op.domain().groupRank(local));
    records[r] = reinterpret_cast<const int64_t*>(op.cell(local));
    digests[r] = op.wordOf(local);
  }
  agreement.read(HostCollectives::Records(records, p), HostCollectives::Digests(digests, p));
}

void barrier(ShmOp& op) {
  op.beginReading();  // nothing goes into the slot
  op.publish();
  op.waitAll();
}

}  // namespace meshcomm::host::shm

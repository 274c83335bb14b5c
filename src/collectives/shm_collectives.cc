#include "collectives/shm_collectives.h"

#include <algorithm>
#include <cstring>

#include "collectives/blocks.h"
#include "collectives/tuning.h"
#include "common/check.h"
#include "common/stream_copy.h"
#include "reduce/reduce.h"
#include "transport/shm/single_copy.h"

namespace meshcomm::collectives::shm {
namespace {

constexpr size_t kAlign = 64;  // slices and regions start on cache lines

// memmove: a rank's own block may be its input (in-place calls).
void copy(void* to, const void* from, size_t bytes) {
  if (bytes > 0 && to != from) std::memmove(to, from, bytes);
}

// A copy into an output the collective has not read: streamed past the
// caches when `stream` (streamOutput() of the call's output size).
void copyOut(void* to, const void* from, size_t bytes, bool stream) {
  if (stream && !rangesOverlap(to, bytes, from, bytes)) {
    streamCopy(to, from, bytes);
  } else {
    copy(to, from, bytes);
  }
}

size_t totalBytes(const std::vector<Block>& blocks) {
  size_t n = 0;
  for (const Block& b : blocks) n += b.bytes;
  return n;
}

size_t alignDown(size_t n) { return n / kAlign * kAlign; }

// Whether a payload of `bytes` per rank fits in the flag line.
bool fitsInline(size_t bytes) { return bytes <= ShmDomain::kInlineBytes; }

// Rounds needed to move `bytes` in pieces of `piece` (at least one, which
// carries the signature check).
size_t roundsFor(size_t bytes, size_t piece) { return std::max<size_t>(1, ceilDiv(bytes, piece)); }

// Where a reduction over one input per local rank keeps its pointers: on
// the stack (`onStack`, kStackInputs long) for the small calls whose
// latency it matters to, in `heap` beyond.
constexpr size_t kStackInputs = 256;
const void** inputArray(const void** onStack, std::vector<const void*>& heap, int ranks) {
  if (static_cast<size_t>(ranks) <= kStackInputs) return onStack;
  heap.resize(static_cast<size_t>(ranks));
  return heap.data();
}

// Once every rank of the round has published its payload in its flag line:
// reduces `count` elements from byte `offset` of every line into `out`,
// taking this rank's own from `own`, its private copy of what it published.
// A peer reading a line takes it over (AMD's migratory sharing), so reading
// one's own line back costs one more cross-core transfer: 0.62 against
// 0.46 us for an 8-byte all_reduce at P=2.
void reduceInlineLines(ShmOp& op, const uint8_t* own, size_t offset, void* out, size_t count,
                       DType dtype, ReduceOp rop) {
  const void* onStack[kStackInputs];
  std::vector<const void*> heap;
  const void** in = inputArray(onStack, heap, op.size());
  for (int i = 0; i < op.size(); ++i) in[i] = op.inlineOf(i) + offset;
  in[op.rank()] = own + offset;
  reduce::reduceInto(rop, dtype, out, in, static_cast<size_t>(op.size()), count);
}

// One round of the one-shot all-reduce on `count` elements at `data`.
void oneShotRound(ShmOp& op, uint8_t* data, size_t count, DType dtype, ReduceOp rop,
                  bool useInline) {
  const size_t bytes = count * dtypeSize(dtype);
  uint8_t* mine = op.begin();
  alignas(64) uint8_t own[ShmDomain::kInlineBytes];  // see reduceInlineLines
  if (useInline) {
    copy(own, data, bytes);
    mine = op.inlineData();
  }
  copy(mine, data, bytes);
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

// Pointers to the same offset of every rank's slot of the current round.
std::vector<const void*> slotsAt(ShmOp& op, size_t offset) {
  std::vector<const void*> out(static_cast<size_t>(op.size()));
  for (int i = 0; i < op.size(); ++i) out[static_cast<size_t>(i)] = op.slot(i) + offset;
  return out;
}

// Round A of the slice-parallel algorithms: every rank publishes its
// chunk `part` (n elements), then reduces slice `me` of every rank's copy
// straight into its slot of round B, which it publishes.
void reduceOwnSlice(ShmOp& op, uint8_t* part, size_t n, DType dtype, ReduceOp rop,
                    const std::vector<size_t>& slice) {
  const size_t es = dtypeSize(dtype);
  const auto me = static_cast<size_t>(op.rank());
  const size_t mySliceBytes = slice[me] * es;
  const size_t mySliceEnd = slice[me + 1] * es;
  // Only the slices the others reduce go through the slot: this rank reads
  // its own straight from `part`.
  uint8_t* mine = op.begin();
  copy(mine, part, mySliceBytes);
  copy(mine + mySliceEnd, part + mySliceEnd, n * es - mySliceEnd);
  op.publish();
  op.waitAll();
  std::vector<const void*> inputs = slotsAt(op, mySliceBytes);
  inputs[me] = part + mySliceBytes;
  uint8_t* reduced = op.begin();
  reduce::reduceInto(rop, dtype, reduced + mySliceBytes, inputs.data(), inputs.size(),
                     slice[me + 1] - slice[me]);
  op.publish();
}

// Round B, for a rank that wants the result: every finished slice, out.
void copySlicesOut(ShmOp& op, uint8_t* part, size_t elementSize, const std::vector<size_t>& slice) {
  op.waitAll();
  for (int i = 0; i < op.size(); ++i) {
    size_t from = slice[static_cast<size_t>(i)] * elementSize;
    size_t to = slice[static_cast<size_t>(i) + 1] * elementSize;
    copy(part + from, op.slot(i) + from, to - from);
  }
}

// Element offsets of P slices of a chunk, each starting on a cache line
// where the element size allows, so every rank's kernel runs aligned.
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

// Publishes this rank's buffer address (and passes the round's signature
// check), returning every rank's.
std::vector<uintptr_t> exchangeAddresses(ShmOp& op, const void* mine) {
  op.begin();
  auto address = reinterpret_cast<uintptr_t>(mine);
  std::memcpy(op.inlineData(), &address, sizeof(address));
  op.publish();
  op.waitAll();
  std::vector<uintptr_t> out(static_cast<size_t>(op.size()));
  for (int i = 0; i < op.size(); ++i) std::memcpy(&out[static_cast<size_t>(i)], op.inlineOf(i), sizeof(uintptr_t));
  return out;
}

// A round that only says "done with the previous step".
void fence(ShmOp& op) {
  op.begin();
  op.publish();
  op.waitAll();
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
  fence(op);  // every slice is final
  for (int i = 0; i < p; ++i) {
    if (i == me) continue;
    size_t from = slice[static_cast<size_t>(i)] * es;
    size_t to = slice[static_cast<size_t>(i) + 1] * es;
    if (to > from) {
      single_copy::read(pids[static_cast<size_t>(i)], peers[static_cast<size_t>(i)] + from,
                        data + from, to - from);
    }
  }
  fence(op);  // nobody reads this rank's buffer any more
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

// The root publishes and returns: it waits for nobody, except for a slot
// to become free again. Every other rank checks the root's signature and
// history; the root's own check against theirs happens in its next wait on
// them (see ShmOp).
void broadcast(ShmOp& op, void* data, size_t bytes, int root) {
  auto* out = static_cast<uint8_t*>(data);
  const bool isRoot = op.rank() == root;
  if (bytes <= ShmDomain::kCellBytes) {
    // Cells are kDepth rounds deep, so a root broadcasting in a loop runs
    // that far ahead of its slowest reader before it has to wait.
    const bool useInline = fitsInline(bytes);
    uint8_t* cell = op.beginCell();
    if (isRoot) copy(useInline ? op.inlineData() : cell, out, bytes);
    op.publish();
    if (isRoot) return;
    op.wait(root);
    copy(out, useInline ? op.inlineOf(root) : op.cell(root), bytes);
    return;
  }
  const size_t piece = op.chunkBytes();
  const size_t rounds = roundsFor(bytes, piece);
  const bool stream = streamOutput(bytes);
  for (size_t k = 0; k < rounds; ++k) {
    const size_t off = k * piece;
    const size_t n = std::min(piece, bytes - off);
    uint8_t* mine = op.begin();
    if (isRoot) copy(mine, out + off, n);
    op.publish();
    if (isRoot) continue;
    op.wait(root);
    copyOut(out + off, op.slot(root), n, stream);
  }
}

void reduce(ShmOp& op, void* data, size_t count, DType dtype, ReduceOp rop, int root) {
  auto* bytes = static_cast<uint8_t*>(data);
  const size_t es = dtypeSize(dtype);
  const int p = op.size();
  const int me = op.rank();
  const bool isRoot = me == root;
  if (fitsInline(count * es)) {
    // The mirror image of a small broadcast: the leaves publish and return,
    // up to kDepth rounds ahead of the root.
    op.beginCell();
    copy(op.inlineData(), bytes, count * es);
    op.publish();
    if (!isRoot) return;
    alignas(64) uint8_t own[ShmDomain::kInlineBytes];  // see reduceInlineLines
    copy(own, bytes, count * es);
    op.waitAll();
    reduceInlineLines(op, own, 0, bytes, count, dtype, rop);
    return;
  }
  // Every rank reduces its slice, the root collects the slices: the root
  // does 1/P of the reduction instead of all of it.
  const size_t chunk = std::max<size_t>(1, op.chunkBytes() / es);
  for (size_t off = 0; off < count; off += chunk) {
    const size_t n = std::min(chunk, count - off);
    uint8_t* part = bytes + off * es;
    const std::vector<size_t> slice = sliceOffsets(n, es, p);
    reduceOwnSlice(op, part, n, dtype, rop, slice);
    if (isRoot) copySlicesOut(op, part, es, slice);
  }
}

void allGather(ShmOp& op, const void* input, size_t inputBytes, const std::vector<Block>& outputs) {
  const auto* in = static_cast<const uint8_t*>(input);
  const int p = op.size();
  size_t largest = 0;
  for (const Block& b : outputs) largest = std::max(largest, b.bytes);
  const bool useInline = fitsInline(largest);
  const size_t piece = useInline ? ShmDomain::kInlineBytes : op.chunkBytes();
  const size_t rounds = roundsFor(largest, piece);
  const bool stream = streamOutput(totalBytes(outputs));
  copyOut(outputs[static_cast<size_t>(op.rank())].data, in, inputBytes, stream);
  for (size_t k = 0; k < rounds; ++k) {
    const size_t off = k * piece;
    uint8_t* mine = op.begin();
    if (useInline) mine = op.inlineData();
    if (off < inputBytes) copy(mine, in + off, std::min(piece, inputBytes - off));
    op.publish();
    op.waitAll();
    for (int i = 0; i < p; ++i) {
      const Block& b = outputs[static_cast<size_t>(i)];
      if (i == op.rank() || off >= b.bytes) continue;
      copyOut(b.data + off, useInline ? op.inlineOf(i) : op.slot(i), std::min(piece, b.bytes - off),
              stream);
    }
  }
}

// reduce_scatter of at most kInlineBytes in all: the whole input travels in
// the flag line. Reducing this rank's part from a private copy (see
// reduceInlineLines) also keeps an in-place output from aliasing an input.
void inlineReduceScatter(ShmOp& op, const uint8_t* in, const std::vector<size_t>& offs,
                         void* output, DType dtype, ReduceOp rop) {
  const size_t es = dtypeSize(dtype);
  const auto me = static_cast<size_t>(op.rank());
  alignas(64) uint8_t own[ShmDomain::kInlineBytes];
  copy(own, in, offs.back() * es);
  op.beginCell();
  copy(op.inlineData(), in, offs.back() * es);
  op.publish();
  op.waitAll();
  reduceInlineLines(op, own, offs[me] * es, output, offs[me + 1] - offs[me], dtype, rop);
}

void reduceScatter(ShmOp& op, const void* input, const std::vector<size_t>& blockCounts,
                   void* output, DType dtype, ReduceOp rop) {
  const auto* in = static_cast<const uint8_t*>(input);
  const size_t es = dtypeSize(dtype);
  const int p = op.size();
  const int me = op.rank();
  const std::vector<size_t> offs = offsetsOf(blockCounts);
  if (fitsInline(offs.back() * es)) {
    inlineReduceScatter(op, in, offs, output, dtype, rop);
    return;
  }
  const size_t largest = *std::max_element(blockCounts.begin(), blockCounts.end());
  // Each round moves `chunk` elements of every block; block j's piece sits
  // at region j of the slot.
  const size_t region = std::max(kAlign, alignDown(op.chunkBytes() / static_cast<size_t>(p)));
  const size_t chunk = std::max<size_t>(1, region / es);
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
    uint8_t* mine = op.begin();
    for (int j = 0; j < p; ++j) {
      size_t count = blockCounts[static_cast<size_t>(j)];
      if ((j == me && ownFromInput) || first >= count) continue;
      copy(mine + static_cast<size_t>(j) * chunk * es, in + (offs[static_cast<size_t>(j)] + first) * es,
           std::min(chunk, count - first) * es);
    }
    op.publish();
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

// gather and scatter accept blocks of different sizes (reduce's
// reduce-scatter + gather uses them so): in the first round every rank
// publishes its own size inline, the root checks them against its blocks,
// and all ranks take the round count from the largest.
namespace {

size_t publishedSize(ShmOp& op, int local) {
  uint64_t v;
  std::memcpy(&v, op.inlineOf(local), sizeof(v));
  return static_cast<size_t>(v);
}

// Round 0's size exchange; returns the largest size.
size_t exchangeSizes(ShmOp& op, size_t mine, const std::vector<Block>* rootBlocks,
                     const char* what) {
  const auto v = static_cast<uint64_t>(mine);
  std::memcpy(op.inlineData(), &v, sizeof(v));
  op.publish();
  op.waitAll();
  size_t largest = 0;
  for (int i = 0; i < op.size(); ++i) {
    size_t theirs = publishedSize(op, i);
    largest = std::max(largest, theirs);
    if (rootBlocks != nullptr && (*rootBlocks)[static_cast<size_t>(i)].bytes != theirs) {
      op.mismatch(op.describeRank(i) + " has " + std::to_string(theirs) + " bytes to " + what +
                  " but the root's block for it holds " +
                  std::to_string((*rootBlocks)[static_cast<size_t>(i)].bytes));
    }
  }
  return largest;
}

}  // namespace

void gather(ShmOp& op, const void* input, size_t inputBytes, const std::vector<Block>& outputs,
            int root) {
  const auto* in = static_cast<const uint8_t*>(input);
  const bool isRoot = op.rank() == root;
  const size_t piece = op.chunkBytes();
  const bool stream = isRoot && streamOutput(totalBytes(outputs));
  if (isRoot) copyOut(outputs[static_cast<size_t>(root)].data, in, inputBytes, stream);
  size_t rounds = 1;
  for (size_t k = 0; k < rounds; ++k) {
    const size_t off = k * piece;
    const size_t n = off < inputBytes ? std::min(piece, inputBytes - off) : 0;
    copy(op.begin(), in + off, n);
    if (k == 0) {
      rounds = roundsFor(exchangeSizes(op, inputBytes, isRoot ? &outputs : nullptr, "gather"),
                         piece);
    } else {
      op.publish();
      if (isRoot) op.waitAll();
    }
    if (!isRoot) continue;
    for (int i = 0; i < op.size(); ++i) {
      const Block& b = outputs[static_cast<size_t>(i)];
      if (i != root && off < b.bytes) {
        copyOut(b.data + off, op.slot(i), std::min(piece, b.bytes - off), stream);
      }
    }
  }
}

void scatter(ShmOp& op, const std::vector<Block>& inputs, void* output, size_t outputBytes,
             int root) {
  auto* out = static_cast<uint8_t*>(output);
  const int p = op.size();
  const bool isRoot = op.rank() == root;
  const size_t region = std::max(kAlign, alignDown(op.chunkBytes() / static_cast<size_t>(p)));
  MESHCOMM_CHECK(region * static_cast<size_t>(p) <= op.chunkBytes(),
                 "shared-memory slot too small for " << p << " ranks");
  const bool stream = streamOutput(outputBytes);
  if (isRoot) copyOut(out, inputs[static_cast<size_t>(root)].data, outputBytes, stream);
  // Round 0 only agrees on sizes: the root learns them before it copies.
  op.begin();
  const size_t rounds =
      roundsFor(exchangeSizes(op, outputBytes, isRoot ? &inputs : nullptr, "receive"), region);
  for (size_t k = 0; k < rounds; ++k) {
    const size_t off = k * region;
    uint8_t* mine = op.begin();
    if (isRoot) {
      for (int j = 0; j < p; ++j) {
        const Block& b = inputs[static_cast<size_t>(j)];
        if (j != root && off < b.bytes) {
          copy(mine + static_cast<size_t>(j) * region, b.data + off, std::min(region, b.bytes - off));
        }
      }
    }
    op.publish();
    if (isRoot) continue;
    op.wait(root);
    if (off < outputBytes) {
      copyOut(out + off, op.slot(root) + static_cast<size_t>(op.rank()) * region,
              std::min(region, outputBytes - off), stream);
    }
  }
}

// all_to_all: the slot holds one region per other rank (at P=2 the whole
// slot carries the one peer's block). In the first round each region opens
// with the size of its block and the flag line carries the largest block
// this rank sends, so every receiver checks the sizes sent to it and every
// rank learns how many rounds carry the rest. A block of up to
// kTinyBlock bytes shares the size's line, so a small call costs a receiver
// two lines of each peer, the flag and its region; larger ones start on the
// next line, so the copies of every round run line-aligned. (Misaligned by
// the size's 8 bytes, a 32 KiB call at P=2 took 4.8 us instead of 3.2 and
// a 256 KiB one 31 us instead of 18: every line a copy writes then comes in
// two pieces, each a partial write to a line the peer holds.) A rank whose
// blocks are all the same size and all fit in the flag line together sends
// them there instead (one line per peer), marking the largest so.
namespace {

constexpr size_t kTinyBlock = kAlign - sizeof(uint64_t);

size_t regionIndex(int from, int to) { return static_cast<size_t>(to - (to > from ? 1 : 0)); }

// The flag line's largest block, and whether the blocks follow it there.
constexpr uint64_t kBlocksInline = uint64_t{1} << 63;
constexpr size_t kInlineBlockBytes = ShmDomain::kInlineBytes - sizeof(uint64_t);

// Where a block of `bytes` starts in its first-round region, and how many
// of its bytes that round carries.
size_t firstDataOffset(size_t bytes) { return bytes <= kTinyBlock ? sizeof(uint64_t) : kAlign; }
size_t firstBytes(size_t bytes, size_t region) {
  return std::min(bytes, region - firstDataOffset(bytes));
}

}  // namespace

void allToAll(ShmOp& op, const std::vector<Block>& sends, const std::vector<Block>& recvs) {
  const int p = op.size();
  const int me = op.rank();
  const bool stream = streamOutput(totalBytes(recvs));
  copyOut(recvs[static_cast<size_t>(me)].data, sends[static_cast<size_t>(me)].data,
          std::min(sends[static_cast<size_t>(me)].bytes, recvs[static_cast<size_t>(me)].bytes),
          stream);
  if (p == 1) return;

  // Up to a chunk per peer and round: the slot is wider than a chunk only
  // where rounds are dear (runtime/shm_setup.cc).
  const size_t region =
      alignDown(std::min(op.chunkBytes(), op.slotBytes() / static_cast<size_t>(p - 1)));
  MESHCOMM_CHECK(region >= 2 * kAlign, "shared-memory slot too small for " << p << " ranks");

  uint8_t* mine = op.begin();
  uint8_t* line = op.inlineData();
  const size_t firstPeerBytes = sends[me == 0 ? 1 : 0].bytes;
  uint64_t largest = 0;
  bool uniform = true;
  for (int j = 0; j < p; ++j) {
    if (j == me) continue;
    const size_t bytes = sends[static_cast<size_t>(j)].bytes;
    uniform = uniform && bytes == firstPeerBytes;
    largest = std::max<uint64_t>(largest, bytes);
  }
  const bool sendInline = uniform && largest * static_cast<size_t>(p - 1) <= kInlineBlockBytes;
  for (int j = 0; j < p; ++j) {
    if (j == me) continue;
    const Block& s = sends[static_cast<size_t>(j)];
    if (sendInline) {
      copy(line + sizeof(uint64_t) + regionIndex(me, j) * largest, s.data, s.bytes);
      continue;
    }
    uint8_t* entry = mine + regionIndex(me, j) * region;
    const auto size = static_cast<uint64_t>(s.bytes);
    std::memcpy(entry, &size, sizeof(size));
    copy(entry + firstDataOffset(s.bytes), s.data, firstBytes(s.bytes, region));
  }
  const uint64_t mark = largest | (sendInline ? kBlocksInline : 0);
  std::memcpy(line, &mark, sizeof(mark));
  op.publish();
  op.waitAll();
  for (int i = 0; i < p; ++i) {
    if (i == me) continue;
    uint64_t theirs;
    std::memcpy(&theirs, op.inlineOf(i), sizeof(theirs));
    const bool inLine = (theirs & kBlocksInline) != 0;
    theirs &= ~kBlocksInline;
    largest = std::max(largest, theirs);
    const uint8_t* entry = op.slot(i) + regionIndex(i, me) * region;
    uint64_t size = theirs;
    if (!inLine) std::memcpy(&size, entry, sizeof(size));
    const Block& r = recvs[static_cast<size_t>(i)];
    if (size != r.bytes) {
      op.mismatch(op.describeRank(i) + " sends " + std::to_string(size) +
                  " bytes to this rank, which expects " + std::to_string(r.bytes));
    }
    if (inLine) {
      copy(r.data, op.inlineOf(i) + sizeof(uint64_t) + regionIndex(i, me) * size, size);
    } else {
      copyOut(r.data, entry + firstDataOffset(r.bytes), firstBytes(r.bytes, region), stream);
    }
  }

  // The rest of every block larger than the first round's share of a region.
  for (size_t off = region - kAlign; off < largest; off += region) {
    mine = op.begin();
    for (int j = 0; j < p; ++j) {
      const Block& s = sends[static_cast<size_t>(j)];
      if (j == me || off >= s.bytes) continue;
      copy(mine + regionIndex(me, j) * region, s.data + off, std::min(region, s.bytes - off));
    }
    op.publish();
    op.waitAll();
    for (int i = 0; i < p; ++i) {
      const Block& r = recvs[static_cast<size_t>(i)];
      if (i == me || off >= r.bytes) continue;
      copyOut(r.data + off, op.slot(i) + regionIndex(i, me) * region, std::min(region, r.bytes - off),
              stream);
    }
  }
}

void barrier(ShmOp& op) {
  op.begin();
  op.publish();
  op.waitAll();
}

}  // namespace meshcomm::collectives::shm

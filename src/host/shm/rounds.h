// The round machinery that the shared-memory variants of several families
// share. Those variants run among the ranks of one host directly on the
// group's shared-memory segment (transport/shm/shm_domain.h) in rounds:
// each rank copies its contribution into its own slot, and every rank
// reads (and reduces) what it needs from the others' slots. Large buffers
// go through in slot-sized chunks, double-buffered, so copy-in of one chunk
// overlaps the readers of the previous one.
//
// Ranks are local ranks of the domain; buffers and sizes are as in
// collectives.h. The first round of every operation checks every rank's
// signature, so ranks that disagree on the call (or on its root) fail with
// Mismatch instead of waiting for each other.
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/blocks.h"
#include "collectives/collectives.h"
#include "collectives/host_collectives.h"
#include "common/stream_copy.h"
#include "host/shm/slot_stores.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm::host::shm {

constexpr size_t kAlign = 64;  // slices and regions start on cache lines

// memmove: a rank's own block may be its input (in-place calls).
inline void copy(void* to, const void* from, size_t bytes) {
  if (bytes > 0 && to != from) std::memmove(to, from, bytes);
}

// A copy into an output the collective has not read: streamed past the
// caches when `stream` (streamOutput() of the call's output size).
inline void copyOut(void* to, const void* from, size_t bytes, bool stream) {
  if (stream && !rangesOverlap(to, bytes, from, bytes)) {
    streamCopy(to, from, bytes);
  } else {
    copy(to, from, bytes);
  }
}

inline size_t alignDown(size_t n) { return n / kAlign * kAlign; }
inline size_t alignUp(size_t n) { return ceilDiv(n, kAlign) * kAlign; }

// Whether a payload of `bytes` per rank fits in the flag line.
inline bool fitsInline(size_t bytes) { return bytes <= ShmDomain::kInlineBytes; }

// Rounds needed to move `bytes` in pieces of `piece` (at least one, which
// carries the signature check).
inline size_t roundsFor(size_t bytes, size_t piece) {
  return std::max<size_t>(1, ceilDiv(bytes, piece));
}

// The most parts of the slot area (ShmOp::begin) that each hold a round
// of `roundBytes`, up to ShmDomain::kSlotParts. A rank whose rounds need
// nobody's data runs that many rounds ahead of its readers; and every
// rank's small rounds rotate through that many places instead of two, so
// the lines it writes were last read by its peers dozens of rounds ago,
// not in the round before: a 2-rank all_reduce of 4 KiB takes 0.81-0.90 of
// the time, all_gather of 1-256 KiB 0.91-0.95 (docs/tuning.md, "Small
// rounds rotate through the slot area"). The parts must
// come from what every rank agrees on (sizes the signature or the records
// check), since the readers compute where a writer's part lies.
inline size_t partsFor(const ShmOp& op, size_t roundBytes) {
  size_t parts = 2;
  while (parts < ShmDomain::kSlotParts && op.slotPartBytes(parts * 2) >= roundBytes) parts *= 2;
  return parts;
}

// Whether rounds are cheap: the slot is no wider than the chunk, which
// means the host's ranks have cores of their own (transport/shm/
// shm_setup.cc). With more ranks than cores every round costs context
// switches.
inline bool roundsAreCheap(const ShmOp& op) { return op.slotBytes() == op.chunkBytes(); }

// A copy into this rank's own slot (or cell, or inline area), which its
// peers will read: large ones store as SlotStores says where the ranks
// have cores of their own (host/shm/slot_stores.h).
inline void copyIn(const ShmOp& op, void* slot, const void* from, size_t bytes) {
  if (bytes >= SlotStores::kMinBytes && roundsAreCheap(op)) {
    copyIntoSlot(slot, from, bytes, slotStoreSetting());
  } else {
    copy(slot, from, bytes);
  }
}

// The rounds of a call whose writers run ahead of their readers (a
// broadcast's root, a reduce's leaves), for a buffer of `bytes`. Where
// rounds are cheap, a quarter of the
// buffer, from 16 up to 64 KiB: the readers start once the first round is
// in, and the writer copies on without waiting for them (docs/tuning.md,
// "broadcast"). Elsewhere a round stays a chunk (4 ranks on 2 cores, 1 MiB
// broadcast in rounds of 128 KiB: 390 -> 586 us).
inline size_t aheadRoundBytes(const ShmOp& op, size_t bytes) {
  constexpr size_t kMinRound = size_t{16} << 10;
  constexpr size_t kMaxRound = size_t{64} << 10;
  if (!roundsAreCheap(op)) return op.chunkBytes();
  return std::clamp(bytes / 4, kMinRound, kMaxRound);
}

// Where a reduction over one input per local rank keeps its pointers: on
// the stack (`onStack`, kStackInputs long) for the small calls whose
// latency it matters to, in `heap` beyond.
constexpr size_t kStackInputs = 256;
inline const void** inputArray(const void** onStack, std::vector<const void*>& heap, int ranks) {
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
                       DType dtype, ReduceOp rop);

// Element offsets of P slices of a chunk, each starting on a cache line
// where the element size allows, so every rank's kernel runs aligned.
std::vector<size_t> sliceOffsets(size_t count, size_t elementSize, int parts);

// Round A of the slice-parallel algorithms: every rank publishes its
// chunk `part` (n elements), then reduces slice `me` of every rank's copy
// straight into its slot of round B, which it publishes.
// `agreement`: records that ride round A (publishWithRecords).
void reduceOwnSlice(ShmOp& op, const uint8_t* part, size_t n, DType dtype, ReduceOp rop,
                    const std::vector<size_t>& slice,
                    const HostCollectives::Agreement* agreement = nullptr);

// Round B, for a rank that wants the result: every finished slice, out.
void copySlicesOut(ShmOp& op, uint8_t* part, size_t elementSize, const std::vector<size_t>& slice);

// Publishes the round with this rank's agreement record in its cell
// (ShmOp::ownCell) and the record's digest in its flag line
// (ShmOp::publishWord), waits for every rank's, and hands them all to
// `agreement.read`, indexed by group rank, where they lie: a record moves
// between ranks only if `read` reads it.
void shareRecordsInRound(ShmOp& op, const HostCollectives::Agreement& agreement);

// Publishes the round. With `agreement` (the first round of a call whose
// records ride it), shareRecordsInRound: the call returns only once
// `agreement->read` has judged every rank's record, which may throw, before
// the caller reads anyone's data.
inline void publishWithRecords(ShmOp& op, const HostCollectives::Agreement* agreement) {
  if (agreement == nullptr) {
    op.publish();
    return;
  }
  shareRecordsInRound(op, *agreement);
}

// A round that only says "done with the previous step": returns once every
// rank of the domain has entered it. The shared-memory barrier, and the
// fence between the steps of algorithms that read the peers' buffers.
void barrier(ShmOp& op);

}  // namespace meshcomm::host::shm

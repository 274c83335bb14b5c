// broadcast among the ranks of one host, on the shared-memory segment.
#include <algorithm>

#include "host/shm/variants.h"
#include "host/shm/rounds.h"
#include "collectives/tuning.h"

namespace meshcomm::host::shm {

// The root publishes and returns: it waits for nobody, except for a slot
// to become free again. Every other rank checks the root's signature and
// history; the root's own check against theirs happens in its next wait on
// them (see ShmOp).
void broadcast(ShmOp& op, void* data, size_t bytes, int root) {
  // Where rounds are cheap (the slot is no wider than the chunk: the
  // host's ranks have cores of their own, transport/shm/shm_setup.cc),
  // rounds of a quarter of the buffer, from 16 up to 64 KiB, in as many
  // parts of the slot area: the readers start copying out once the root
  // has copied in the first round, and the root copies on without waiting
  // for them (2 ranks, against a round of a chunk in two parts: 1 MiB 158
  // -> 111 us per cell, 16 MiB 1.9 -> 1.45 ms; 64 KiB in rounds of 16 KiB
  // 0.84x the time of one round; docs/tuning.md). With more ranks than cores every
  // round costs context switches (4 ranks on 2 cores, 1 MiB, rounds of
  // 128 KiB: 390 -> 586 us), so there a round stays a chunk.
  constexpr size_t kMinRound = size_t{16} << 10;
  constexpr size_t kMaxRound = size_t{64} << 10;
  const size_t round = op.slotBytes() > op.chunkBytes() ? op.chunkBytes()
                                                        : std::clamp(bytes / 4, kMinRound, kMaxRound);
  broadcast(op, data, bytes, root, round);
}

void broadcast(ShmOp& op, void* data, size_t bytes, int root, size_t roundBytes) {
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
  // The root's rounds need nobody's data, so they take as many parts of
  // its slot area as a round's bytes allow, and the root runs that many
  // rounds ahead of the readers instead of one: it copies the whole buffer
  // in while they copy out (2 ranks, 1 MiB: docs/tuning.md).
  size_t parts = 2;
  while (parts < ShmDomain::kSlotParts && op.slotPartBytes(parts * 2) >= roundBytes) parts *= 2;
  const size_t piece = std::min(roundBytes, op.slotPartBytes(parts));
  const size_t rounds = roundsFor(bytes, piece);
  const bool stream = streamOutput(bytes);
  for (size_t k = 0; k < rounds; ++k) {
    const size_t off = k * piece;
    const size_t n = std::min(piece, bytes - off);
    if (isRoot) {
      copy(op.begin(parts), out + off, n);
      op.publish();
      continue;
    }
    op.beginReading(parts);
    op.publish();
    op.wait(root);
    copyOut(out + off, op.slot(root), n, stream);
  }
}

}  // namespace meshcomm::host::shm

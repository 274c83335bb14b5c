// broadcast among the ranks of one host, on the shared-memory segment.
#include <algorithm>

#include "host/shm/variants.h"
#include "host/shm/rounds.h"
#include "collectives/tuning.h"

namespace meshcomm::host::shm {

namespace {

void broadcastInRounds(ShmOp& op, void* data, size_t bytes, int root, size_t roundBytes,
                       const HostCollectives::Agreement* agreement) {
  auto* out = static_cast<uint8_t*>(data);
  const bool isRoot = op.rank() == root;
  if (bytes <= ShmDomain::kCellBytes && agreement == nullptr) {
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
  const size_t parts = partsFor(op, roundBytes);
  const size_t piece = std::min(roundBytes, op.slotPartBytes(parts));
  const size_t rounds = roundsFor(bytes, piece);
  const bool stream = streamOutput(bytes);
  for (size_t k = 0; k < rounds; ++k) {
    const size_t off = k * piece;
    const size_t n = std::min(piece, bytes - off);
    if (isRoot) {
      copyIn(op, op.begin(parts), out + off, n);
    } else {
      op.beginReading(parts);
    }
    publishWithRecords(op, k == 0 ? agreement : nullptr);
    if (isRoot) continue;
    op.wait(root);
    copyOut(out + off, op.slot(root), n, stream);
  }
}

}  // namespace

// The root publishes and returns: it waits for nobody, except for a slot
// to become free again. Every other rank checks the root's signature and
// history; the root's own check against theirs happens in its next wait on
// them (see ShmOp). With the agreement's records, every rank writes its
// record into its cell in the first round, and all of them, the root too,
// judge every record before anyone reads a byte; the rounds after run as
// without (the root ahead).
void broadcast(ShmOp& op, void* data, size_t bytes, int root,
               const HostCollectives::Agreement* agreement) {
  // 2 ranks, against rounds of a chunk in two parts: 1 MiB 158 -> 111 us
  // per cell, 16 MiB 1.9 -> 1.45 ms; 64 KiB in rounds of 16 KiB 0.84x the
  // time of one round (docs/tuning.md).
  broadcastInRounds(op, data, bytes, root, aheadRoundBytes(op, bytes), agreement);
}

void broadcast(ShmOp& op, void* data, size_t bytes, int root, size_t roundBytes) {
  broadcastInRounds(op, data, bytes, root, roundBytes, nullptr);
}

}  // namespace meshcomm::host::shm

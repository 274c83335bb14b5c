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
  broadcast(op, data, bytes, root, op.chunkBytes());
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
  const size_t piece = std::min(roundBytes, op.slotBytes());
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

}  // namespace meshcomm::host::shm

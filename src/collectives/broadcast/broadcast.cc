// broadcast: on one host, the host domain's (host_collectives.h); across hosts,
// hierarchical (hierarchical.cc).
//
// Over TCP, a pipelined tree — binomial for short messages, a chain for
// long ones. The buffer travels in chunks; a rank forwards chunk k to its
// children as soon as it has it, while chunk k+1 is still arriving.
#include <vector>

#include "collectives/blocks.h"
#include "collectives/broadcast/variants.h"
#include "collectives/collectives.h"

namespace meshcomm::collectives {
namespace {

struct TreePosition {
  int parent = -1;            // group rank, -1 at the root
  std::vector<int> children;  // group ranks
};

// Positions are computed on virtual ranks vr = (rank - root) mod P, so the
// root is vr 0. Binomial: the parent of vr clears its lowest set bit; its
// children add each lower power of two.
TreePosition binomial(int rank, int root, int p) {
  TreePosition t;
  const int vr = wrap(rank, -root, p);
  int mask = 1;
  while (mask < p) {
    if (vr & mask) {
      t.parent = wrap(vr - mask, root, p);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < p) t.children.push_back(wrap(vr + mask, root, p));
  }
  return t;
}

TreePosition chain(int rank, int root, int p) {
  TreePosition t;
  const int vr = wrap(rank, -root, p);
  if (vr > 0) t.parent = wrap(vr - 1, root, p);
  if (vr + 1 < p) t.children.push_back(wrap(vr + 1, root, p));
  return t;
}

}  // namespace

void broadcast(Comm& comm, void* data, size_t bytes, int root) {
  const int p = comm.size();
  if (p == 1) return;
  const Algorithm algo = comm.algorithm();
  if (algo == Algorithm::kOnHost) {
    comm.host().broadcast(comm.hostCall(), data, bytes, root, nullptr);
    return;
  }
  if (algo == Algorithm::kHierarchical) {
    hierarchical::broadcast(comm, data, bytes, root);
    return;
  }
  const TreePosition t = algo == Algorithm::kChain ? chain(comm.rank(), root, p)
                                                   : binomial(comm.rank(), root, p);
  auto* base = static_cast<uint8_t*>(data);
  const std::vector<Chunk> chunks = chunksOf(bytes, pipelineChunkBytes(bytes));
  std::vector<RequestPtr> fromParent;
  if (t.parent >= 0) {
    for (size_t k = 0; k < chunks.size(); ++k) {
      fromParent.push_back(comm.recv(t.parent, static_cast<uint32_t>(k),
                                     base + chunks[k].offset, chunks[k].count));
    }
  }
  for (size_t k = 0; k < chunks.size(); ++k) {
    if (t.parent >= 0) comm.wait(std::span<const RequestPtr>(&fromParent[k], 1));
    for (int child : t.children) {
      comm.send(child, static_cast<uint32_t>(k), base + chunks[k].offset, chunks[k].count);
    }
  }
  comm.waitAll();
}

}  // namespace meshcomm::collectives

// broadcast: on one host, the host domain's (host_collectives.h); across hosts,
// hierarchical (hierarchical.cc).
//
// Over TCP, a pipelined tree — binomial for short messages, a chain for
// long ones. The buffer travels in chunks; a rank forwards chunk k to its
// children as soon as it has it, while chunk k+1 is still arriving. A root
// whose buffer went out with the agreement's records (with_records.cc) has
// sent it whole to its children, who forward it from there.
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

TreePosition treePosition(Algorithm algo, int rank, int root, int p) {
  return algo == Algorithm::kChain ? chain(rank, root, p) : binomial(rank, root, p);
}

// The tree from this rank's place in it: chunk k from the parent (through
// `fromRoot` if the parent is the root and has sent the buffer already),
// forwarded to the children as soon as it is in.
void broadcastTree(Comm& comm, Comm* fromRoot, void* data, size_t bytes, int root) {
  const TreePosition t = treePosition(comm.algorithm(), comm.rank(), root, comm.size());
  auto* base = static_cast<uint8_t*>(data);
  const std::vector<Chunk> chunks = chunksOf(bytes, pipelineChunkBytes(bytes));
  if (fromRoot != nullptr && comm.rank() == root) {
    fromRoot->waitAll();
    return;
  }
  std::vector<RequestPtr> fromParent;
  if (fromRoot != nullptr && t.parent == root) {
    // The whole buffer in one message: every chunk is in with it.
    fromRoot->recv(root, 0, data, bytes);
    fromRoot->waitAll();
  } else if (t.parent >= 0) {
    for (size_t k = 0; k < chunks.size(); ++k) {
      fromParent.push_back(comm.recv(t.parent, static_cast<uint32_t>(k),
                                     base + chunks[k].offset, chunks[k].count));
    }
  }
  for (size_t k = 0; k < chunks.size(); ++k) {
    if (!fromParent.empty()) comm.wait(std::span<const RequestPtr>(&fromParent[k], 1));
    for (int child : t.children) {
      comm.send(child, static_cast<uint32_t>(k), base + chunks[k].offset, chunks[k].count);
    }
  }
  comm.waitAll();
}

}  // namespace

void broadcast(Comm& comm, void* data, size_t bytes, int root) {
  if (comm.size() == 1) return;
  const Algorithm algo = comm.algorithm();
  if (algo == Algorithm::kOnHost) {
    comm.host().broadcast(comm.hostCall(), data, bytes, root, nullptr);
    return;
  }
  if (algo == Algorithm::kHierarchical) {
    hierarchical::broadcast(comm, data, bytes, root);
    return;
  }
  broadcastTree(comm, nullptr, data, bytes, root);
}

void broadcastAfterFirstHop(Comm& comm, Comm& firstHop, void* data, size_t bytes, int root) {
  broadcastTree(comm, &firstHop, data, bytes, root);
}

bool receivesFromRoot(const Comm& comm, size_t bytes, int rank, int root) {
  const Algorithm algo = chooseAlgorithm(Opcode::kBroadcast, bytes, comm.size(), comm.route());
  return rank != root && treePosition(algo, rank, root, comm.size()).parent == root;
}

}  // namespace meshcomm::collectives

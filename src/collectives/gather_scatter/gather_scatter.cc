// gather and scatter: over TCP the root exchanges directly with every other
// rank, all transfers in flight at once (the root's link is the bottleneck
// whatever the schedule, so a tree would only add latency on CPUs); on one
// host, the host domain's (host_collectives.h).
#include "collectives/blocks.h"
#include "collectives/collectives.h"

namespace meshcomm::collectives {
namespace {

// The linear schedule of both, which differ only in the direction of the
// transfers (`toRoot` for gather): a rank other than the root exchanges
// `mine` with the root and is done; the root exchanges block j of `blocks`
// with each other rank j, all in flight at once, moves its own block
// between `mine` and `blocks[root]` while they run, and waits for them all.
void linear(Comm& comm, int root, bool toRoot, void* mine, size_t myBytes,
            std::span<const Block> blocks) {
  // In a gather every rank but the root sends; in a scatter the root alone.
  const bool sends = toRoot ? comm.rank() != root : comm.rank() == root;
  auto exchange = [&](int peer, void* data, size_t bytes) {
    if (sends) {
      comm.send(peer, 0, data, bytes);
    } else {
      comm.recv(peer, 0, data, bytes);
    }
  };
  if (comm.rank() != root) {
    exchange(root, mine, myBytes);
  } else {
    for (int j = 0; j < comm.size(); ++j) {
      const Block& block = blocks[static_cast<size_t>(j)];
      if (j != root) exchange(j, block.data, block.bytes);
    }
    uint8_t* own = blocks[static_cast<size_t>(root)].data;
    toRoot ? moveOwnBlock(own, mine, myBytes) : moveOwnBlock(mine, own, myBytes);
  }
  comm.waitAll();
}

}  // namespace

void gather(Comm& comm, const void* input, size_t inputBytes, std::span<const Block> outputs,
            int root) {
  if (comm.algorithm() == Algorithm::kOnHost) {
    comm.host().gather(comm.hostCall(), input, inputBytes, outputs, root, nullptr);
    return;
  }
  // A gather only reads `input`; the schedule is written for both directions.
  linear(comm, root, /*toRoot=*/true, const_cast<void*>(input), inputBytes, outputs);
}

void scatter(Comm& comm, std::span<const Block> inputs, void* output, size_t outputBytes,
             int root) {
  if (comm.algorithm() == Algorithm::kOnHost) {
    comm.host().scatter(comm.hostCall(), inputs, output, outputBytes, root, nullptr);
    return;
  }
  linear(comm, root, /*toRoot=*/false, output, outputBytes, inputs);
}

}  // namespace meshcomm::collectives

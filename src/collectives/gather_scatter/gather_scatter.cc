// gather and scatter: over TCP the root exchanges directly with every other
// rank, all transfers in flight at once (the root's link is the bottleneck
// whatever the schedule, so a tree would only add latency on CPUs); on one
// host, shared memory (shm.cc).
#include <cstring>

#include "collectives/collectives.h"
#include "collectives/gather_scatter/variants.h"

namespace meshcomm::collectives {
namespace {

// Whether the tuning table runs this call on the host's shared memory (the
// other choice being the linear schedule).
bool onSharedMemory(Comm& comm, Opcode family) {
  return chooseAlgorithm(family, 0, comm.size(), comm.route()) == Algorithm::kShm;
}

// The linear schedule of both, which differ only in the direction of the
// transfers: a rank other than the root makes its one transfer with the
// root (`withRoot`) and is done; the root posts one per other rank
// (`withRank(j)`), all in flight at once, copies its own block
// (`copyOwn`) while they run, and waits for them all.
template <class WithRoot, class WithRank, class CopyOwn>
void linear(Comm& comm, int root, WithRoot withRoot, WithRank withRank, CopyOwn copyOwn) {
  if (comm.rank() != root) {
    withRoot();
  } else {
    for (int j = 0; j < comm.size(); ++j) {
      if (j != root) withRank(static_cast<size_t>(j));
    }
    copyOwn();
  }
  comm.waitAll();
}

}  // namespace

void gather(Comm& comm, const void* input, size_t inputBytes, const std::vector<Block>& outputs,
            int root) {
  if (onSharedMemory(comm, Opcode::kGather)) {
    ShmOp local = comm.shmOp();
    return shm::gather(local, input, inputBytes, outputs, root);
  }
  linear(
      comm, root, [&] { comm.send(root, 0, input, inputBytes); },
      [&](size_t j) { comm.recv(static_cast<int>(j), 0, outputs[j].data, outputs[j].bytes); },
      [&] {
        const Block& own = outputs[static_cast<size_t>(root)];
        if (own.data != input && inputBytes > 0) std::memmove(own.data, input, inputBytes);
      });
}

void scatter(Comm& comm, const std::vector<Block>& inputs, void* output, size_t outputBytes,
             int root) {
  if (onSharedMemory(comm, Opcode::kScatter)) {
    ShmOp local = comm.shmOp();
    return shm::scatter(local, inputs, output, outputBytes, root);
  }
  linear(
      comm, root, [&] { comm.recv(root, 0, output, outputBytes); },
      [&](size_t j) { comm.send(static_cast<int>(j), 0, inputs[j].data, inputs[j].bytes); },
      [&] {
        const Block& own = inputs[static_cast<size_t>(root)];
        if (own.data != output && outputBytes > 0) std::memmove(output, own.data, outputBytes);
      });
}

}  // namespace meshcomm::collectives

// gather and scatter: the root exchanges directly with every other rank,
// all transfers in flight at once (the root's link is the bottleneck
// whatever the schedule, so a tree would only add latency on CPUs).
#include <cstring>

#include "collectives/collectives.h"
#include "collectives/gather_scatter/variants.h"

namespace meshcomm::collectives {

void gather(Comm& comm, const void* input, size_t inputBytes, const std::vector<Block>& outputs,
            int root) {
  if (chooseAlgorithm(Opcode::kGather, 0, comm.size(), comm.route()) == Algorithm::kShm) {
    ShmOp local = comm.shmOp();
    shm::gather(local, input, inputBytes, outputs, root);
    return;
  }
  const int p = comm.size();
  const int r = comm.rank();
  if (r != root) {
    comm.send(root, 0, input, inputBytes);
    comm.waitAll();
    return;
  }
  for (int j = 0; j < p; ++j) {
    if (j == r) continue;
    comm.recv(j, 0, outputs[static_cast<size_t>(j)].data, outputs[static_cast<size_t>(j)].bytes);
  }
  const Block& own = outputs[static_cast<size_t>(r)];
  if (own.data != input && inputBytes > 0) std::memmove(own.data, input, inputBytes);
  comm.waitAll();
}

void scatter(Comm& comm, const std::vector<Block>& inputs, void* output, size_t outputBytes,
             int root) {
  if (chooseAlgorithm(Opcode::kScatter, 0, comm.size(), comm.route()) == Algorithm::kShm) {
    ShmOp local = comm.shmOp();
    shm::scatter(local, inputs, output, outputBytes, root);
    return;
  }
  const int p = comm.size();
  const int r = comm.rank();
  if (r != root) {
    comm.recv(root, 0, output, outputBytes);
    comm.waitAll();
    return;
  }
  for (int j = 0; j < p; ++j) {
    if (j == r) continue;
    comm.send(j, 0, inputs[static_cast<size_t>(j)].data, inputs[static_cast<size_t>(j)].bytes);
  }
  const Block& own = inputs[static_cast<size_t>(r)];
  if (own.data != output && outputBytes > 0) std::memmove(output, own.data, outputBytes);
  comm.waitAll();
}

}  // namespace meshcomm::collectives

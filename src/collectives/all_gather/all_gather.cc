// all_gather: over TCP a ring; on one host, shared memory (shm.cc).
//
// Ring schedule: in step s (0..P-2) rank r forwards block r-s (its own at
// s = 0) to the right and receives block r-s-1 from the left, straight
// into its place in the output.
#include <cstring>

#include "collectives/all_gather/variants.h"
#include "collectives/blocks.h"
#include "collectives/collectives.h"

namespace meshcomm::collectives {

void allGather(Comm& comm, const void* input, size_t inputBytes,
               const std::vector<Block>& outputs) {
  if (chooseAlgorithm(Opcode::kAllGather, 0, comm.size(), comm.route()) == Algorithm::kShm) {
    ShmOp local = comm.shmOp();
    shm::allGather(local, input, inputBytes, outputs);
    return;
  }
  const int p = comm.size();
  const int r = comm.rank();
  const Block& own = outputs[static_cast<size_t>(r)];
  // The input may already be the output's own block (in-place gather).
  if (own.data != input && inputBytes > 0) std::memmove(own.data, input, inputBytes);
  const int right = wrap(r, 1, p);
  const int left = wrap(r, -1, p);
  for (int s = 0; s < p - 1; ++s) {
    const Block& out = outputs[static_cast<size_t>(wrap(r, -s, p))];
    const Block& in = outputs[static_cast<size_t>(wrap(r, -s - 1, p))];
    comm.send(right, static_cast<uint32_t>(s), out.data, out.bytes);
    comm.recv(left, static_cast<uint32_t>(s), in.data, in.bytes);
    comm.waitAll();
  }
}

}  // namespace meshcomm::collectives

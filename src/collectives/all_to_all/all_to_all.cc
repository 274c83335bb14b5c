// all_to_all: over TCP a pairwise exchange; on one host, shared memory
// (shm.cc).
//
// Pairwise schedule: in round i (1..P-1) rank r sends to r+i and receives
// from r-i, so every round is a permutation and no rank is the target of two
// senders at once. Rounds overlap in a window, which keeps links busy
// without flooding a large group with requests at once.
#include <cstring>

#include "collectives/all_to_all/variants.h"
#include "collectives/blocks.h"
#include "collectives/collectives.h"

namespace meshcomm::collectives {
namespace {
constexpr int kWindow = 8;
}  // namespace

void allToAll(Comm& comm, const std::vector<Block>& sends, const std::vector<Block>& recvs) {
  if (chooseAlgorithm(Opcode::kAllToAll, 0, comm.size(), comm.route()) == Algorithm::kShm) {
    ShmOp local = comm.shmOp();
    shm::allToAll(local, sends, recvs);
    return;
  }
  const int p = comm.size();
  const int r = comm.rank();
  const Block& selfSend = sends[static_cast<size_t>(r)];
  const Block& selfRecv = recvs[static_cast<size_t>(r)];
  if (selfSend.data != selfRecv.data && selfSend.bytes > 0) {
    std::memmove(selfRecv.data, selfSend.data, selfSend.bytes);
  }
  for (int i = 1; i < p; ++i) {
    const int to = wrap(r, i, p);
    const int from = wrap(r, -i, p);
    comm.send(to, 0, sends[static_cast<size_t>(to)].data, sends[static_cast<size_t>(to)].bytes);
    comm.recv(from, 0, recvs[static_cast<size_t>(from)].data,
              recvs[static_cast<size_t>(from)].bytes);
    if (i % kWindow == 0) comm.waitAll();
  }
  comm.waitAll();
}

}  // namespace meshcomm::collectives

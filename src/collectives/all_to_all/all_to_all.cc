// all_to_all: over messages a pairwise exchange; on one host, the host
// domain's (host_collectives.h).
//
// Pairwise schedule: in round i (1..P-1) rank r sends to r+i and receives
// from r-i, so every round is a permutation and no rank is the target of two
// senders at once. Rounds of small blocks overlap in a window, which hides
// each round's latency without flooding a large group with requests at
// once. Rounds of large blocks run one at a time: each rank then streams to
// one peer and from one, and the streams of overlapping rounds cost more in
// contention for the cores than they gain (16 MiB at 4 ranks on 2 cores:
// 11.3-11.6 ms one round at a time against 13.1-15.1 ms with the three
// rounds in flight; 4 MiB: 2.5-2.7 against 2.7-2.9 ms; docs/tuning.md).
// Ranks need not agree on the window: every round completes once the
// rounds before it have, whatever each rank overlaps.
#include <algorithm>
#include <cstring>

#include "collectives/blocks.h"
#include "collectives/collectives.h"

namespace meshcomm::collectives {
namespace {
constexpr int kWindow = 8;
constexpr size_t kOneRoundFromBytes = size_t{1} << 20;  // the largest block sent
}  // namespace

void allToAll(Comm& comm, std::span<const Block> sends, std::span<const Block> recvs) {
  if (comm.algorithm() == Algorithm::kOnHost) {
    comm.host().allToAll(comm.hostCall(), sends, recvs, nullptr);
    return;
  }
  const int p = comm.size();
  const int r = comm.rank();
  copyOwnBlock(sends, recvs, r);
  size_t largest = 0;
  for (const Block& b : sends) largest = std::max(largest, b.bytes);
  const int window = largest >= kOneRoundFromBytes ? 1 : kWindow;
  for (int i = 1; i < p; ++i) {
    const int to = wrap(r, i, p);
    const int from = wrap(r, -i, p);
    comm.send(to, 0, sends[static_cast<size_t>(to)].data, sends[static_cast<size_t>(to)].bytes);
    comm.recv(from, 0, recvs[static_cast<size_t>(from)].data,
              recvs[static_cast<size_t>(from)].bytes);
    if (i % window == 0) comm.waitAll();
  }
  comm.waitAll();
}

}  // namespace meshcomm::collectives

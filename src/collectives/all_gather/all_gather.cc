// all_gather: over TCP Bruck's schedule for outputs up to 1 MiB and a ring
// above; on one host, the host domain's (host_collectives.h).
//
// Ring: in step s (0..P-2) rank r forwards block r-s (its own at s = 0) to
// the right and receives block r-s-1 from the left, straight into its
// place in the output. P-1 steps, each moving one block.
//
// Bruck: in step k (distance d = 2^k) rank r sends the c = min(d, P-d)
// blocks it holds, r, r-1, ..., r-c+1, to rank r+d and receives blocks
// r-d, ..., r-d-c+1 from rank r-d, again straight into place. Its
// ceil(log2 P) steps move the same bytes as the ring's P-1, so a small
// output, whose time is the steps' latency, takes fewer of them. A step's
// blocks go as one message each, written together (SendHold). The schedule
// is Bruck's mirrored so that its first step is the ring's: ranks that
// disagree on the size, and so on the schedule, still meet in that step
// and fail with Mismatch rather than wait for each other.
#include <algorithm>
#include <cstring>

#include "collectives/blocks.h"
#include "collectives/collectives.h"

namespace meshcomm::collectives {
namespace {

void ring(Comm& comm, std::span<const Block> outputs) {
  const int p = comm.size();
  const int r = comm.rank();
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

void bruck(Comm& comm, std::span<const Block> outputs) {
  const int p = comm.size();
  const int r = comm.rank();
  uint32_t step = 0;  // one per block, numbered alike by sender and receiver
  for (int d = 1; d < p; d *= 2) {
    const int count = std::min(d, p - d);
    const int to = wrap(r, d, p);
    const int from = wrap(r, -d, p);
    SendHold hold(comm.transport());
    for (int j = 0; j < count; ++j) {
      const Block& out = outputs[static_cast<size_t>(wrap(r, -j, p))];
      comm.send(to, step + static_cast<uint32_t>(j), out.data, out.bytes);
    }
    hold.release();
    for (int j = 0; j < count; ++j) {
      const Block& in = outputs[static_cast<size_t>(wrap(r, -d - j, p))];
      comm.recv(from, step + static_cast<uint32_t>(j), in.data, in.bytes);
    }
    comm.waitAll();
    step += static_cast<uint32_t>(count);
  }
}

}  // namespace

void allGather(Comm& comm, const void* input, size_t inputBytes,
               std::span<const Block> outputs) {
  const Algorithm algo = comm.algorithm();
  if (algo == Algorithm::kOnHost) {
    comm.host().allGather(comm.hostCall(), input, inputBytes, outputs, nullptr);
    return;
  }
  const Block& own = outputs[static_cast<size_t>(comm.rank())];
  // The input may already be the output's own block (in-place gather).
  if (own.data != input && inputBytes > 0) std::memmove(own.data, input, inputBytes);
  if (algo == Algorithm::kBruck) {
    bruck(comm, outputs);
  } else {
    ring(comm, outputs);
  }
}

}  // namespace meshcomm::collectives

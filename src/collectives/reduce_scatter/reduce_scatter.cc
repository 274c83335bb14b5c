// reduce_scatter: over TCP recursive halving on a power of two ranks up to
// a size (tuning.cc), else a ring, both over per-rank blocks of any sizes;
// on one host, the host domain's (host_collectives.h).
//
// The ring's schedule: in step s (0..P-2) rank r sends its partial of block r-s-1
// (its own input at s = 0) to the right and receives the left neighbour's
// partial of block r-s-2, which it combines with its own input block.
// At the last step that block is r itself, combined straight into the
// output. Partials alternate between two buffers, since step s's send
// still reads the partial step s-1 produced.
//
// Only the last step writes the output. A rank posts step s's sends only
// after step s-1's receives passed their signature check, so the first
// chunk of the last step reaching a rank means the P-1 neighbouring pairs
// ending at it all agreed: a rank with a different op or count leaves
// every output as it was.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "collectives/blocks.h"
#include "collectives/collectives.h"
#include "collectives/ring_step.h"
#include "common/check.h"
#include "reduce/reduce.h"

namespace meshcomm::collectives {
namespace {

// Recursive halving, on a power of two ranks: with the partner at distance
// P/2, P/4, ..., 1, a rank sends the half of its current range of blocks
// that the partner keeps and receives the partner's partial of the half it
// keeps (the one its bit of the rank selects), reducing it with its own;
// after log2(P) steps its range is its own block. Each rank moves (P-1)/P
// of the input, as in the ring, in log2(P) steps instead of P-1: fewer
// latencies, and fewer wake-ups where ranks outnumber cores.
//
// Partials accumulate in scratch and only the last step writes the output:
// by then this rank's partners (each after its own earlier exchanges
// passed their signature checks) have checked signatures with every rank of
// the butterfly, so ranks that disagree fail with every output as it was.
void recursiveHalving(Comm& comm, const uint8_t* in, std::span<const size_t> blockCounts,
                      uint8_t* out, DType dtype, ReduceOp op) {
  const int p = comm.size();
  const int r = comm.rank();
  const size_t es = dtypeSize(dtype);
  const BlockOffsets offs = offsetsOf(blockCounts);  // P + 1: the total last
  const size_t total = offs.back();
  auto at = [&](int block) { return offs[static_cast<size_t>(block)] * es; };
  auto length = [&](int from, int to) { return offs[static_cast<size_t>(to)] - offs[static_cast<size_t>(from)]; };
  uint8_t* acc = p > 2 ? comm.scratch(Scratch::kAccumulator, total * es) : nullptr;
  uint8_t* tmp = comm.scratch(Scratch::kRecv, total * es);
  const uint8_t* partial = in;  // this rank's partial of its current range
  uint32_t step = 0;
  int lo = 0;  // first block of the current range; its width is 2 * half
  for (int half = p / 2; half >= 1; half /= 2, ++step) {
    const int partner = r ^ half;
    const bool keepLow = (r & half) == 0;
    const int keep = keepLow ? lo : lo + half;
    const int give = keepLow ? lo + half : lo;
    const size_t keepCount = length(keep, keep + half);
    comm.sendRecv(partner, partial + at(give), length(give, give + half) * es, partner, tmp + at(keep),
                  keepCount * es, step);
    // The last exchange passed: this rank's block (keep == r) goes
    // straight into the output. In place, the output is the block of the
    // input it reduces with, and the kernels take an output only as their
    // first input.
    uint8_t* dst = half == 1 ? out : acc + at(keep);
    const void* srcs[2] = {partial + at(keep), tmp + at(keep)};
    reduce::reduceInto(op, dtype, dst, srcs, 2, keepCount);
    partial = acc;
    lo = keep;
  }
}

// The ring: see the top of the file.
void ring(Comm& comm, const uint8_t* in, std::span<const size_t> blockCounts, uint8_t* out,
          DType dtype, ReduceOp op) {
  const int p = comm.size();
  const int r = comm.rank();
  const size_t es = dtypeSize(dtype);
  const BlockOffsets offs = offsetsOf(blockCounts);
  const int right = wrap(r, 1, p);
  const int left = wrap(r, -1, p);
  const size_t maxBlock = *std::max_element(blockCounts.begin(), blockCounts.end());
  const size_t chunk = std::max<size_t>(1, pipelineChunkBytes(maxBlock * es) / es);
  const size_t maxChunks = std::max<size_t>(1, ceilDiv(maxBlock, chunk));
  MESHCOMM_CHECK(static_cast<size_t>(p) * maxChunks < Comm::kStepsPerPhase,
                 "reduce-scatter schedule too long; raise MESHCOMM_CHUNK_BYTES");
  uint8_t* recvBuf = comm.scratch(Scratch::kRecv, maxBlock * es);
  uint8_t* partial[2] = {comm.scratch(Scratch::kPartialA, maxBlock * es),
                         comm.scratch(Scratch::kPartialB, maxBlock * es)};

  const uint8_t* sending = in + offs[wrap(r, -1, p)] * es;
  for (int s = 0; s < p - 1; ++s) {
    const int sendBlock = wrap(r, -s - 1, p);
    const int recvBlock = wrap(r, -s - 2, p);
    const bool last = s == p - 2;
    const RingStepReceives incoming = postRingStep(
        comm, right, left, static_cast<uint32_t>(static_cast<size_t>(s) * maxChunks), sending,
        blockCounts[sendBlock], recvBuf, blockCounts[recvBlock], chunk, es);
    uint8_t* dst = last ? out : partial[s % 2];
    for (size_t k = 0; k < incoming.chunks.size(); ++k) {
      comm.wait(std::span<const RequestPtr>(&incoming.requests[k], 1));
      const size_t o = incoming.chunks[k].offset * es;
      const uint8_t* own = in + offs[recvBlock] * es + o;
      // In place (the output is this rank's block of the input): the
      // kernels accept an output only as their first input.
      const void* srcs[2] = {recvBuf + o, own};
      if (dst + o == own) std::swap(srcs[0], srcs[1]);
      reduce::reduceInto(op, dtype, dst + o, srcs, 2, incoming.chunks[k].count);
    }
    comm.waitAll();
    sending = dst;
  }
}

}  // namespace

void reduceScatter(Comm& comm, const void* input, std::span<const size_t> blockCounts,
                   void* output, DType dtype, ReduceOp op) {
  if (comm.algorithm() == Algorithm::kOnHost) {
    comm.host().reduceScatter(comm.hostCall(), input, blockCounts, output, dtype, op, nullptr);
    return;
  }
  const int p = comm.size();
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  if (p == 1) {
    if (out != in && blockCounts[0] > 0) std::memmove(out, in, blockCounts[0] * dtypeSize(dtype));
    return;
  }
  // reduce's reduce_scatter_gather runs the reduce-scatter this family
  // would pick for its buffer over messages. Forced on a group that is not
  // a power of two, recursive halving gives way to the ring.
  Algorithm algo = comm.algorithm();
  if (algo == Algorithm::kReduceScatterGather) {
    const size_t bytes = offsetsOf(blockCounts).back() * dtypeSize(dtype);
    algo = chooseStepAlgorithm(Opcode::kReduceScatter, bytes, p, Route::kFlat);
  }
  const bool powerOfTwo = (p & (p - 1)) == 0;
  if (algo == Algorithm::kRecursiveHalving && powerOfTwo) {
    recursiveHalving(comm, in, blockCounts, out, dtype, op);
  } else {
    ring(comm, in, blockCounts, out, dtype, op);
  }
}

}  // namespace meshcomm::collectives

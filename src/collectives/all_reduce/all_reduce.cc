// all_reduce: over TCP, recursive doubling for small buffers and a ring for
// large ones; on one host, shared memory (shm.cc); across hosts,
// hierarchical (hierarchical.cc).
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/all_reduce/variants.h"
#include "collectives/blocks.h"
#include "collectives/collectives.h"
#include "common/check.h"
#include "reduce/reduce.h"

namespace meshcomm::collectives {
namespace {

// Recursive doubling. Schedule, with p2 the largest power of two <= P and
// rem = P - p2: (1) each even rank below 2*rem hands its buffer to the odd
// rank above it and sits out; (2) the p2 remaining ranks exchange whole
// buffers with partners at distance 1, 2, 4, ... and reduce after each
// exchange; (3) the odd ranks hand the result back. Both partners of every
// exchange compute op(a, b) of the same two values, and op is commutative,
// so every rank ends with identical bits.
//
// With more than two ranks the partial results accumulate in scratch and
// reach `data` only when the rank is done: a rank is done only once every
// rank's data has reached it through exchanges whose partners checked each
// other's signature, so ranks that disagree (a different op) fail without
// any output holding a partial result. Two ranks make one exchange, whose
// receive is checked before anything is written.
void recursiveDoubling(Comm& comm, uint8_t* data, size_t count, DType dtype, ReduceOp op) {
  const int p = comm.size();
  const int r = comm.rank();
  const size_t bytes = count * dtypeSize(dtype);
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  const int rem = p - p2;
  uint8_t* tmp = comm.scratch(Scratch::kRecv, bytes);
  const bool staged = p > 2;
  uint8_t* acc = staged ? comm.scratch(Scratch::kAccumulator, bytes) : data;
  if (staged && bytes > 0) std::memcpy(acc, data, bytes);

  int vr;  // rank among the p2 ranks of step (2), or -1 when sitting out
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      comm.send(r + 1, 0, data, bytes);
      comm.waitAll();
      vr = -1;
    } else {
      comm.recv(r - 1, 0, tmp, bytes);
      comm.waitAll();
      reduce::reduceInPlace(op, dtype, acc, tmp, count);
      vr = r / 2;
    }
  } else {
    vr = r - rem;
  }
  if (vr >= 0) {
    uint32_t step = 1;
    for (int mask = 1; mask < p2; mask <<= 1, ++step) {
      int vpartner = vr ^ mask;
      int partner = vpartner < rem ? vpartner * 2 + 1 : vpartner + rem;
      comm.sendRecv(partner, acc, bytes, partner, tmp, bytes, step);
      reduce::reduceInPlace(op, dtype, acc, tmp, count);
    }
  }
  if (r < 2 * rem) {
    if (r % 2 == 1) {
      comm.send(r - 1, 63, acc, bytes);
    } else {
      comm.recv(r + 1, 63, data, bytes);
    }
    comm.waitAll();
  }
  if (staged && vr >= 0 && bytes > 0) std::memcpy(data, acc, bytes);
}

// Ring: P-1 reduce-scatter steps, then P-1 all-gather steps, over P
// near-equal segments. In reduce-scatter step s a rank sends its partial of
// segment r-s (its own input at s = 0) and receives the left neighbour's
// partial of segment r-s-1, which it combines with its own input chunk by
// chunk as the chunks arrive, so reduction overlaps the transfer;
// afterwards it owns the finished segment r+1. In all-gather step s it
// forwards segment r+1-s and receives segment r-s straight into place.
//
// The partials live in scratch (two buffers, since step s's send still
// reads the partial step s-1 produced) and only the last reduce-scatter
// step writes `data`: a rank posts step s's sends only after step s-1's
// receives passed their signature check, so the first chunk of the last
// step reaching a rank means the P-1 neighbouring pairs ending at it all
// agreed, i.e. every rank agrees. Ranks that disagree (a different op or
// count) fail with every output as it was.
void ring(Comm& comm, uint8_t* data, size_t count, DType dtype, ReduceOp op) {
  const int p = comm.size();
  const int r = comm.rank();
  const size_t es = dtypeSize(dtype);
  const std::vector<size_t> counts = evenSplit(count, p);
  const std::vector<size_t> offs = offsetsOf(counts);
  const int right = wrap(r, 1, p);
  const int left = wrap(r, -1, p);
  const size_t maxSeg = counts[0];
  const size_t chunk = std::max<size_t>(1, pipelineChunkBytes(maxSeg * es) / es);
  const size_t maxChunks = std::max<size_t>(1, ceilDiv(maxSeg, chunk));
  MESHCOMM_CHECK(static_cast<size_t>(2 * p) * maxChunks < Comm::kStepsPerPhase,
                 "ring schedule too long; raise MESHCOMM_CHUNK_BYTES");
  // A segment arrives in one of two buffers and is reduced there, in place,
  // so it is the partial the next step sends: as cheap as reducing into
  // `data` (the chunk just received is still in cache), without writing it.
  uint8_t* partial[2] = {comm.scratch(Scratch::kPartialA, maxSeg * es),
                         comm.scratch(Scratch::kPartialB, maxSeg * es)};

  const uint8_t* sending = data + offs[r] * es;
  for (int s = 0; s < p - 1; ++s) {
    const int sendSeg = wrap(r, -s, p);
    const int recvSeg = wrap(r, -s - 1, p);
    const bool last = s == p - 2;
    const auto base = static_cast<uint32_t>(static_cast<size_t>(s) * maxChunks);
    const std::vector<Chunk> out = chunksOf(counts[sendSeg], chunk);
    for (size_t k = 0; k < out.size(); ++k) {
      comm.send(right, base + static_cast<uint32_t>(k), sending + out[k].offset * es,
                out[k].count * es);
    }
    uint8_t* arrived = partial[s % 2];
    const std::vector<Chunk> in = chunksOf(counts[recvSeg], chunk);
    std::vector<RequestPtr> recvs;
    for (size_t k = 0; k < in.size(); ++k) {
      recvs.push_back(comm.recv(left, base + static_cast<uint32_t>(k),
                                arrived + in[k].offset * es, in[k].count * es));
    }
    uint8_t* own = data + offs[recvSeg] * es;
    for (size_t k = 0; k < in.size(); ++k) {
      comm.wait(std::span<const RequestPtr>(&recvs[k], 1));
      const size_t o = in[k].offset * es;
      if (last) {
        reduce::reduceInPlace(op, dtype, own + o, arrived + o, in[k].count);
      } else {
        reduce::reduceInPlace(op, dtype, arrived + o, own + o, in[k].count);
      }
    }
    comm.waitAll();
    sending = arrived;
  }
  for (int s = 0; s < p - 1; ++s) {
    const int sendSeg = wrap(r, 1 - s, p);
    const int recvSeg = wrap(r, -s, p);
    const auto step = static_cast<uint32_t>(static_cast<size_t>(p - 1 + s) * maxChunks);
    comm.send(right, step, data + offs[sendSeg] * es, counts[sendSeg] * es);
    comm.recv(left, step, data + offs[recvSeg] * es, counts[recvSeg] * es);
    comm.waitAll();
  }
}

}  // namespace

void allReduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op) {
  if (comm.size() == 1) return;
  auto* bytes = static_cast<uint8_t*>(data);
  const Algorithm algo = comm.algorithm();
  if (algo == Algorithm::kShmOneShot || algo == Algorithm::kShmReduceScatter ||
      algo == Algorithm::kShmSingleCopy) {
    ShmOp local = comm.shmOp();
    shm::allReduce(local, data, count, dtype, op, algo, comm.scratchArena());
  } else if (algo == Algorithm::kHierarchical) {
    hierarchical::allReduce(comm, data, count, dtype, op);
  } else if (algo == Algorithm::kRing) {
    ring(comm, bytes, count, dtype, op);
  } else {
    recursiveDoubling(comm, bytes, count, dtype, op);
  }
}

}  // namespace meshcomm::collectives

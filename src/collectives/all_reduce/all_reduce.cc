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
// near-equal segments, pipelined chunk by chunk. Step t (0 <= t < 2(P-1))
// receives segment r-t-1 from the left: in a reduce-scatter step (t <
// P-1) into a staging area, then added into place; in an all-gather step
// straight into place. Each chunk is forwarded to the right as step t+1
// the moment it is final, rather than when the whole step is, so a chunk
// never waits for the rest of its segment, and with more ranks than cores
// a rank that gets the core late holds up one chunk, not a whole step.
// Step 0 sends the rank's own segment r; after the reduce-scatter steps
// the rank owns the finished segment r+1, which its first all-gather send
// forwards.
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
  const int steps = 2 * (p - 1);
  MESHCOMM_CHECK(static_cast<size_t>(steps + 1) * maxChunks < Comm::kStepsPerPhase,
                 "ring schedule too long; raise MESHCOMM_CHUNK_BYTES");
  // Two staging areas: step t+1's receives are posted while step t still
  // reduces out of the other one.
  uint8_t* staging = comm.scratch(Scratch::kRecv, 2 * maxSeg * es);
  auto tagOf = [&](int step, size_t k) {
    return static_cast<uint32_t>(static_cast<size_t>(step) * maxChunks + k);
  };
  auto segmentOf = [&](int step) { return wrap(r, -step - 1, p); };  // received in `step`
  auto landing = [&](int step) {
    return step < p - 1 ? staging + static_cast<size_t>(step % 2) * maxSeg * es
                        : data + offs[segmentOf(step)] * es;
  };
  auto postReceives = [&](int step) {
    std::vector<RequestPtr> out;
    if (step >= steps) return out;
    for (const Chunk& c : chunksOf(counts[segmentOf(step)], chunk)) {
      out.push_back(comm.recv(left, tagOf(step, out.size()), landing(step) + c.offset * es,
                              c.count * es));
    }
    return out;
  };

  const std::vector<Chunk> own = chunksOf(counts[r], chunk);
  for (size_t k = 0; k < own.size(); ++k) {
    comm.send(right, tagOf(0, k), data + (offs[r] + own[k].offset) * es, own[k].count * es);
  }
  std::vector<RequestPtr> receives = postReceives(0);
  for (int t = 0; t < steps; ++t) {
    std::vector<RequestPtr> next = postReceives(t + 1);
    const int seg = segmentOf(t);
    const std::vector<Chunk> in = chunksOf(counts[seg], chunk);
    for (size_t k = 0; k < in.size(); ++k) {
      comm.wait(std::span<const RequestPtr>(&receives[k], 1));
      uint8_t* at = data + (offs[seg] + in[k].offset) * es;
      if (t < p - 1) reduce::reduceInPlace(op, dtype, at, landing(t) + in[k].offset * es, in[k].count);
      if (t + 1 < steps) comm.send(right, tagOf(t + 1, k), at, in[k].count * es);
    }
    receives = std::move(next);
  }
  comm.waitAll();
}

}  // namespace

void allReduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op) {
  if (comm.size() == 1) return;
  auto* bytes = static_cast<uint8_t*>(data);
  const Algorithm algo =
      chooseAlgorithm(Opcode::kAllReduce, count * dtypeSize(dtype), comm.size(), comm.route());
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

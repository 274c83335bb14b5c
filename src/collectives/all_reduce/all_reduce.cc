// all_reduce: over TCP, recursive doubling for small buffers, recursive
// halving and doubling or a ring for large ones; on one host, the host domain's
// (host_collectives.h); across hosts, hierarchical (hierarchical.cc).
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/all_reduce/variants.h"
#include "collectives/blocks.h"
#include "collectives/collectives.h"
#include "collectives/ring_step.h"
#include "common/check.h"
#include "reduce/reduce.h"

namespace meshcomm::collectives {
namespace {

// The fold of recursive doubling and of halving-doubling, with p2 the
// largest power of two <= P and rem = P - p2: each even rank below 2*rem
// hands its buffer to the odd rank above it (step 0) and sits out until it
// gets the result back (step 63, unfold()); the p2 remaining ranks run the
// power-of-two schedule under virtual ranks 0..p2-1.
struct Fold {
  int p2 = 1;
  int rem = 0;
  int vr = -1;  // this rank's virtual rank, or -1 while it sits out

  Fold(int p, int r) {
    while (p2 * 2 <= p) p2 *= 2;
    rem = p - p2;
    vr = r < 2 * rem ? (r % 2 == 0 ? -1 : r / 2) : r - rem;
  }
  int rankOf(int virtualRank) const {
    return virtualRank < rem ? virtualRank * 2 + 1 : virtualRank + rem;
  }

  // Step 0. Returns whether this rank took a neighbour's buffer in: then
  // `acc` holds op(data, neighbour's) (received through `tmp`).
  bool foldIn(Comm& comm, const uint8_t* data, uint8_t* acc, uint8_t* tmp, size_t count,
              DType dtype, ReduceOp op) const {
    const int r = comm.rank();
    if (r >= 2 * rem) return false;
    const size_t bytes = count * dtypeSize(dtype);
    if (vr < 0) {
      comm.send(r + 1, 0, data, bytes);
      comm.waitAll();
      return false;
    }
    comm.recv(r - 1, 0, tmp, bytes);
    comm.waitAll();
    const void* inputs[] = {data, tmp};
    reduce::reduceInto(op, dtype, acc, inputs, 2, count);
    return true;
  }

  // Step 63: the ranks that took a buffer in hand `result` back, into the
  // `data` of the ranks that sat out.
  void foldOut(Comm& comm, const uint8_t* result, uint8_t* data, size_t bytes) const {
    const int r = comm.rank();
    if (r >= 2 * rem) return;
    if (vr >= 0) {
      comm.send(r - 1, 63, result, bytes);
    } else {
      comm.recv(r + 1, 63, data, bytes);
    }
    comm.waitAll();
  }
};

// Recursive doubling: after the fold, the p2 ranks exchange whole buffers
// with partners at distance 1, 2, 4, ... and reduce after each exchange;
// then the odd ranks of the fold hand the result back. Both partners of every
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
  const Fold fold(p, r);
  const size_t bytes = count * dtypeSize(dtype);
  uint8_t* tmp = comm.scratch(Scratch::kRecv, bytes);
  const bool staged = p > 2;
  uint8_t* acc = staged ? comm.scratch(Scratch::kAccumulator, bytes) : data;
  if (!fold.foldIn(comm, data, acc, tmp, count, dtype, op) && staged && bytes > 0) {
    std::memcpy(acc, data, bytes);
  }
  if (fold.vr >= 0) {
    uint32_t step = 1;
    for (int mask = 1; mask < fold.p2; mask <<= 1, ++step) {
      const int partner = fold.rankOf(fold.vr ^ mask);
      comm.sendRecv(partner, acc, bytes, partner, tmp, bytes, step);
      reduce::reduceInPlace(op, dtype, acc, tmp, count);
    }
  }
  fold.foldOut(comm, acc, data, bytes);
  if (staged && fold.vr >= 0 && bytes > 0) std::memcpy(data, acc, bytes);
}

// Recursive halving, then recursive doubling (Rabenseifner's schedule): the
// p2 ranks reduce-scatter by exchanging, with the partner at distance
// p2/2, p2/4, ..., 1, the half of their current range of blocks the partner
// keeps (each keeps the half its bit of the virtual rank selects), then
// all-gather in reverse, their ranges doubling. Each rank moves 2(p2-1)/p2
// of the buffer, as in the ring, in 2 log2(p2) steps instead of 2(P-1):
// fewer latencies and fewer wake-ups, which is what a loaded host pays for.
//
// The reduce-scatter accumulates in scratch and `data` is written only
// once its last exchange passed: by then this rank's partners (each at its
// own step, after its own earlier exchanges passed) checked signatures with
// every rank of the butterfly, so ranks that disagree fail with every
// output as it was. Each
// block is reduced by one rank and then copied to the others, so every
// rank ends with the same bits.
void halvingDoubling(Comm& comm, uint8_t* data, size_t count, DType dtype, ReduceOp op) {
  const int r = comm.rank();
  const Fold fold(comm.size(), r);
  const size_t es = dtypeSize(dtype);
  const size_t bytes = count * es;
  // Partials between exchanges; two ranks reduce straight into `data`.
  uint8_t* acc = fold.p2 > 2 || fold.rem > 0 ? comm.scratch(Scratch::kAccumulator, bytes) : nullptr;
  uint8_t* tmp = comm.scratch(Scratch::kRecv, bytes);

  // This rank's partial of its current range.
  const uint8_t* partial = fold.foldIn(comm, data, acc, tmp, count, dtype, op) ? acc : data;
  if (fold.vr >= 0) {
    const int vr = fold.vr;
    const std::vector<size_t> counts = evenSplit(count, fold.p2);
    const BlockOffsets offs = offsetsOf(counts);
    auto at = [&](int block) { return offs[static_cast<size_t>(block)] * es; };
    auto length = [&](int from, int to) { return (offs[static_cast<size_t>(to)] -
                                                  offs[static_cast<size_t>(from)]); };
    uint32_t step = 1;
    int lo = 0;  // first block of the current range; its width is 2 * half
    for (int half = fold.p2 / 2; half >= 1; half /= 2, ++step) {
      const int partner = fold.rankOf(vr ^ half);
      const bool keepLow = (vr & half) == 0;
      const int keep = keepLow ? lo : lo + half;
      const int give = keepLow ? lo + half : lo;
      const size_t keepCount = length(keep, keep + half);
      comm.sendRecv(partner, partial + at(give), length(give, give + half) * es, partner,
                    tmp + at(keep), keepCount * es, step);
      // The last exchange passed: every rank agreed, and this rank's block
      // (vr) is finished straight into `data`.
      uint8_t* out = half == 1 ? data + at(keep) : acc + at(keep);
      const void* inputs[] = {partial + at(keep), tmp + at(keep)};
      reduce::reduceInto(op, dtype, out, inputs, 2, keepCount);
      partial = acc;
      lo = keep;
    }
    for (int width = 1; width < fold.p2; width *= 2, ++step) {
      const int partner = fold.rankOf(vr ^ width);
      const int mine = lo;
      const int theirs = (vr & width) == 0 ? lo + width : lo - width;
      comm.sendRecv(partner, data + at(mine), length(mine, mine + width) * es, partner,
                    data + at(theirs), length(theirs, theirs + width) * es, step);
      lo = std::min(mine, theirs);
    }
  }
  fold.foldOut(comm, data, data, bytes);
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
  const BlockOffsets offs = offsetsOf(counts);
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
    uint8_t* arrived = partial[s % 2];
    const RingStepReceives incoming = postRingStep(
        comm, right, left, static_cast<uint32_t>(static_cast<size_t>(s) * maxChunks), sending,
        counts[sendSeg], arrived, counts[recvSeg], chunk, es);
    uint8_t* own = data + offs[recvSeg] * es;
    for (size_t k = 0; k < incoming.chunks.size(); ++k) {
      comm.wait(std::span<const RequestPtr>(&incoming.requests[k], 1));
      const size_t o = incoming.chunks[k].offset * es;
      if (last) {
        reduce::reduceInPlace(op, dtype, own + o, arrived + o, incoming.chunks[k].count);
      } else {
        reduce::reduceInPlace(op, dtype, arrived + o, own + o, incoming.chunks[k].count);
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
    comm.host().allReduce(comm.hostCall(), data, count, dtype, op, algo, comm.scratchArena());
  } else if (algo == Algorithm::kHierarchical) {
    hierarchical::allReduce(comm, data, count, dtype, op);
  } else if (algo == Algorithm::kRing) {
    ring(comm, bytes, count, dtype, op);
  } else if (algo == Algorithm::kHalvingDoubling) {
    halvingDoubling(comm, bytes, count, dtype, op);
  } else {
    recursiveDoubling(comm, bytes, count, dtype, op);
  }
}

}  // namespace meshcomm::collectives

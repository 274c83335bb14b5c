// reduce: on one host, the host domain's (host_collectives.h); across hosts, hierarchical
// (hierarchical.cc).
//
// Over TCP, a binomial tree for short buffers; for long ones a ring
// reduce-scatter followed by a gather of the finished blocks at the root,
// which spreads the reduction work over every rank.
#include <cstring>
#include <vector>

#include "collectives/blocks.h"
#include "collectives/collectives.h"
#include "collectives/reduce/variants.h"
#include "reduce/reduce.h"

namespace meshcomm::collectives {
namespace {

// Virtual rank vr = (rank - root) mod P. At distance mask = 1, 2, 4, ...
// a rank whose bit `mask` is clear absorbs the partial of vr + mask; one
// whose bit is set hands its partial to vr - mask and is done.
void binomialReduce(Comm& comm, uint8_t* data, size_t count, DType dtype, ReduceOp op, int root) {
  const int p = comm.size();
  const int vr = wrap(comm.rank(), -root, p);
  const size_t bytes = count * dtypeSize(dtype);
  // Non-root ranks must leave their buffer alone, so they reduce in a copy.
  uint8_t* acc = data;
  if (vr != 0) {
    acc = comm.scratch(Scratch::kCopy, bytes);
    if (bytes > 0) std::memcpy(acc, data, bytes);
  }
  uint8_t* tmp = comm.scratch(Scratch::kRecv, bytes);
  uint32_t step = 0;
  for (int mask = 1; mask < p; mask <<= 1, ++step) {
    if (vr & mask) {
      comm.send(wrap(vr - mask, root, p), step, acc, bytes);
      comm.waitAll();
      return;
    }
    if (vr + mask < p) {
      comm.recv(wrap(vr + mask, root, p), step, tmp, bytes);
      comm.waitAll();
      reduce::reduceInPlace(op, dtype, acc, tmp, count);
    }
  }
}

void reduceScatterGather(Comm& comm, uint8_t* data, size_t count, DType dtype, ReduceOp op,
                         int root) {
  const int p = comm.size();
  const int r = comm.rank();
  const size_t es = dtypeSize(dtype);
  const std::vector<size_t> counts = evenSplit(count, p);
  const BlockOffsets offs = offsetsOf(counts);
  const size_t mineBytes = counts[static_cast<size_t>(r)] * es;
  uint8_t* mine = comm.scratch(Scratch::kOwnBlock, mineBytes);
  reduceScatter(comm, data, counts, mine, dtype, op);
  comm.nextPhase();
  std::vector<Block> blocks;
  for (int j = 0; j < p; ++j) blocks.push_back({data + offs[j] * es, counts[j] * es});
  gather(comm, mine, mineBytes, blocks, root);
}

}  // namespace

void reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root) {
  if (comm.size() == 1) return;
  const Algorithm algo = comm.algorithm();
  if (algo == Algorithm::kOnHost) {
    comm.host().reduce(comm.hostCall(), data, count, dtype, op, root, nullptr);
    return;
  }
  if (algo == Algorithm::kHierarchical) {
    hierarchical::reduce(comm, data, count, dtype, op, root);
    return;
  }
  auto* bytes = static_cast<uint8_t*>(data);
  if (algo == Algorithm::kReduceScatterGather) {
    reduceScatterGather(comm, bytes, count, dtype, op, root);
  } else {
    binomialReduce(comm, bytes, count, dtype, op, root);
  }
}

}  // namespace meshcomm::collectives

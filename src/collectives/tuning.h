// Which algorithm runs a collective, by operation, size and group size.
// MESHCOMM_ALGO_<OP>=<name> forces one (for tests and benchmarks), e.g.
// MESHCOMM_ALGO_ALLREDUCE=ring. docs/tuning.md records the measurements
// behind the defaults.
#pragma once

#include <cstddef>
#include <string>

namespace meshcomm {

enum class Algorithm {
  kAuto,
  kRing,               // all_reduce: ring reduce-scatter + all-gather
  kRecursiveDoubling,  // all_reduce: log2(P) full-buffer exchanges
  kBinomialTree,       // broadcast, reduce
  kChain,              // broadcast: pipelined chain
  kReduceScatterGather,  // reduce: ring reduce-scatter, then gather at the root
};

const char* algorithmName(Algorithm algo);

Algorithm chooseAllReduce(size_t bytes, int groupSize);
Algorithm chooseBroadcast(size_t bytes, int groupSize);
Algorithm chooseReduce(size_t bytes, int groupSize);

// Bytes per pipelined chunk for a message of `bytes`.
size_t pipelineChunkBytes(size_t bytes);

}  // namespace meshcomm

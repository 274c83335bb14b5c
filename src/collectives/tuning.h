// Which algorithm runs a collective, by operation, size, group size and
// placement. MESHCOMM_ALGO_<OP>=<name> forces one (for tests and
// benchmarks), e.g. MESHCOMM_ALGO_ALLREDUCE=ring. docs/tuning.md records
// the measurements behind the defaults.
#pragma once

#include <cstddef>
#include <string>

#include "transport/placement.h"

namespace meshcomm {

enum class Algorithm {
  kAuto,
  kRing,               // all_reduce: ring reduce-scatter + all-gather
  kRecursiveDoubling,  // all_reduce: log2(P) full-buffer exchanges
  kBinomialTree,       // broadcast, reduce
  kChain,              // broadcast: pipelined chain
  kReduceScatterGather,  // reduce: ring reduce-scatter, then gather at the root
  kShmOneShot,         // one host: every rank reduces every slot (all_reduce)
  kShmReduceScatter,   // one host: slice-parallel reduce, then copy-out (all_reduce)
  kShmSingleCopy,      // one host: reduce-scatter + all-gather reading peers' buffers directly
  kShm,                // one host: the shared-memory algorithm (broadcast, reduce)
  kHierarchical,       // shared memory within hosts, TCP between one leader per host
};

const char* algorithmName(Algorithm algo);

// The algorithm for a call: MESHCOMM_ALGO_<OP> if set, else the default.
// Throw InvalidArgument if the variable names an unknown algorithm or one
// the route cannot run.
Algorithm chooseAllReduce(size_t bytes, int groupSize, Route route);
Algorithm chooseBroadcast(size_t bytes, int groupSize, Route route);
Algorithm chooseReduce(size_t bytes, int groupSize, Route route);

// The defaults alone, for algorithms that run one as a part (the leaders'
// step of a hierarchical one), where a forced choice would not apply.
Algorithm defaultAllReduce(size_t bytes, int groupSize, Route route);
Algorithm defaultBroadcast(size_t bytes, int groupSize, Route route);
Algorithm defaultReduce(size_t bytes, int groupSize, Route route);

// Bytes per pipelined chunk for a message of `bytes`.
size_t pipelineChunkBytes(size_t bytes);

// Whether a shared-memory collective writing `bytes` of output per rank,
// into memory it has not just read, streams the output past the caches
// (common/stream_copy.h): from 4 MiB, or MESHCOMM_SHM_STREAM_BYTES.
bool streamOutput(size_t bytes);

}  // namespace meshcomm

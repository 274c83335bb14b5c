// The tuning table: which algorithm runs a collective, by family, size,
// group size and route. Each family states its row (what it may run, its
// default) in <family>/defaults.h; its call.h asks once per call, before
// anything is queued; docs/tuning.md records the measurements behind the
// defaults.
//
// MESHCOMM_ALGO_<OP>=<name> forces an algorithm for the families that have
// a choice (for tests and benchmarks), e.g. MESHCOMM_ALGO_ALLREDUCE=ring.
// The variables are read once per process, at the first call that needs
// one.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <cstddef>
#include <string>

#include "collectives/operations.h"
#include "transport/placement.h"

namespace meshcomm {

enum class Algorithm {
  kAuto,               // MESHCOMM_ALGO_<OP>=auto: the default; never chosen
  kRing,               // all_reduce: ring reduce-scatter + all-gather; all_gather and
                       // reduce_scatter: a ring
  kRecursiveDoubling,  // all_reduce: log2(P) full-buffer exchanges
  kHalvingDoubling,    // all_reduce: recursive-halving reduce-scatter, recursive-doubling all-gather
  kRecursiveHalving,   // reduce_scatter: log2(P) exchanges of half the range left (P a power of two)
  kBinomialTree,       // broadcast, reduce
  kChain,              // broadcast: pipelined chain
  kReduceScatterGather,  // reduce: ring reduce-scatter, then gather at the root
  kLinear,             // gather, scatter: the root exchanges with every rank at once
  kPairwise,           // all_to_all: P-1 rounds, each a permutation
  kDissemination,      // barrier: log2(P) rounds of signals at distance 1, 2, 4, ...
  kBruck,              // all_gather: ceil(log2 P) steps at distance 1, 2, 4, ...
  kShmOneShot,         // one host: every rank reduces every slot (all_reduce)
  kShmReduceScatter,   // one host: slice-parallel reduce, then copy-out (all_reduce)
  kShmSingleCopy,      // one host: reduce-scatter + all-gather reading peers' buffers directly
  kOnHost,             // one host: the family's algorithm on the host's domain (all but all_reduce)
  kHierarchical,       // the host domain within hosts, messages between one leader per host
};


// The algorithm for one call of `collective` (a collective opcode, not
// kPointToPoint) among `groupSize` ranks that reach each other over
// `route`: the one MESHCOMM_ALGO_<OP> forces, else the table's default.
// `bytes` is the size of the buffer of all_reduce, broadcast and reduce,
// of the whole output of all_gather and of the whole input of
// reduce_scatter, whose defaults depend on it (the same on every rank, so
// every rank chooses alike); the other families choose by route alone and
// pass 0.
//
// ProcessGroup asks once per call, before it queues anything, and the call
// carries the answer (Comm::algorithm()) to its family and to the flight
// recorder. Throws InvalidArgument if the variable names no algorithm of
// the family, or one that a group of more than one rank over `route`
// cannot run, so a bad value fails the call on the caller's thread.
Algorithm chooseAlgorithm(Opcode collective, size_t bytes, int groupSize, Route route);

// The algorithm for a step of a hierarchical call that runs over another
// route (the leaders' exchange, over TCP): the forced one where that route
// can run it (a forced hierarchical algorithm cannot), else the default.
Algorithm chooseStepAlgorithm(Opcode collective, size_t bytes, int groupSize, Route route);

// The name MESHCOMM_ALGO_<OP> spells `algo` with ("ring", "shm_oneshot").
const char* algorithmName(Algorithm algo);

// Bytes per pipelined chunk for a message of `bytes`.
size_t pipelineChunkBytes(size_t bytes);

// Bytes per piece of the pipelined hierarchical all_reduce between two
// hosts for a buffer of `bytes` (MESHCOMM_HIER_PIECE_BYTES, default 4 MiB);
// 0: not pipelined (the buffer is small, or pipelining is turned off).
size_t hierarchicalPieceBytes(size_t bytes);

// Whether a shared-memory collective writing `bytes` of output per rank,
// into memory it has not just read, streams the output past the caches
// (common/stream_copy.h): from 4 MiB, or MESHCOMM_SHM_STREAM_BYTES.
bool streamOutput(size_t bytes);

// The settings that decide which messages and rounds ranks exchange: the
// forced algorithms (MESHCOMM_ALGO_<OP>), the pipeline chunk and the
// hierarchical piece. Ranks that differ in any of them would run different
// protocols against each other, so the runtime compares them when the
// ranks join (src/runtime/world.cc). "VARIABLE=value" for each one not at
// its default, in a fixed order, joined by commas; "" when all are. The
// values are the ones the calls use (parsed once per process), so what is
// compared is what runs; a value that names no algorithm stays as written,
// with any character other than letters, digits, '_', '.' and '-' as '?'.
std::string settingsRanksMustShare();

}  // namespace meshcomm

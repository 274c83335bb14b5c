// The collective matrix: every collective family x every dtype x every op
// it supports x sizes {0, 1, 7, 1024, 1 MiB + a few elements}, run inside
// one multi-process job (forking 8 ranks costs ~100 ms, so one job per
// combination would be far too slow), with roots rotating over all ranks.
//
// Every check is bitwise against collective_harness.h's serial reference
// (complex products: +0 == -0, see canonicalizeComplexZeros). Outputs start
// poisoned and carry a guard byte, so unwritten elements and writes past
// the end are caught; inputs that must stay untouched are re-checked.
// Half of the calls are blocking (run on the caller's thread), half go
// through the executor.
//
// Sizes: for allReduce, broadcast and reduce, n is the tensor's element
// count. For the gather/scatter/all-to-all/reduce-scatter families it is
// the per-rank block, except that the large size is split over the ranks
// (block = n / P, made odd) so every rank moves about 1 MiB.
//
// Which transport and which algorithms run it is the caller's choice,
// through the job's environment (transport_cases.h, MESHCOMM_ALGO_*).
//
// Thread-safety: runMatrixJob is called from the test's thread.
#pragma once

#include <string>
#include <vector>

#include "collective_harness.h"

namespace meshcomm::test {

enum class Family {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kAllGatherIntoTensor,
  kAllGatherIntoTensorUneven,
  kReduceScatter,
  kReduceScatterTensor,
  kReduceScatterTensorUneven,
  kGather,
  kGatherIntoTensor,
  kScatter,
  kScatterTensor,
  kAllToAll,
  kAllToAllSingle,
  kAllToAllSingleCounts,
};

inline constexpr Family kAllFamilies[] = {
    Family::kAllReduce,       Family::kBroadcast,           Family::kReduce,
    Family::kAllGather,       Family::kAllGatherIntoTensor,       Family::kAllGatherIntoTensorUneven,
    Family::kReduceScatter,   Family::kReduceScatterTensor, Family::kReduceScatterTensorUneven,
    Family::kGather,          Family::kGatherIntoTensor,          Family::kScatter,
    Family::kScatterTensor,   Family::kAllToAll,            Family::kAllToAllSingle,
    Family::kAllToAllSingleCounts};

inline std::vector<Family> allFamilies() { return {std::begin(kAllFamilies), std::end(kAllFamilies)}; }

struct MatrixSpec {
  std::string label;  // for the job's summary line and failure messages
  std::vector<Family> families;
  bool withLarge = true;  // include the 1 MiB size
};

// Runs `spec` on a job of `p` ranks started with `options` (bound,
// environment) and records a test failure naming every rank that failed.
void runMatrixJob(int p, const MatrixSpec& spec, const JobOptions& options);

}  // namespace meshcomm::test

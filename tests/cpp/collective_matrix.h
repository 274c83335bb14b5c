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
#include "collectives/operations.h"

namespace meshcomm::test {

// One case of the matrix: a collective of the operation table
// (collectives/operations.h), or all_to_all_single with explicit split
// sizes (the table's all_to_all_single without them is another case).
struct Family {
  Operation op;
  bool withCounts = false;
  constexpr Family(Operation o, bool counts = false) : op(o), withCounts(counts) {}  // NOLINT: implicit
  constexpr bool operator==(const Family&) const = default;
};
inline constexpr Family kAllToAllSingleCounts{Operation::kAllToAllSingle, true};

// Whether the matrix runs `info`'s operation: every collective of the
// table but the barrier (which moves no data; its tests are its own).
constexpr bool inMatrix(const OperationInfo& info) {
  return info.family != Opcode::kPointToPoint && info.family != Opcode::kBarrier;
}

// Every case, taken from the table: adding a collective to it adds it here,
// and the matrix fails every job until runOne knows how to check it.
inline std::vector<Family> allFamilies() {
  std::vector<Family> out;
  for (const OperationInfo& info : kOperations) {
    if (!inMatrix(info)) continue;
    out.push_back(info.operation);
    if (info.operation == Operation::kAllToAllSingle) out.push_back(kAllToAllSingleCounts);
  }
  return out;
}

struct MatrixSpec {
  std::string label;  // for the job's summary line and failure messages
  std::vector<Family> families;
  bool withLarge = true;  // include the 1 MiB size
};

// Runs `spec` on a job of `p` ranks started with `options` (bound,
// environment) and records a test failure naming every rank that failed.
void runMatrixJob(int p, const MatrixSpec& spec, const JobOptions& options);

}  // namespace meshcomm::test

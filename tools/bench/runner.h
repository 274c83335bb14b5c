// The measurement loop of meshcomm-bench: for each size, warm up, pick an
// iteration count, time the iterations between barriers, agree on the
// slowest rank's mean and optionally check one result.
//
// Thread-safety: runs on one thread per rank; every rank of the group must
// call runSweep with the same options (the loop is collective).
#pragma once

#include <vector>

#include "meshcomm/process_group.h"
#include "options.h"
#include "report.h"

namespace meshcomm::bench {

// The message sizes of a run, from -b to -e.
std::vector<uint64_t> sweepSizes(const Options& options);

// Runs every size on `group`. `reporter` is non-null on the printing rank
// only. Returns kExitOk, or kExitCheckFailed when a check failed on any
// rank. Throws meshcomm::Error when an operation fails.
int runSweep(const Options& options, ProcessGroup& group, Reporter* reporter);

}  // namespace meshcomm::bench

// How many timed iterations one size gets: the rule meshcomm-bench and the
// peer benchmarks under bench/peers/ share, so every library is timed the
// same way. Header-only, with no meshcomm dependency, so a peer benchmark
// built against another library includes it as it is.
//
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace meshcomm::bench {

inline constexpr int64_t kMaxIters = 1'000'000;
// Calibration batches grow until one takes this long, which is enough to
// make timer and barrier overhead negligible in the estimate.
inline constexpr double kCalibrationSeconds = 0.02;

// Iterations that make the timed phase last about `targetSeconds`, from
// batches of growing size. `slowestSeconds(batch)` runs a batch and returns
// the slowest rank's time for it, so every rank reaches the same answer.
// At least 5 and at most kMaxIters.
template <class SlowestSeconds>
int64_t calibrateIterations(SlowestSeconds slowestSeconds, double targetSeconds) {
  int64_t batch = 1;
  double perIter = 0;
  for (;;) {
    const double t = slowestSeconds(batch);
    if (t >= kCalibrationSeconds || batch >= kMaxIters) {
      perIter = t / static_cast<double>(batch);
      break;
    }
    const double grow = t > 0 ? 1.2 * kCalibrationSeconds / t : 100.0;
    const auto next =
        static_cast<int64_t>(std::ceil(static_cast<double>(batch) * std::min(grow, 100.0)));
    batch = std::min(kMaxIters, std::max(batch * 2, next));
  }
  const double want =
      perIter > 0 ? std::ceil(targetSeconds / perIter) : static_cast<double>(kMaxIters);
  return std::clamp<int64_t>(static_cast<int64_t>(std::min(want, 1e12)), 5, kMaxIters);
}

}  // namespace meshcomm::bench

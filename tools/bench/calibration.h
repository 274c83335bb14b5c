// How many timed iterations one size gets: the rule meshcomm-bench and the
// peer benchmarks under bench/peers (peer_bench.h) share, so every library
// is timed the same way. Written in the part of C11 that is also C++20 and
// without any meshcomm dependency, so that a peer benchmark built against
// another library, in C or C++, includes it as it is.
//
// Thread-safety: pure functions, apart from what the callback does.
#pragma once

#include <stdint.h>

static const int64_t kMaxIters = 1000000;
// Calibration batches grow until one takes this long, which is enough to
// make timer and barrier overhead negligible in the estimate.
static const double kCalibrationSeconds = 0.02;

// The smallest integer >= v, for 0 <= v < 2^63 (without libm, which the
// peer benchmarks' compile lines do not link).
static inline int64_t ceilCount(double v) {
  const int64_t c = (int64_t)v;
  return (double)c < v ? c + 1 : c;
}

// Iterations that make the timed phase last about `targetSeconds`, from
// batches of growing size. `slowestSeconds(ctx, batch)` runs a batch and
// returns the slowest rank's time for it, so every rank reaches the same
// answer. At least 5 and at most kMaxIters.
static inline int64_t calibrateIterations(double (*slowestSeconds)(void* ctx, int64_t batch),
                                          void* ctx, double targetSeconds) {
  int64_t batch = 1;
  double perIter = 0;
  for (;;) {
    const double t = slowestSeconds(ctx, batch);
    if (t >= kCalibrationSeconds || batch >= kMaxIters) {
      perIter = t / (double)batch;
      break;
    }
    double grow = t > 0 ? 1.2 * kCalibrationSeconds / t : 100.0;
    if (grow > 100.0) grow = 100.0;
    int64_t next = ceilCount((double)batch * grow);
    if (next < batch * 2) next = batch * 2;
    batch = next < kMaxIters ? next : kMaxIters;
  }
  if (perIter <= 0 || targetSeconds / perIter >= (double)kMaxIters) return kMaxIters;
  const int64_t want = ceilCount(targetSeconds / perIter);
  return want < 5 ? 5 : want;
}

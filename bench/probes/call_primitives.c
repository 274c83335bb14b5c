// What the primitives every small call uses cost on this CPU, one thread,
// nothing contended: a read of the time-stamp counter (the flight
// recorder's clock, two per call), clock_gettime (the deadlines' clock), and
// a locked read-modify-write on a line this thread owns (the recorder's id
// and slot locks, the executor's claim and its engine lock: about seven per
// call), against a plain increment of the same lines. Best of 5 trials of
// 5,000,000 (docs/benchmarks.md, "Where a small call's time goes, in time").
//
//   gcc -O2 -o /tmp/call_primitives bench/probes/call_primitives.c
//   /tmp/call_primitives
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <x86intrin.h>

#include "probe_clock.h"

enum { kIters = 5000000, kTrials = 5, kLines = 7 };

static _Alignas(64) _Atomic uint64_t lines[kLines][8];
static volatile uint64_t sink;

static double best(double (*trial)(void)) {
  double b = 1e30;
  for (int i = 0; i < kTrials; ++i) {
    const double t = trial();
    if (t < b) b = t;
  }
  return b * 1e9 / kIters;
}

static double readCounter(void) {
  uint64_t s = 0;
  const double t0 = now();
  for (int i = 0; i < kIters; ++i) s += __rdtsc();
  const double t = now() - t0;
  sink = s;
  return t;
}

static double readClock(void) {
  uint64_t s = 0;
  const double t0 = now();
  for (int i = 0; i < kIters; ++i) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s += (uint64_t)ts.tv_nsec;
  }
  const double t = now() - t0;
  sink = s;
  return t;
}

static double plainIncrements(void) {
  const double t0 = now();
  for (int i = 0; i < kIters; ++i) {
    for (int k = 0; k < kLines; ++k) {
      const uint64_t v = atomic_load_explicit(&lines[k][0], memory_order_relaxed);
      atomic_store_explicit(&lines[k][0], v + 1, memory_order_relaxed);
    }
  }
  return now() - t0;
}

static double lockedIncrements(void) {
  const double t0 = now();
  for (int i = 0; i < kIters; ++i) {
    for (int k = 0; k < kLines; ++k) {
      uint64_t v = atomic_load_explicit(&lines[k][0], memory_order_relaxed);
      atomic_compare_exchange_weak(&lines[k][0], &v, v + 1);
    }
  }
  return now() - t0;
}

int main(void) {
  printf("time-stamp counter read: %.1f ns\n", best(readCounter));
  printf("clock_gettime(CLOCK_MONOTONIC): %.1f ns\n", best(readClock));
  const double plain = best(plainIncrements);
  const double locked = best(lockedIncrements);
  printf("%d increments: plain %.1f ns, locked compare-exchange %.1f ns (%.1f ns more each)\n",
         kLines, plain, locked, (locked - plain) / kLines);
  return 0;
}

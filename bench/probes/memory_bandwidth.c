// How fast one core copies and sums memory here: the other ceiling of a
// large collective, whose every byte is copied by the kernel at least twice
// over TCP (into the sender's socket buffer, out of the receiver's) and
// read twice and written once by a reduction.
//
//   gcc -O2 -march=native -Wall -o /tmp/memory_bandwidth bench/probes/memory_bandwidth.c
//   /tmp/memory_bandwidth [--bytes 64M] [--seconds 1] [--procs 1]
//
// Prints GB/s of buffer for memcpy(dst, src) and for dst[i] += src[i]
// (float32), each repeated over two buffers of --bytes for --seconds (at
// most 30), in --procs processes at once (each figure is the mean per
// process: with 2, what each of two cores gets while the other copies too).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe_clock.h"

static __attribute__((noinline)) void sum(float* restrict dst, const float* restrict src,
                                          size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

// Bytes of buffer per second for `kind` (0: memcpy, 1: sum) over `bytes`.
static double measure(int kind, char* dst, char* src, size_t bytes, double seconds) {
  size_t done = 0;
  double start = now(), t = start;
  while (t - start < seconds) {
    if (kind == 0) {
      memcpy(dst, src, bytes);
    } else {
      sum((float*)dst, (const float*)src, bytes / sizeof(float));
    }
    done += bytes;
    t = now();
  }
  return (double)done / (t - start);
}

int main(int argc, char** argv) {
  size_t bytes = 64 << 20;
  double seconds = 1.0;
  int procs = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--bytes")) bytes = parseBytes(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--procs")) procs = atoi(argv[i + 1]);
    else { fprintf(stderr, "memory_bandwidth: unknown option %s\n", argv[i]); return 2; }
  }
  if (bytes < 4096 || seconds <= 0 || seconds > 30 || procs < 1 || procs > 64) {
    fprintf(stderr, "memory_bandwidth: need --bytes >= 4K, 0 < --seconds <= 30, 1 <= --procs <= 64\n");
    return 2;
  }
  int results[2];
  if (pipe(results) != 0) return 1;
  for (int p = 0; p < procs; ++p) {
    if (fork() != 0) continue;
    char* src = aligned_alloc(4096, bytes);
    char* dst = aligned_alloc(4096, bytes);
    memset(src, 0, bytes);  // touched first, so page faults are not measured
    memset(dst, 0, bytes);
    double rates[2] = {measure(0, dst, src, bytes, seconds), measure(1, dst, src, bytes, seconds)};
    if (write(results[1], rates, sizeof(rates)) != (ssize_t)sizeof(rates)) return 1;
    return 0;
  }
  close(results[1]);
  double total[2] = {0, 0}, rates[2];
  int got = 0;
  while (read(results[0], rates, sizeof(rates)) == (ssize_t)sizeof(rates)) {
    total[0] += rates[0];
    total[1] += rates[1];
    ++got;
  }
  while (wait(NULL) > 0) {}
  if (got != procs) {
    fprintf(stderr, "memory_bandwidth: a process failed\n");
    return 1;
  }
  printf("%zu KiB x %d process(es): memcpy %.2f GB/s, float32 sum %.2f GB/s per process\n",
         bytes >> 10, procs, total[0] / procs / 1e9, total[1] / procs / 1e9);
  return 0;
}

// Where this machine's first two CPUs sit relative to each other, seen
// from what a shared-memory handoff costs: the round trip of one cache line
// between a thread on CPU 0 and one on CPU 1, then, for a 512 KiB buffer
// that CPU 1 writes and CPU 0 copies out each round (after CPU 0 copied the
// previous round's, so it holds the lines), the writer's time and the
// reader's bandwidth with three kinds of stores:
//   plain       memset: each store takes its line back from the reader;
//   streaming   non-temporal stores: lines go to memory, the reader's
//               copies are dropped;
//   written back  memset, then clwb of every line (where the CPU has it):
//               the lines stay in the writer's cache, clean.
//
//   gcc -O2 -mavx2 -pthread -o /tmp/core_placement bench/probes/core_placement.c
//   /tmp/core_placement [--rounds 200]
//
// On a virtual machine the host may move a vCPU away from the other's
// cache and back while a job runs; run the probe a few times in a row, or
// between the runs of a benchmark, to see which placement a run had
// (docs/tuning.md, "Where the cores are"; host/shm/slot_stores.h).
#define _GNU_SOURCE
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_clock.h"

enum { kPingPongs = 50000, kKinds = 3 };
static const size_t kBytes = 512 * 1024;
static const char* const kKindNames[kKinds] = {"plain", "streaming", "written back"};

static _Alignas(64) atomic_long flag;
static char* shared;
static int rounds = 200;
static int clwb;  // the CPU has clwb (else "written back" is skipped)
static double writeNs[kKinds];

static void pinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
    fprintf(stderr, "core_placement: cannot run on CPU %d\n", cpu);
    exit(2);
  }
}

static void streamFill(char* p, size_t n, int v) {
  const __m256i x = _mm256_set1_epi8((char)v);
  for (size_t i = 0; i < n; i += 32) _mm256_stream_si256((__m256i*)(p + i), x);
  _mm_sfence();
}

__attribute__((target("clwb"))) static void writeBack(char* p, size_t n) {
  for (size_t i = 0; i < n; i += 64) _mm_clwb(p + i);
  _mm_sfence();
}

static int kinds(void) { return clwb ? kKinds : kKinds - 1; }

// Waits until the flag holds `v`; one thread waits for odd, the other for
// even values, so the two alternate.
static void awaitFlag(long v) {
  while (atomic_load_explicit(&flag, memory_order_acquire) != v) _mm_pause();
}

static void* writer(void* arg) {
  (void)arg;
  pinTo(1);
  for (long i = 0; i < kPingPongs; ++i) {
    awaitFlag(2 * i + 1);
    atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
  }
  for (int k = 0; k < kinds(); ++k) {
    for (int r = 0; r < rounds; ++r) {
      const long turn = 2 * (kPingPongs + (long)k * rounds + r);
      awaitFlag(turn + 1);
      const double t0 = now();
      if (k == 1) {
        streamFill(shared, kBytes, r);
      } else {
        memset(shared, r, kBytes);
        if (k == 2) writeBack(shared, kBytes);
      }
      writeNs[k] += (now() - t0) * 1e9;
      atomic_store_explicit(&flag, turn + 2, memory_order_release);
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: core_placement [--rounds N]\n");
      return 2;
    }
  }
  if (rounds < 1) rounds = 1;
  unsigned eax, ebx, ecx, edx;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  clwb = (ebx >> 24) & 1;
  shared = aligned_alloc(4096, kBytes);
  char* out = aligned_alloc(4096, kBytes);
  memset(shared, 0, kBytes);
  memset(out, 0, kBytes);
  pinTo(0);
  pthread_t t;
  pthread_create(&t, NULL, writer, NULL);
  const double p0 = now();
  for (long i = 0; i < kPingPongs; ++i) {
    atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
    awaitFlag(2 * i + 2);
  }
  const double roundTrip = ((now() - p0) * 1e9) / kPingPongs;
  double readNs[kKinds] = {0};
  for (int k = 0; k < kinds(); ++k) {
    for (int r = 0; r < rounds; ++r) {
      const long turn = 2 * (kPingPongs + (long)k * rounds + r);
      atomic_store_explicit(&flag, turn + 1, memory_order_release);
      awaitFlag(turn + 2);
      const double t0 = now();
      memcpy(out, shared, kBytes);
      readNs[k] += (now() - t0) * 1e9;
    }
  }
  pthread_join(t, NULL);
  printf("round trip %.0f ns", roundTrip);
  for (int k = 0; k < kinds(); ++k) {
    printf(" | %s: write %.1f us, read %.1f GB/s", kKindNames[k], writeNs[k] / rounds / 1e3,
           (double)kBytes / (readNs[k] / rounds));
  }
  printf("\n");
  return 0;
}

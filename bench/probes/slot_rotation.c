// What it costs two ranks to reuse the same few places of shared memory
// call after call, with no library in between: the floor of a 2-rank
// one-shot all_reduce. Each process, every call, copies its input into its
// place for the call, raises its counter, waits for the peer's, and sums
// its own place and the peer's into its input (in place, as
// meshcomm-bench's all_reduce). Inputs rotate over 64 MiB, so they come
// from memory, as meshcomm-bench's do. The places rotate over --places
// spots `--spacing` apart: 2 is a double-buffered slot (every line written
// was read by the peer in the call before); more spread the reuse out.
//
//   gcc -O3 -march=native -Wall -o /tmp/slot_rotation bench/probes/slot_rotation.c
//   for p in 2 16 64 256; do /tmp/slot_rotation --bytes 4K --places $p; done
//   /tmp/slot_rotation --bytes 4K --places 16 --spacing 64K
//
// Prints the time per call (mean over --iters after a tenth untimed).
// docs/benchmarks.md ("Rotating through the slot area") has this host's
// figures; meshcomm's small rounds rotate for what they show.
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe_clock.h"

// Counters on lines of their own.
typedef struct {
  _Alignas(64) _Atomic uint64_t value;
  char pad[56];
} Counter;

static size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

static void usage(void) {
  fprintf(stderr, "usage: slot_rotation [--bytes 4K] [--places 2] [--spacing BYTES] [--iters 200000]\n");
  exit(2);
}

int main(int argc, char** argv) {
  size_t bytes = 4096, places = 2, spacing = 0;
  long iters = 200000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--bytes")) bytes = parseBytes(argv[i + 1]);
    else if (!strcmp(argv[i], "--places")) places = parseBytes(argv[i + 1]);
    else if (!strcmp(argv[i], "--spacing")) spacing = parseBytes(argv[i + 1]);
    else if (!strcmp(argv[i], "--iters")) iters = atol(argv[i + 1]);
    else usage();
  }
  if (argc % 2 == 0 || bytes < 4 || places < 2 || iters < 10) usage();
  if (spacing == 0) spacing = roundUp(bytes, 64);  // places back to back
  if (spacing < bytes) usage();

  const size_t area = spacing * places;  // one rank's places
  uint8_t* shared = mmap(NULL, 2 * area + 2 * sizeof(Counter), PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  memset(shared, 0, 2 * area + 2 * sizeof(Counter));  // fault every page in first
  Counter* counters = (Counter*)(shared + 2 * area);

  const pid_t child = fork();
  const int me = child == 0 ? 1 : 0;
  const size_t stride = roundUp(bytes, 4096);
  const size_t sets = ((size_t)64 << 20) / stride;
  uint8_t* inputs = aligned_alloc(64, stride * sets);
  memset(inputs, 1, stride * sets);
  const size_t n = bytes / sizeof(float);
  double start = 0;
  for (long i = 1; i <= iters; ++i) {
    if (i == iters / 10) start = now();
    float* data = (float*)(inputs + (size_t)i % sets * stride);
    uint8_t* mine = shared + (size_t)me * area + (size_t)i % places * spacing;
    const float* theirs = (const float*)(shared + (size_t)(1 - me) * area + (size_t)i % places * spacing);
    // A place comes back `places` calls later; the peer has read it by
    // then, since it raised its counter past that call.
    memcpy(mine, data, bytes);
    atomic_store_explicit(&counters[me].value, (uint64_t)i, memory_order_release);
    while (atomic_load_explicit(&counters[1 - me].value, memory_order_acquire) < (uint64_t)i) _mm_pause();
    const float* own = (const float*)mine;
    for (size_t k = 0; k < n; ++k) data[k] = own[k] + theirs[k];
  }
  const double took = now() - start;
  if (me == 1) return 0;
  waitpid(child, NULL, 0);
  printf("bytes %zu places %zu spacing %zu: %.3f us per call\n", bytes, places, spacing,
         took / (double)(iters - iters / 10) * 1e6);
  return 0;
}

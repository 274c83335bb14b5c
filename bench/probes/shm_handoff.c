// How fast one process hands a buffer to another through shared memory
// here, with no library in between: the floor of a one-host broadcast of
// two ranks. The sender copies each message, slot by slot, from its own
// buffers into a ring of slots in a shared mapping and raises a counter;
// the receiver waits for each slot and copies it out into its buffers.
// Both rotate over enough buffers to keep the messages out of the caches,
// as meshcomm-bench does.
//
//   gcc -O2 -Wall -o /tmp/shm_handoff bench/probes/shm_handoff.c
//   /tmp/shm_handoff [--bytes 16M] [--slot 1M] [--depth 4] [--iters 60]
//
// Prints the time per message (the mean over --iters after 5 untimed) and
// the GB/s of message it makes. Running it between runs of
// `meshcomm-bench broadcast -n 2 -b 16M -e 16M` tells whether a slow run
// is the machine's or meshcomm's.
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe_clock.h"

enum { kWarmup = 5, kBufferSets = 4 };

// Counters on lines of their own, so that neither side's writes slow the
// other's reads of its counter.
struct Ring {
  _Atomic unsigned long produced __attribute__((aligned(64)));
  _Atomic unsigned long consumed __attribute__((aligned(64)));
};

int main(int argc, char** argv) {
  size_t bytes = 16u << 20, slot = 1u << 20;
  unsigned long depth = 4;
  int iters = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--bytes")) bytes = parseBytes(argv[i + 1]);
    else if (!strcmp(argv[i], "--slot")) slot = parseBytes(argv[i + 1]);
    else if (!strcmp(argv[i], "--depth")) depth = strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (bytes == 0 || slot == 0 || depth == 0 || iters < 1 || bytes % slot != 0) {
    fprintf(stderr, "--bytes must be a positive multiple of --slot; --depth, --iters positive\n");
    return 2;
  }
  struct Ring* ring = mmap(NULL, sizeof(struct Ring), PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  char* slots = mmap(NULL, slot * depth, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (ring == MAP_FAILED || slots == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  memset(slots, 0, slot * depth);
  const pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  const int sender = child != 0;
  char* own = malloc(bytes * kBufferSets);
  if (own == NULL) {
    perror("malloc");
    return 1;
  }
  memset(own, sender ? 1 : 2, bytes * kBufferSets);  // every page faulted in first
  const unsigned long perMessage = bytes / slot;
  double start = 0;
  for (int it = 0; it < kWarmup + iters; ++it) {
    if (it == kWarmup) start = now();
    char* message = own + (size_t)(it % kBufferSets) * bytes;
    for (unsigned long k = 0; k < perMessage; ++k) {
      const unsigned long seq = (unsigned long)it * perMessage + k;
      char* s = slots + (seq % depth) * slot;
      if (sender) {
        while (seq >= atomic_load_explicit(&ring->consumed, memory_order_acquire) + depth) {
        }
        memcpy(s, message + k * slot, slot);
        atomic_store_explicit(&ring->produced, seq + 1, memory_order_release);
      } else {
        while (atomic_load_explicit(&ring->produced, memory_order_acquire) <= seq) {
        }
        memcpy(message + k * slot, s, slot);
        atomic_store_explicit(&ring->consumed, seq + 1, memory_order_release);
      }
    }
  }
  if (!sender) return 0;
  // The receiver's last copy ends the sender's last message.
  while (atomic_load_explicit(&ring->consumed, memory_order_acquire) <
         (unsigned long)(kWarmup + iters) * perMessage) {
  }
  const double seconds = (now() - start) / iters;
  int status = 0;
  waitpid(child, &status, 0);
  printf("%zu bytes in %zu-byte slots, %lu deep: %.0f us per message, %.2f GB/s\n", bytes, slot,
         depth, seconds * 1e6, (double)bytes / seconds / 1e9);
  return 0;
}

// memcpy_bench: single-thread memcpy bandwidth, the memory-bandwidth
// reference for the collective benchmarks on the same machine.
//
//   memcpy_bench [--bytes SIZE] [--sets K] [--iters N]
//
// Copies a --bytes buffer (default 16 MiB) from one set to another, rotating
// through --sets source/destination pairs (default: enough pairs for 256 MiB
// in total, at least 2) so that neither side is in cache when it is copied.
// Every page is touched before timing; then one untimed pass over all
// pairs, then --iters copies (default: about 0.25 s, at least 5).
//
// Output: one CSV row in meshcomm-bench --csv's columns, with op "memcpy",
// nranks 1 and algbw = busbw = bytes copied per second (each byte is read
// once and written once, so the memory traffic is at least twice that).
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const size_t kTotalBytes = (size_t)256 << 20;
static const double kTargetSeconds = 0.25;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(const char* what) {
  fprintf(stderr, "memcpy_bench: %s\nusage: memcpy_bench [--bytes SIZE] [--sets K] [--iters N]\n",
          what);
  exit(2);
}

// "16M", "64K", "1G", "4096" (powers of 1024, optional trailing B).
static size_t parseSize(const char* text) {
  char* end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text) usage("--bytes expects a size like 16M");
  int shift = 0;
  if (*end == 'k' || *end == 'K') shift = 10, ++end;
  else if (*end == 'm' || *end == 'M') shift = 20, ++end;
  else if (*end == 'g' || *end == 'G') shift = 30, ++end;
  if (*end == 'b' || *end == 'B') ++end;
  if (*end != '\0' || v == 0 || v > ((unsigned long long)4 << 30) >> shift) {
    usage("--bytes expects a size between 1 and 4G");
  }
  return (size_t)v << shift;
}

static long long parsePositive(const char* text, const char* what) {
  char* end = NULL;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < 1) usage(what);
  return v;
}

// Volatile sink so the compiler cannot drop copies whose results go unread.
static volatile unsigned char gSink;

int main(int argc, char** argv) {
  size_t bytes = (size_t)16 << 20;
  long long sets = 0, iters = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      printf("usage: memcpy_bench [--bytes SIZE] [--sets K] [--iters N]\n");
      return 0;
    }
    if (strcmp(argv[i], "--csv") == 0) continue;  // CSV is the only output format
    if (i + 1 >= argc) usage("an option is missing its value");
    if (strcmp(argv[i], "--bytes") == 0) bytes = parseSize(argv[++i]);
    else if (strcmp(argv[i], "--sets") == 0) sets = parsePositive(argv[++i], "--sets expects N >= 1");
    else if (strcmp(argv[i], "--iters") == 0) iters = parsePositive(argv[++i], "--iters expects N >= 1");
    else usage("unknown option");
  }
  if (sets == 0) {
    sets = (long long)(kTotalBytes / (2 * bytes));
    if (sets < 2) sets = 2;
  }

  // One arena: pair k copies from block 2k to block 2k+1.
  const size_t stride = (bytes + 4095) / 4096 * 4096;
  unsigned char* arena = NULL;
  if (posix_memalign((void**)&arena, 4096, stride * 2 * (size_t)sets) != 0) {
    fprintf(stderr, "memcpy_bench: out of memory\n");
    return 3;
  }
  for (size_t i = 0; i < stride * 2 * (size_t)sets; ++i) arena[i] = (unsigned char)i;

  long long next = 0;
  for (long long k = 0; k < sets; ++k) {  // untimed pass over every pair
    memcpy(arena + stride * (2 * k + 1), arena + stride * 2 * k, bytes);
  }
  if (iters == 0) {
    // Estimate from one pass over all pairs, then aim for the target time.
    double t0 = now();
    for (long long k = 0; k < sets; ++k) memcpy(arena + stride * (2 * k + 1), arena + stride * 2 * k, bytes);
    double perCopy = (now() - t0) / (double)sets;
    iters = perCopy > 0 ? (long long)(kTargetSeconds / perCopy) + 1 : 5;
    if (iters < 5) iters = 5;
  }
  double start = now();
  for (long long i = 0; i < iters; ++i) {
    memcpy(arena + stride * (2 * next + 1), arena + stride * 2 * next, bytes);
    next = (next + 1) % sets;
  }
  double seconds = (now() - start) / (double)iters;
  gSink = arena[stride + bytes / 2];

  double gbps = (double)bytes / seconds / 1e9;
  printf("op,nranks,bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,check\n");
  printf("memcpy,1,%zu,%zu,float32,%.3f,%.4f,%.4f,skip\n", bytes, bytes / 4, seconds * 1e6, gbps,
         gbps);
  free(arena);
  return 0;
}

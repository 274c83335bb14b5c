// What the probes share: a monotonic clock in seconds and sizes such as
// "64M" on their command lines. Each probe is one C file built on its own
// (`gcc -O2 -o /tmp/probe bench/probes/<probe>.c`); this header sits
// beside them.
#pragma once

#include <stdlib.h>
#include <time.h>

static inline double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// "4096", "64K", "16M", "1G" (binary units) -> bytes.
static inline size_t parseBytes(const char* s) {
  char* end;
  double v = strtod(s, &end);
  switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return (size_t)v;
}

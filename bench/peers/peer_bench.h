// The benchmark method of meshcomm-bench, for the peer benchmarks that
// measure other libraries with it (mpi_bench.c, ccl_bench.cc,
// gloo_bench.cc): the operations and their shapes, the rotating buffer
// sets, the test values and their check, the calibration, the size sweep,
// the options they all take and the CSV they print. mpi_bench.c's header
// comment describes the method. Each program supplies only the calls of its
// library (PeerLibrary).
//
// Written in the part of C11 that is also C++20, so that mpi_bench.c builds
// with every MPI's mpicc and the C++ programs with their own compilers; each
// includes it from its own folder, so no compile line names it. A C program
// defines _POSIX_C_SOURCE 200809L before its first #include
// (posix_memalign, clock_gettime). The programs that MPI starts include
// <mpi.h> first, which adds the start-up they share (the end of the file).
//
// Thread-safety: single-threaded, like the programs.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../tools/bench/calibration.h"

enum { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kAllToAll, kBarrier, kNumOps };

static const char* const kOpNames[kNumOps] = {"all_reduce",     "broadcast",  "all_gather",
                                              "reduce_scatter", "all_to_all", "barrier"};

static const size_t kWordBytes = sizeof(float);
static const size_t kSlotAlign = 64;  // sets never share a cache line
static const size_t kCoverBytes = (size_t)64 << 20;
static const size_t kMaxTotalBytes = (size_t)256 << 20;
static const int64_t kMinSlots = 4;
static const double kTargetSeconds = 0.25;  // timed seconds per size (calibrateIterations)

// ---- options ----

typedef struct {
  int op;  // -1 until the command line names one
  uint64_t minBytes, maxBytes, factor;
  int64_t iters;    // 0: adaptive
  int64_t warmup;
  int64_t buffers;  // 0: automatic
  int check;
} SweepOptions;

// An option only one program has (each takes a value): returns 1 when the
// program took `name` with `value`, 0 when it has no such option, -1 when
// the value is wrong (having written why into `why`).
typedef int (*ExtraOption)(void* ctx, const char* name, const char* value, char* why,
                           size_t whySize);

enum { kParsedRun, kParsedHelp, kParsedError };

// A size into *out: "8", "64K", "1M", "2G", with an optional trailing B
// (powers of 1024), at most 64G; otherwise 0, with the reason in `why`.
static inline int parseSize(const char* text, const char* what, uint64_t* out, char* why,
                            size_t whySize) {
  char* end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  int shift = 0;
  int ok = end != text;
  if (*end == 'k' || *end == 'K') shift = 10, ++end;
  else if (*end == 'm' || *end == 'M') shift = 20, ++end;
  else if (*end == 'g' || *end == 'G') shift = 30, ++end;
  if (*end == 'b' || *end == 'B') ++end;
  if (!ok || *end != '\0' || v > (UINT64_C(64) << 30) >> shift) {
    snprintf(why, whySize, "%s expects a size like 8, 64K or 1M", what);
    return 0;
  }
  *out = (uint64_t)v << shift;
  return 1;
}

// An integer >= lo into *out; otherwise 0, with the reason in `why`.
static inline int parseCount(const char* text, int64_t lo, const char* what, int64_t* out,
                             char* why, size_t whySize) {
  char* end = NULL;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < lo) {
    snprintf(why, whySize, "%s expects an integer >= %lld, got '%s'", what, (long long)lo, text);
    return 0;
  }
  *out = v;
  return 1;
}

// Parses the command line into o: the operation, --check, --csv (CSV is the
// only output, so it changes nothing), -h/--help, the sweep's -b/--minbytes,
// -e/--maxbytes, -f/--stepfactor, --iters, --warmup, --buffers, and what
// `extra` takes (NULL: nothing more). Returns kParsedRun, kParsedHelp, or
// kParsedError with the reason in `why`.
static inline int parseSweepOptions(int argc, char** argv, SweepOptions* o, ExtraOption extra,
                                    void* ctx, char* why, size_t whySize) {
  o->op = -1;
  o->minBytes = o->maxBytes = (uint64_t)32 << 20;  // meshcomm-bench's defaults
  o->factor = 2;
  o->iters = 0;
  o->warmup = 5;
  o->buffers = 0;
  o->check = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return kParsedHelp;
    if (strcmp(a, "--check") == 0) {
      o->check = 1;
      continue;
    }
    if (strcmp(a, "--csv") == 0) continue;
    if (a[0] != '-') {
      int named = -1;
      for (int k = 0; k < kNumOps; ++k) {
        if (strcmp(a, kOpNames[k]) == 0) named = k;
      }
      if (named < 0) {
        snprintf(why, whySize, "unknown operation '%s'", a);
        return kParsedError;
      }
      o->op = named;
      continue;
    }
    if (i + 1 >= argc) {
      snprintf(why, whySize, "option '%s' needs a value", a);
      return kParsedError;
    }
    const char* v = argv[++i];
    int ok;
    if (strcmp(a, "-b") == 0 || strcmp(a, "--minbytes") == 0) {
      ok = parseSize(v, "-b", &o->minBytes, why, whySize);
    } else if (strcmp(a, "-e") == 0 || strcmp(a, "--maxbytes") == 0) {
      ok = parseSize(v, "-e", &o->maxBytes, why, whySize);
    } else if (strcmp(a, "-f") == 0 || strcmp(a, "--stepfactor") == 0) {
      int64_t factor = 0;
      ok = parseCount(v, 2, "-f", &factor, why, whySize);
      o->factor = (uint64_t)factor;
    } else if (strcmp(a, "--iters") == 0) {
      ok = parseCount(v, 1, "--iters", &o->iters, why, whySize);
    } else if (strcmp(a, "--warmup") == 0) {
      ok = parseCount(v, 0, "--warmup", &o->warmup, why, whySize);
    } else if (strcmp(a, "--buffers") == 0) {
      ok = parseCount(v, 1, "--buffers", &o->buffers, why, whySize);
    } else {
      const int taken = extra != NULL ? extra(ctx, a, v, why, whySize) : 0;
      if (taken == 0) snprintf(why, whySize, "unknown option '%s'", a);
      ok = taken > 0;
    }
    if (!ok) return kParsedError;
  }
  if (o->op < 0) {
    snprintf(why, whySize, "no operation given");
    return kParsedError;
  }
  if (o->minBytes > o->maxBytes) {
    snprintf(why, whySize, "-b is larger than -e");
    return kParsedError;
  }
  return kParsedRun;
}

// ---- shapes, buffer sets and values ----

// Element counts of one size, as meshcomm-bench's shapeFor() derives them.
typedef struct {
  int64_t send, recv;  // elements of this rank's input and output
  int64_t count;       // the "count" column
  uint64_t bytes;      // the "bytes" column, also the bytes algbw counts
  double busFactor;
  int inPlace;         // the input buffer is also the output
} Shape;

static inline Shape shapeFor(int op, uint64_t bytes, int n) {
  const int64_t count = (int64_t)(bytes / kWordBytes);
  const int64_t block = count / n;
  const double share = (double)(n - 1) / (double)n;
  Shape s = {0, 0, 0, 0, 0.0, 0};
  switch (op) {
    case kAllReduce:
    case kBroadcast:
      s.send = s.recv = s.count = count;
      s.busFactor = op == kAllReduce ? 2.0 * share : 1.0;
      s.inPlace = 1;
      break;
    case kAllGather:
      s.send = block, s.recv = block * n;
      break;
    case kReduceScatter:
      s.send = block * n, s.recv = block;
      break;
    case kAllToAll:
      s.send = s.recv = block * n;
      break;
    default:  // barrier moves no data
      return s;
  }
  if (op != kAllReduce && op != kBroadcast) {
    s.count = block;
    s.busFactor = share;
  }
  s.bytes = (uint64_t)(s.send > s.recv ? s.send : s.recv) * kWordBytes;
  return s;
}

static inline size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

// meshcomm-bench's defaultSlotCount(): cover 64 MiB, at least 4 sets, at
// most 256 MiB in total (but always at least one set).
static inline int64_t slotCount(const Shape* s) {
  size_t slotBytes = roundUp((size_t)s->send * kWordBytes, kSlotAlign);
  if (!s->inPlace) slotBytes += roundUp((size_t)s->recv * kWordBytes, kSlotAlign);
  if (slotBytes == 0) return 1;
  size_t slots = (kCoverBytes + slotBytes - 1) / slotBytes;
  if (slots < (size_t)kMinSlots) slots = (size_t)kMinSlots;
  size_t cap = kMaxTotalBytes / slotBytes;
  if (cap < 1) cap = 1;
  if (slots > cap) slots = cap;
  return (int64_t)slots;
}

// Exactly representable in float32 and distinct per rank, so sums over up
// to a few thousand ranks compare exactly.
static inline float valueOf(int rank, int64_t index) {
  return (float)((rank + 1) * 1000 + (int)(index % 997));
}

static inline void fillInput(float* p, int64_t n, int rank) {
  for (int64_t i = 0; i < n; ++i) p[i] = valueOf(rank, i);
}

// The rotating buffer sets of one size: set k's input starts at
// in + k*inStride, its output at out + k*outStride (out == in when in place).
typedef struct {
  char* in;
  char* out;
  size_t inStride, outStride;
  int64_t slots;
  int64_t next;  // set of the next operation; carries over between runs
} Slots;

static inline float* slotIn(const Slots* sl, int64_t k) {
  return (float*)(sl->in + sl->inStride * (size_t)k);
}
static inline float* slotOut(const Slots* sl, int64_t k) {
  return (float*)(sl->out + sl->outStride * (size_t)k);
}

static inline char* allocPages(size_t bytes, int* ok) {
  void* p = NULL;
  if (bytes > 0 && posix_memalign(&p, 4096, roundUp(bytes, 4096)) != 0) *ok = 0;
  return (char*)p;
}

static inline void slotsFree(Slots* sl) {
  if (sl->out != sl->in) free(sl->out);
  free(sl->in);
}

// `count` sets for shape s, with rank's data in every input and zeroed
// outputs, so that every page is faulted in before anything is timed.
// Returns 0 when out of memory (then nothing stays allocated).
static inline int slotsInit(Slots* sl, const Shape* s, int64_t count, int rank) {
  int ok = 1;
  sl->slots = count;
  sl->next = 0;
  sl->inStride = roundUp((size_t)s->send * kWordBytes, kSlotAlign);
  sl->in = allocPages(sl->inStride * (size_t)count, &ok);
  if (s->inPlace) {
    sl->outStride = sl->inStride;
    sl->out = sl->in;
  } else {
    sl->outStride = roundUp((size_t)s->recv * kWordBytes, kSlotAlign);
    sl->out = allocPages(sl->outStride * (size_t)count, &ok);
  }
  if (!ok) {
    slotsFree(sl);
    return 0;
  }
  if (s->send > 0) {
    fillInput(slotIn(sl, 0), s->send, rank);
    for (int64_t k = 1; k < count; ++k) {
      memcpy(slotIn(sl, k), sl->in, (size_t)s->send * kWordBytes);
    }
  }
  if (!s->inPlace && sl->out) memset(sl->out, 0, sl->outStride * (size_t)count);
  return 1;
}

// This rank's count of wrong elements in `out` after one `op` on inputs of
// fillInput() (broadcast: the root's).
static inline int64_t countWrong(int op, const Shape* s, const float* out, int rank, int n) {
  int64_t wrong = 0;
  const int64_t block = s->count;
  for (int64_t i = 0; i < s->recv; ++i) {
    double want = 0;
    switch (op) {
      case kAllReduce:
        for (int r = 0; r < n; ++r) want += valueOf(r, i);
        break;
      case kBroadcast:
        want = valueOf(0, i);
        break;
      case kAllGather:
        want = valueOf((int)(i / block), i % block);
        break;
      case kReduceScatter:
        for (int r = 0; r < n; ++r) want += valueOf(r, rank * block + i);
        break;
      case kAllToAll:
        // Block j comes from rank j, which sent its block number `rank`.
        want = valueOf((int)(i / block), rank * block + i % block);
        break;
      default:
        break;
    }
    wrong += out[i] != (float)want;
  }
  return wrong;
}

// ---- the sweep ----

// What the sweep needs of the library under test. Every callback gets ctx.
typedef struct {
  void* ctx;
  int rank, nranks;
  // Returns once every rank has called it.
  void (*barrier)(void* ctx);
  // One `op` on buffer set `slot`, returning when this rank's part is done.
  void (*issue)(void* ctx, int op, const Shape* s, const Slots* sl, int64_t slot);
  double (*maxOverRanks)(void* ctx, double v);
  double (*sumOverRanks)(void* ctx, double v);
  // Does not return: the run cannot go on (`why` says why).
  void (*fail)(void* ctx, const char* why);
  // Optional (NULL: not needed). limitSlots: how many of `slots` sets the
  // library can take for a size of `bytes`. bind: after the sets are
  // filled, before any operation; unbind: after the last, before they are
  // freed.
  int64_t (*limitSlots)(void* ctx, int op, int64_t slots, uint64_t bytes);
  void (*bind)(void* ctx, int op, const Shape* s, const Slots* sl);
  void (*unbind)(void* ctx);
  // 1: reduce_scatter runs in place, its output the start of its input.
  int reduceScatterInPlace;
} PeerLibrary;

static inline double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Seconds this rank spent on `iters` operations started together.
static inline double runBatch(const PeerLibrary* lib, int op, const Shape* s, Slots* sl,
                              int64_t iters) {
  lib->barrier(lib->ctx);
  const double start = now();
  for (int64_t i = 0; i < iters; ++i) {
    lib->issue(lib->ctx, op, s, sl, sl->next);
    sl->next = (sl->next + 1) % sl->slots;
  }
  return now() - start;
}

typedef struct {
  const PeerLibrary* lib;
  int op;
  const Shape* shape;
  Slots* slots;
} Batches;

static inline double slowestBatch(void* ctx, int64_t batch) {
  Batches* b = (Batches*)ctx;
  return b->lib->maxOverRanks(b->lib->ctx, runBatch(b->lib, b->op, b->shape, b->slots, batch));
}

// One operation on set 0 with known inputs; returns the wrong elements over
// all ranks. Every rank has filled its buffers before any data moves (some
// libraries write straight into their peers' buffers).
static inline double checkOnce(const PeerLibrary* lib, int op, const Shape* s, Slots* sl) {
  float* in = slotIn(sl, 0);
  float* out = slotOut(sl, 0);
  if (op == kBroadcast && lib->rank != 0) {
    for (int64_t i = 0; i < s->send; ++i) in[i] = -1.0f;  // only the root's data may arrive
  } else {
    fillInput(in, s->send, lib->rank);
  }
  if (!s->inPlace) {
    for (int64_t i = 0; i < s->recv; ++i) out[i] = -1.0f;
  }
  lib->barrier(lib->ctx);
  lib->issue(lib->ctx, op, s, sl, 0);
  const int64_t wrong = countWrong(op, s, out, lib->rank, lib->nranks);
  // Restore the timing data so a later size starts from the same state.
  if (s->send > 0) fillInput(in, s->send, lib->rank);
  return lib->sumOverRanks(lib->ctx, (double)wrong);
}

static inline void printCsvHeader(FILE* csv) {
  fprintf(csv, "op,nranks,bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,check\n");
  fflush(csv);
}

// One size; returns whether its --check failed.
static inline int runSize(const char* prog, const SweepOptions* o, const PeerLibrary* lib,
                          uint64_t bytes, FILE* csv) {
  const int op = o->op;
  Shape s = shapeFor(op, bytes, lib->nranks);
  if (op == kReduceScatter && lib->reduceScatterInPlace) s.inPlace = 1;
  if (op != kBarrier && (s.send == 0 || s.recv == 0)) {
    if (lib->rank == 0) {
      fprintf(stderr, "%s: %s, %llu B: fewer than one float32 per rank; skipped\n", prog,
              kOpNames[op], (unsigned long long)bytes);
    }
    return 0;
  }
  int64_t slots = o->buffers > 0 ? o->buffers : slotCount(&s);
  if (lib->limitSlots != NULL) slots = lib->limitSlots(lib->ctx, op, slots, bytes);
  Slots sl;
  if (!slotsInit(&sl, &s, slots, lib->rank)) {
    lib->fail(lib->ctx, "out of memory");
    return 1;
  }
  if (lib->bind != NULL) lib->bind(lib->ctx, op, &s, &sl);
  if (o->warmup > 0) runBatch(lib, op, &s, &sl, o->warmup);
  Batches batches = {lib, op, &s, &sl};
  const int64_t iters =
      o->iters > 0 ? o->iters : calibrateIterations(slowestBatch, &batches, kTargetSeconds);
  const double seconds =
      lib->maxOverRanks(lib->ctx, runBatch(lib, op, &s, &sl, iters) / (double)iters);
  const char* check = "skip";
  int failed = 0;
  if (o->check) {
    failed = checkOnce(lib, op, &s, &sl) > 0;
    check = failed ? "fail" : "ok";
  }
  if (lib->unbind != NULL) lib->unbind(lib->ctx);
  slotsFree(&sl);
  if (lib->rank == 0) {
    const double algbw = seconds > 0 ? (double)s.bytes / seconds / 1e9 : 0;
    fprintf(csv, "%s,%d,%llu,%lld,float32,%.3f,%.4f,%.4f,%s\n", kOpNames[op], lib->nranks,
            (unsigned long long)s.bytes, (long long)s.count, seconds * 1e6, algbw,
            algbw * s.busFactor, check);
    fflush(csv);
  }
  return failed;
}

// The whole sweep of o->op: the CSV header, then a row per size, on rank
// 0's `csv`; `prog` begins each note on stderr. Returns whether any --check
// failed.
static inline int runSweep(const char* prog, const SweepOptions* o, const PeerLibrary* lib,
                           FILE* csv) {
  if (lib->rank == 0) printCsvHeader(csv);
  int failed = 0;
  uint64_t bytes = o->op == kBarrier ? 0 : o->minBytes;
  for (;;) {
    failed |= runSize(prog, o, lib, bytes, csv);
    if (o->op == kBarrier) break;
    // The same sweep as meshcomm-bench: multiply (a size of 0 steps to 1)
    // until the next size would pass -e or overflow.
    const uint64_t next = bytes == 0 ? 1 : bytes * o->factor;
    if ((bytes != 0 && next / o->factor != bytes) || next <= bytes || next > o->maxBytes) break;
    bytes = next;
  }
  return failed;
}

#ifdef MPI_VERSION
// ---- the programs that MPI starts (mpi_bench.c, ccl_bench.cc) ----

// Ends the job with exit status 2; rank 0 says why on stderr after `prog`.
static inline void mpiDie(const char* prog, const char* why) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) fprintf(stderr, "%s: %s\n", prog, why);
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

// MPI_Init, then the command line into o. --help prints how to start the
// program (`launch`, e.g. "mpirun -np N mpi_bench") on rank 0's `out` and
// ends it; a wrong option ends the job (mpiDie).
static inline void mpiStart(int* argc, char*** argv, const char* prog, const char* launch,
                            FILE* out, SweepOptions* o) {
  MPI_Init(argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char why[200];
  char msg[240];
  switch (parseSweepOptions(*argc, *argv, o, NULL, NULL, why, sizeof why)) {
    case kParsedHelp:
      if (rank == 0) {
        fprintf(out,
                "usage: %s OP [-b SIZE] [-e SIZE] [-f F] [--iters N]\n"
                "                [--warmup N] [--buffers K] [--check]\n"
                "OP: all_reduce broadcast all_gather reduce_scatter all_to_all barrier\n",
                launch);
      }
      MPI_Finalize();
      exit(0);
    case kParsedError:
      snprintf(msg, sizeof msg, "%s (see --help)", why);
      mpiDie(prog, msg);
  }
}
#endif

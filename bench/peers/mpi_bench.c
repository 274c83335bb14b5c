// mpi_bench: one MPI collective over a range of message sizes, measured the
// way meshcomm-bench measures meshcomm, so that a row of either tool can be
// compared with the row of the same (op, nranks, bytes) of the other.
//
//   mpirun -np N mpi_bench OP [-b SIZE] [-e SIZE] [-f F] [--iters N]
//                             [--warmup N] [--buffers K] [--check]
//   OP: all_reduce, broadcast, all_gather, reduce_scatter, all_to_all, barrier
//
// What is shared with meshcomm-bench (tools/bench/ops.cc, runner.cc):
// - dtype float32, op sum, root 0; all_reduce in place (MPI_IN_PLACE), like
//   meshcomm's in-place all_reduce; broadcast in place by nature.
// - For a requested size S and count = S/4, block = count/n:
//     all_reduce, broadcast: count elements; "count" column = count
//     all_gather: in block, out block*n       ("count" = block)
//     reduce_scatter: in block*n, out block   ("count" = block)
//     all_to_all: in and out block*n          ("count" = block)
//   bytes column = max(in, out) bytes; algbw = bytes / time;
//   busbw = algbw * 2(n-1)/n (all_reduce), (n-1)/n (all_gather,
//   reduce_scatter, all_to_all), 1 (broadcast). barrier: one row of size 0.
// - Buffer sets rotate between iterations: enough sets to cover 64 MiB, at
//   least 4, at most 256 MiB in total, so that a small message is not
//   served from cache every time. Each set's buffers start on a 64-byte
//   boundary; every page is touched before timing.
// - Per size: --warmup untimed iterations (5), then a calibration that grows
//   batches until one takes 20 ms, then a timed run of enough iterations for
//   about 0.25 s (at least 5, at most 1,000,000) unless --iters is given.
//   Every run starts after a barrier; time = the largest over ranks of each
//   rank's mean time per operation.
// Sizes whose per-rank element count is 0 (fewer than one float per rank)
// are skipped with a note on stderr: meshcomm-bench prints them as size 0.
//
// Output: CSV on rank 0's stdout, with meshcomm-bench --csv's columns:
// op,nranks,bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,check
// (check: skip, or ok/fail with --check, which verifies one operation per
// size against values computed locally).
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kAllToAll, kBarrier };

static const char* const kOpNames[] = {"all_reduce",     "broadcast",  "all_gather",
                                       "reduce_scatter", "all_to_all", "barrier"};
enum { kNumOps = sizeof kOpNames / sizeof kOpNames[0] };

static const size_t kWordBytes = sizeof(float);
static const size_t kSlotAlign = 64;               // sets never share a cache line
static const size_t kCoverBytes = (size_t)64 << 20;
static const size_t kMaxTotalBytes = (size_t)256 << 20;
static const int64_t kMinSlots = 4;
static const int64_t kMaxIters = 1000000;
static const double kCalibrationSeconds = 0.02;
static const double kTargetSeconds = 0.25;

typedef struct {
  int op;
  uint64_t minBytes, maxBytes, factor;
  int64_t iters;    // 0: adaptive
  int64_t warmup;
  int64_t buffers;  // 0: automatic
  int check;
} Options;

// Element counts of one size, as meshcomm-bench's shapeFor() derives them.
typedef struct {
  int64_t send, recv;  // elements of this rank's input and output
  int64_t count;       // the "count" column
  uint64_t bytes;      // the "bytes" column, also the bytes algbw counts
  double busFactor;
  int inPlace;
} Shape;

// The rotating buffer sets of one size: slot k's input starts at
// in + k*inStride, its output at out + k*outStride (out == in when in place).
typedef struct {
  char* in;
  char* out;
  size_t inStride, outStride;
  int64_t slots;
  int64_t next;  // slot of the next operation; carries over between runs
} Slots;

static int gRank, gSize;

static void die(const char* msg) {
  if (gRank == 0) fprintf(stderr, "mpi_bench: %s\n", msg);
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

static size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// "8", "64K", "1M", "2G", with an optional trailing B (powers of 1024).
static int parseSize(const char* text, uint64_t* out) {
  char* end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text) return 0;
  int shift = 0;
  if (*end == 'k' || *end == 'K') shift = 10, ++end;
  else if (*end == 'm' || *end == 'M') shift = 20, ++end;
  else if (*end == 'g' || *end == 'G') shift = 30, ++end;
  if (*end == 'b' || *end == 'B') ++end;
  if (*end != '\0' || v > (UINT64_C(64) << 30) >> shift) return 0;
  *out = (uint64_t)v << shift;
  return 1;
}

static int64_t parseCount(const char* text, int64_t lo, const char* what) {
  char* end = NULL;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < lo) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s expects an integer >= %lld, got '%s'", what, (long long)lo, text);
    die(msg);
  }
  return v;
}

static void parseOptions(int argc, char** argv, Options* o) {
  o->op = -1;
  o->minBytes = o->maxBytes = (uint64_t)32 << 20;  // meshcomm-bench's defaults
  o->factor = 2;
  o->iters = 0;
  o->warmup = 5;
  o->buffers = 0;
  o->check = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--check") == 0) { o->check = 1; continue; }
    if (strcmp(a, "--csv") == 0) continue;  // CSV is the only output format
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      if (gRank == 0) {
        printf("usage: mpirun -np N mpi_bench OP [-b SIZE] [-e SIZE] [-f F] [--iters N]\n"
               "                [--warmup N] [--buffers K] [--check]\n"
               "OP: all_reduce broadcast all_gather reduce_scatter all_to_all barrier\n");
      }
      MPI_Finalize();
      exit(0);
    }
    if (a[0] != '-') {
      for (int k = 0; k < kNumOps; ++k) {
        if (strcmp(a, kOpNames[k]) == 0) o->op = k;
      }
      if (o->op < 0) die("unknown operation (see --help)");
      continue;
    }
    if (v == NULL) die("an option is missing its value");
    ++i;
    if (strcmp(a, "-b") == 0 || strcmp(a, "--minbytes") == 0) {
      if (!parseSize(v, &o->minBytes)) die("-b expects a size like 8, 64K or 1M");
    } else if (strcmp(a, "-e") == 0 || strcmp(a, "--maxbytes") == 0) {
      if (!parseSize(v, &o->maxBytes)) die("-e expects a size like 8, 64K or 1M");
    } else if (strcmp(a, "-f") == 0 || strcmp(a, "--stepfactor") == 0) {
      o->factor = (uint64_t)parseCount(v, 2, "-f");
    } else if (strcmp(a, "--iters") == 0) {
      o->iters = parseCount(v, 1, "--iters");
    } else if (strcmp(a, "--warmup") == 0) {
      o->warmup = parseCount(v, 0, "--warmup");
    } else if (strcmp(a, "--buffers") == 0) {
      o->buffers = parseCount(v, 1, "--buffers");
    } else {
      die("unknown option (see --help)");
    }
  }
  if (o->op < 0) die("no operation given (see --help)");
  if (o->minBytes > o->maxBytes) die("-b is larger than -e");
}

static Shape shapeFor(int op, uint64_t bytes, int n) {
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

// meshcomm-bench's defaultSlotCount(): cover 64 MiB, at least 4 sets, at
// most 256 MiB in total (but always at least one set).
static int64_t slotCount(const Shape* s) {
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
static float valueOf(int rank, int64_t index) {
  return (float)((rank + 1) * 1000 + (int)(index % 997));
}

static void fillInput(float* p, int64_t n, int rank, int64_t offset) {
  for (int64_t i = 0; i < n; ++i) p[i] = valueOf(rank, offset + i);
}

static void* allocOrDie(size_t bytes) {
  if (bytes == 0) return NULL;
  void* p = NULL;
  if (posix_memalign(&p, 4096, roundUp(bytes, 4096)) != 0) die("out of memory");
  return p;
}

static void slotsInit(Slots* sl, const Shape* s, int64_t count) {
  sl->slots = count;
  sl->next = 0;
  sl->inStride = roundUp((size_t)s->send * kWordBytes, kSlotAlign);
  sl->in = allocOrDie(sl->inStride * (size_t)count);
  if (s->inPlace) {
    sl->outStride = sl->inStride;
    sl->out = sl->in;
  } else {
    sl->outStride = roundUp((size_t)s->recv * kWordBytes, kSlotAlign);
    sl->out = allocOrDie(sl->outStride * (size_t)count);
  }
  // Same data in every input, zeroed outputs: every page is faulted in
  // before anything is timed.
  if (s->send > 0) {
    fillInput((float*)sl->in, s->send, gRank, 0);
    for (int64_t k = 1; k < count; ++k) {
      memcpy(sl->in + sl->inStride * (size_t)k, sl->in, (size_t)s->send * kWordBytes);
    }
  }
  if (!s->inPlace && sl->out) memset(sl->out, 0, sl->outStride * (size_t)count);
}

static void slotsFree(Slots* sl) {
  if (sl->out != sl->in) free(sl->out);
  free(sl->in);
}

static void issue(int op, const Shape* s, char* in, char* out) {
  const int n = gSize;
  int rc = MPI_SUCCESS;
  switch (op) {
    case kAllReduce:
      rc = MPI_Allreduce(MPI_IN_PLACE, in, (int)s->send, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case kBroadcast:
      rc = MPI_Bcast(in, (int)s->send, MPI_FLOAT, 0, MPI_COMM_WORLD);
      break;
    case kAllGather:
      rc = MPI_Allgather(in, (int)s->send, MPI_FLOAT, out, (int)s->send, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case kReduceScatter:
      rc = MPI_Reduce_scatter_block(in, out, (int)s->recv, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case kAllToAll:
      rc = MPI_Alltoall(in, (int)(s->send / n), MPI_FLOAT, out, (int)(s->send / n), MPI_FLOAT,
                        MPI_COMM_WORLD);
      break;
    default:
      rc = MPI_Barrier(MPI_COMM_WORLD);
      break;
  }
  if (rc != MPI_SUCCESS) die("an MPI collective failed");
}

// Seconds this rank spent on `iters` operations started together.
static double runBatch(int op, const Shape* s, Slots* sl, int64_t iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  double start = now();
  for (int64_t i = 0; i < iters; ++i) {
    issue(op, s, sl->in + sl->inStride * (size_t)sl->next,
          sl->out + sl->outStride * (size_t)sl->next);
    sl->next = (sl->next + 1) % sl->slots;
  }
  return now() - start;
}

static double maxOverRanks(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}

// meshcomm-bench's calibrate(): batches grow until one lasts 20 ms (each
// decision on the slowest rank's time, so every rank agrees), then enough
// iterations for the target.
static int64_t calibrate(int op, const Shape* s, Slots* sl) {
  int64_t batch = 1;
  double perIter;
  for (;;) {
    double t = maxOverRanks(runBatch(op, s, sl, batch));
    if (t >= kCalibrationSeconds || batch >= kMaxIters) {
      perIter = t / (double)batch;
      break;
    }
    double grow = t > 0 ? 1.2 * kCalibrationSeconds / t : 100.0;
    if (grow > 100.0) grow = 100.0;
    double next = (double)batch * grow;
    int64_t nextBatch = (int64_t)(next + 0.999999);
    if (nextBatch < batch * 2) nextBatch = batch * 2;
    batch = nextBatch < kMaxIters ? nextBatch : kMaxIters;
  }
  double want = perIter > 0 ? kTargetSeconds / perIter + 0.999999 : (double)kMaxIters;
  if (want > (double)kMaxIters) return kMaxIters;
  return want < 5 ? 5 : (int64_t)want;
}

// One operation on slot 0 with known inputs; returns this rank's count of
// wrong output elements.
static int64_t checkOnce(int op, const Shape* s, Slots* sl) {
  const int n = gSize;
  float* in = (float*)sl->in;
  float* out = (float*)sl->out;
  if (op == kBroadcast && gRank != 0) {
    for (int64_t i = 0; i < s->send; ++i) in[i] = -1.0f;  // only the root's data may arrive
  } else {
    fillInput(in, s->send, gRank, 0);
  }
  if (!s->inPlace) {
    for (int64_t i = 0; i < s->recv; ++i) out[i] = -1.0f;
  }
  issue(op, s, sl->in, sl->out);

  int64_t wrong = 0;
  const int64_t block = s->count;
  switch (op) {
    case kAllReduce:
      for (int64_t i = 0; i < s->recv; ++i) {
        double want = 0;
        for (int r = 0; r < n; ++r) want += valueOf(r, i);
        wrong += out[i] != (float)want;
      }
      break;
    case kBroadcast:
      for (int64_t i = 0; i < s->recv; ++i) wrong += out[i] != valueOf(0, i);
      break;
    case kAllGather:
      for (int64_t i = 0; i < s->recv; ++i) wrong += out[i] != valueOf((int)(i / block), i % block);
      break;
    case kReduceScatter:
      for (int64_t i = 0; i < s->recv; ++i) {
        double want = 0;
        for (int r = 0; r < n; ++r) want += valueOf(r, gRank * block + i);
        wrong += out[i] != (float)want;
      }
      break;
    case kAllToAll:
      // Block j comes from rank j, which sent its block number gRank.
      for (int64_t i = 0; i < s->recv; ++i) {
        wrong += out[i] != valueOf((int)(i / block), gRank * block + i % block);
      }
      break;
    default:
      break;
  }
  // Restore the timing data so a later size starts from the same state.
  if (s->send > 0) fillInput(in, s->send, gRank, 0);
  return wrong;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &gRank);
  MPI_Comm_size(MPI_COMM_WORLD, &gSize);
  Options o;
  parseOptions(argc, argv, &o);

  if (gRank == 0) {
    printf("op,nranks,bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,check\n");
    fflush(stdout);
  }
  int failed = 0;
  uint64_t bytes = o.op == kBarrier ? 0 : o.minBytes;
  for (;;) {
    Shape s = shapeFor(o.op, bytes, gSize);
    if (o.op != kBarrier && (s.send == 0 || s.recv == 0)) {
      if (gRank == 0) {
        fprintf(stderr, "mpi_bench: %s, %llu B: fewer than one float32 per rank; skipped\n",
                kOpNames[o.op], (unsigned long long)bytes);
      }
    } else {
      Slots sl;
      slotsInit(&sl, &s, o.buffers > 0 ? o.buffers : slotCount(&s));
      if (o.warmup > 0) runBatch(o.op, &s, &sl, o.warmup);
      int64_t iters = o.iters > 0 ? o.iters : calibrate(o.op, &s, &sl);
      double seconds = maxOverRanks(runBatch(o.op, &s, &sl, iters) / (double)iters);
      const char* check = "skip";
      if (o.check) {
        long long wrong = checkOnce(o.op, &s, &sl);
        MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        check = wrong > 0 ? "fail" : "ok";
        failed |= wrong > 0;
      }
      slotsFree(&sl);
      if (gRank == 0) {
        double algbw = seconds > 0 ? (double)s.bytes / seconds / 1e9 : 0;
        printf("%s,%d,%llu,%lld,float32,%.3f,%.4f,%.4f,%s\n", kOpNames[o.op], gSize,
               (unsigned long long)s.bytes, (long long)s.count, seconds * 1e6, algbw,
               algbw * s.busFactor, check);
        fflush(stdout);
      }
    }
    if (o.op == kBarrier) break;
    // The same sweep as meshcomm-bench: multiply (a size of 0 steps to 1)
    // until the next size would pass -e or overflow.
    uint64_t next = bytes == 0 ? 1 : bytes * o.factor;
    if ((bytes != 0 && next / o.factor != bytes) || next <= bytes || next > o.maxBytes) break;
    bytes = next;
  }
  MPI_Finalize();
  return failed ? 1 : 0;
}

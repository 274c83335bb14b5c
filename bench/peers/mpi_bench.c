// mpi_bench: one MPI collective over a range of message sizes, measured the
// way meshcomm-bench measures meshcomm, so that a row of either tool can be
// compared with the row of the same (op, nranks, bytes) of the other.
//
//   mpirun -np N mpi_bench OP [-b SIZE] [-e SIZE] [-f F] [--iters N]
//                             [--warmup N] [--buffers K] [--check]
//   OP: all_reduce, broadcast, all_gather, reduce_scatter, all_to_all, barrier
//
// What is shared with meshcomm-bench (tools/bench/ops.cc, runner.cc), and
// with the other peer benchmarks through peer_bench.h, which implements it:
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

#include "peer_bench.h"

static int gSize;

// ---- the library's part of the sweep (PeerLibrary) ----

static void barrier(void* ctx) {
  (void)ctx;
  MPI_Barrier(MPI_COMM_WORLD);
}

static void issue(void* ctx, int op, const Shape* s, const Slots* sl, int64_t slot) {
  (void)ctx;
  float* in = slotIn(sl, slot);
  float* out = slotOut(sl, slot);
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
  if (rc != MPI_SUCCESS) mpiDie("mpi_bench", "an MPI collective failed");
}

static double reduceOverRanks(double v, MPI_Op op) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
  return v;
}
static double maxOverRanks(void* ctx, double v) {
  (void)ctx;
  return reduceOverRanks(v, MPI_MAX);
}
static double sumOverRanks(void* ctx, double v) {
  (void)ctx;
  return reduceOverRanks(v, MPI_SUM);
}

static void fail(void* ctx, const char* why) {
  (void)ctx;
  mpiDie("mpi_bench", why);
}

int main(int argc, char** argv) {
  SweepOptions o;
  mpiStart(&argc, &argv, "mpi_bench", "mpirun -np N mpi_bench", stdout, &o);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &gSize);
  const PeerLibrary lib = {.rank = rank, .nranks = gSize, .barrier = barrier, .issue = issue,
                           .maxOverRanks = maxOverRanks, .sumOverRanks = sumOverRanks,
                           .fail = fail};
  const int failed = runSweep("mpi_bench", &o, &lib, stdout);
  MPI_Finalize();
  return failed ? 1 : 0;
}

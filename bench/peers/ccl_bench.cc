// ccl_bench: one oneCCL collective over a range of message sizes, measured
// exactly as mpi_bench.c measures MPI (and so as meshcomm-bench measures
// meshcomm), by the same code (peer_bench.h): same sizes, shapes, buffer
// rotation, warmup, calibration, timing and CSV columns. Read mpi_bench.c's
// header comment for the method; only what differs is described here.
//
//   mpiexec -n N ccl_bench OP [-b SIZE] [-e SIZE] [-f F] [--iters N]
//                             [--warmup N] [--buffers K] [--check]
//   OP: all_reduce, broadcast, all_gather, reduce_scatter, all_to_all, barrier
//
// - Started by Intel MPI's mpiexec (hydra). MPI only wires the ranks up:
//   rank 0 creates oneCCL's main key-value store and broadcasts its address
//   with MPI_Bcast, the start-up oneCCL's own samples use. Everything timed,
//   and the barrier before each batch and the max over ranks of the times,
//   goes through oneCCL.
// - Host buffers, float32, sum, root 0. The calls: ccl::allreduce in place
//   (send == recv), ccl::broadcast, ccl::allgather, ccl::reduce_scatter,
//   ccl::alltoall, ccl::barrier, each waited for (.wait()) before the next.
// - oneCCL's transport and worker threads are chosen by its environment
//   (CCL_ATL_TRANSPORT, CCL_WORKER_OFFLOAD, ...): see run_peer.sh.
//
// Output: CSV on rank 0's stdout, with meshcomm-bench --csv's columns:
// op,nranks,bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,check
// oneCCL prints some of its warnings on stdout: the program keeps stdout for
// the CSV and sends everything else printed there to stderr.
#include <mpi.h>
#include <unistd.h>

#include <oneapi/ccl.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>

#include "peer_bench.h"

namespace {

int gRank = 0, gSize = 1;
std::optional<ccl::communicator> gComm;
FILE* gCsv = stdout;  // the CSV's stream: the original stdout (see main())

// ---- the library's part of the sweep (PeerLibrary) ----

void barrier(void*) { ccl::barrier(*gComm).wait(); }

void issue(void*, int op, const Shape* s, const Slots* sl, int64_t slot) {
  const ccl::communicator& comm = *gComm;
  const auto f32 = ccl::datatype::float32;
  float* in = slotIn(sl, slot);
  float* out = slotOut(sl, slot);
  switch (op) {
    case kAllReduce:
      ccl::allreduce(in, in, static_cast<size_t>(s->send), f32, ccl::reduction::sum, comm).wait();
      break;
    case kBroadcast:
      ccl::broadcast(in, static_cast<size_t>(s->send), f32, 0, comm).wait();
      break;
    case kAllGather:
      ccl::allgather(in, out, static_cast<size_t>(s->send), f32, comm).wait();
      break;
    case kReduceScatter:
      ccl::reduce_scatter(in, out, static_cast<size_t>(s->recv), f32, ccl::reduction::sum, comm)
          .wait();
      break;
    case kAllToAll:
      ccl::alltoall(in, out, static_cast<size_t>(s->send / gSize), f32, comm).wait();
      break;
    default:
      ccl::barrier(comm).wait();
      break;
  }
}

double reduceOverRanks(double v, ccl::reduction op) {
  ccl::allreduce(&v, &v, 1, ccl::datatype::float64, op, *gComm).wait();
  return v;
}
double maxOverRanks(void*, double v) { return reduceOverRanks(v, ccl::reduction::max); }
double sumOverRanks(void*, double v) { return reduceOverRanks(v, ccl::reduction::sum); }

void fail(void*, const char* why) { mpiDie("ccl_bench", why); }

}  // namespace

int main(int argc, char** argv) {
  const int csvFd = dup(STDOUT_FILENO);
  if (csvFd < 0 || (gCsv = fdopen(csvFd, "w")) == nullptr || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    std::perror("ccl_bench: cannot set up stdout");
    return 2;
  }
  ccl::init();
  SweepOptions o;
  mpiStart(&argc, &argv, "ccl_bench", "mpiexec -n N ccl_bench", gCsv, &o);
  MPI_Comm_rank(MPI_COMM_WORLD, &gRank);
  MPI_Comm_size(MPI_COMM_WORLD, &gSize);

  bool failed = false;
  try {
    ccl::shared_ptr_class<ccl::kvs> kvs;
    ccl::kvs::address_type address{};
    if (gRank == 0) {
      kvs = ccl::create_main_kvs();
      address = kvs->get_address();
    }
    MPI_Bcast(address.data(), static_cast<int>(address.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (gRank != 0) kvs = ccl::create_kvs(address);
    gComm.emplace(ccl::create_communicator(gSize, gRank, kvs));

    const PeerLibrary lib = {.ctx = nullptr, .rank = gRank, .nranks = gSize, .barrier = barrier,
                             .issue = issue, .maxOverRanks = maxOverRanks,
                             .sumOverRanks = sumOverRanks, .fail = fail, .limitSlots = nullptr,
                             .bind = nullptr, .unbind = nullptr, .reduceScatterInPlace = 0};
    failed = runSweep("ccl_bench", &o, &lib, gCsv);
    gComm.reset();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ccl_bench: rank %d: %s\n", gRank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
  }
  MPI_Finalize();
  return failed ? 1 : 0;
}

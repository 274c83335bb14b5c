// ccl_bench: one oneCCL collective over a range of message sizes, measured
// exactly as mpi_bench.c measures MPI (and so as meshcomm-bench measures
// meshcomm): same sizes, shapes, buffer rotation, warmup, calibration, timing
// and CSV columns. Read mpi_bench.c's header comment for the method; only
// what differs is described here.
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

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

namespace {

enum Op { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kAllToAll, kBarrier, kNumOps };

constexpr const char* kOpNames[kNumOps] = {"all_reduce",     "broadcast",  "all_gather",
                                           "reduce_scatter", "all_to_all", "barrier"};

constexpr size_t kWordBytes = sizeof(float);
constexpr size_t kSlotAlign = 64;  // sets never share a cache line
constexpr size_t kCoverBytes = size_t{64} << 20;
constexpr size_t kMaxTotalBytes = size_t{256} << 20;
constexpr int64_t kMinSlots = 4;
constexpr int64_t kMaxIters = 1000000;
constexpr double kCalibrationSeconds = 0.02;
constexpr double kTargetSeconds = 0.25;

struct Options {
  int op = -1;
  uint64_t minBytes = uint64_t{32} << 20;  // meshcomm-bench's defaults
  uint64_t maxBytes = uint64_t{32} << 20;
  uint64_t factor = 2;
  int64_t iters = 0;  // 0: adaptive
  int64_t warmup = 5;
  int64_t buffers = 0;  // 0: automatic
  bool check = false;
};

// Element counts of one size, as meshcomm-bench's shapeFor() derives them.
struct Shape {
  int64_t send = 0, recv = 0;  // elements of this rank's input and output
  int64_t count = 0;           // the "count" column
  uint64_t bytes = 0;          // the "bytes" column, also the bytes algbw counts
  double busFactor = 0;
  bool inPlace = false;
};

// The rotating buffer sets of one size: slot k's input starts at
// in + k*inStride, its output at out + k*outStride (out == in when in place).
struct Slots {
  char* in = nullptr;
  char* out = nullptr;
  size_t inStride = 0, outStride = 0;
  int64_t slots = 0;
  int64_t next = 0;  // slot of the next operation; carries over between runs
};

int gRank = 0, gSize = 1;
std::optional<ccl::communicator> gComm;
FILE* gCsv = stdout;  // the CSV's stream: the original stdout (see main())

[[noreturn]] void die(const std::string& msg) {
  if (gRank == 0) std::fprintf(stderr, "ccl_bench: %s\n", msg.c_str());
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

double now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// "8", "64K", "1M", "2G", with an optional trailing B (powers of 1024).
bool parseSize(std::string_view text, uint64_t* out) {
  unsigned long long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end == text.data()) return false;
  std::string_view rest(end, static_cast<size_t>(text.data() + text.size() - end));
  int shift = 0;
  if (!rest.empty() && (rest[0] == 'k' || rest[0] == 'K')) shift = 10, rest.remove_prefix(1);
  else if (!rest.empty() && (rest[0] == 'm' || rest[0] == 'M')) shift = 20, rest.remove_prefix(1);
  else if (!rest.empty() && (rest[0] == 'g' || rest[0] == 'G')) shift = 30, rest.remove_prefix(1);
  if (!rest.empty() && (rest[0] == 'b' || rest[0] == 'B')) rest.remove_prefix(1);
  if (!rest.empty() || v > ((uint64_t{64} << 30) >> shift)) return false;
  *out = static_cast<uint64_t>(v) << shift;
  return true;
}

int64_t parseCount(std::string_view text, int64_t lo, const char* what) {
  long long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo) {
    die(std::string(what) + " expects an integer >= " + std::to_string(lo) + ", got '" +
        std::string(text) + "'");
  }
  return v;
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--check") { o.check = true; continue; }
    if (a == "--csv") continue;  // CSV is the only output format
    if (a == "-h" || a == "--help") {
      if (gRank == 0) {
        std::fprintf(gCsv,
            "usage: mpiexec -n N ccl_bench OP [-b SIZE] [-e SIZE] [-f F] [--iters N]\n"
            "                [--warmup N] [--buffers K] [--check]\n"
            "OP: all_reduce broadcast all_gather reduce_scatter all_to_all barrier\n");
      }
      MPI_Finalize();
      std::exit(0);
    }
    if (a[0] != '-') {
      for (int k = 0; k < kNumOps; ++k) {
        if (a == kOpNames[k]) o.op = k;
      }
      if (o.op < 0) die("unknown operation (see --help)");
      continue;
    }
    if (i + 1 >= argc) die("an option is missing its value");
    const std::string_view v = argv[++i];
    if (a == "-b" || a == "--minbytes") {
      if (!parseSize(v, &o.minBytes)) die("-b expects a size like 8, 64K or 1M");
    } else if (a == "-e" || a == "--maxbytes") {
      if (!parseSize(v, &o.maxBytes)) die("-e expects a size like 8, 64K or 1M");
    } else if (a == "-f" || a == "--stepfactor") {
      o.factor = static_cast<uint64_t>(parseCount(v, 2, "-f"));
    } else if (a == "--iters") {
      o.iters = parseCount(v, 1, "--iters");
    } else if (a == "--warmup") {
      o.warmup = parseCount(v, 0, "--warmup");
    } else if (a == "--buffers") {
      o.buffers = parseCount(v, 1, "--buffers");
    } else {
      die("unknown option (see --help)");
    }
  }
  if (o.op < 0) die("no operation given (see --help)");
  if (o.minBytes > o.maxBytes) die("-b is larger than -e");
  return o;
}

Shape shapeFor(int op, uint64_t bytes, int n) {
  const int64_t count = static_cast<int64_t>(bytes / kWordBytes);
  const int64_t block = count / n;
  const double share = static_cast<double>(n - 1) / n;
  Shape s;
  switch (op) {
    case kAllReduce:
    case kBroadcast:
      s.send = s.recv = s.count = count;
      s.busFactor = op == kAllReduce ? 2.0 * share : 1.0;
      s.inPlace = true;
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
  s.bytes = static_cast<uint64_t>(std::max(s.send, s.recv)) * kWordBytes;
  return s;
}

// meshcomm-bench's defaultSlotCount(): cover 64 MiB, at least 4 sets, at
// most 256 MiB in total (but always at least one set).
int64_t slotCount(const Shape& s) {
  size_t slotBytes = roundUp(static_cast<size_t>(s.send) * kWordBytes, kSlotAlign);
  if (!s.inPlace) slotBytes += roundUp(static_cast<size_t>(s.recv) * kWordBytes, kSlotAlign);
  if (slotBytes == 0) return 1;
  size_t slots = std::max((kCoverBytes + slotBytes - 1) / slotBytes, static_cast<size_t>(kMinSlots));
  const size_t cap = std::max(kMaxTotalBytes / slotBytes, size_t{1});
  return static_cast<int64_t>(std::min(slots, cap));
}

// Exactly representable in float32 and distinct per rank, so sums over up
// to a few thousand ranks compare exactly.
float valueOf(int rank, int64_t index) {
  return static_cast<float>((rank + 1) * 1000 + static_cast<int>(index % 997));
}

void fillInput(float* p, int64_t n, int rank, int64_t offset) {
  for (int64_t i = 0; i < n; ++i) p[i] = valueOf(rank, offset + i);
}

char* allocOrDie(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, roundUp(bytes, 4096)) != 0) die("out of memory");
  return static_cast<char*>(p);
}

void slotsInit(Slots* sl, const Shape& s, int64_t count) {
  sl->slots = count;
  sl->next = 0;
  sl->inStride = roundUp(static_cast<size_t>(s.send) * kWordBytes, kSlotAlign);
  sl->in = allocOrDie(sl->inStride * static_cast<size_t>(count));
  if (s.inPlace) {
    sl->outStride = sl->inStride;
    sl->out = sl->in;
  } else {
    sl->outStride = roundUp(static_cast<size_t>(s.recv) * kWordBytes, kSlotAlign);
    sl->out = allocOrDie(sl->outStride * static_cast<size_t>(count));
  }
  // Same data in every input, zeroed outputs: every page is faulted in
  // before anything is timed.
  if (s.send > 0) {
    fillInput(reinterpret_cast<float*>(sl->in), s.send, gRank, 0);
    for (int64_t k = 1; k < count; ++k) {
      std::memcpy(sl->in + sl->inStride * static_cast<size_t>(k), sl->in,
                  static_cast<size_t>(s.send) * kWordBytes);
    }
  }
  if (!s.inPlace && sl->out) std::memset(sl->out, 0, sl->outStride * static_cast<size_t>(count));
}

void slotsFree(Slots* sl) {
  if (sl->out != sl->in) std::free(sl->out);
  std::free(sl->in);
}

void issue(int op, const Shape& s, char* in, char* out) {
  const ccl::communicator& comm = *gComm;
  const auto f32 = ccl::datatype::float32;
  switch (op) {
    case kAllReduce:
      ccl::allreduce(in, in, static_cast<size_t>(s.send), f32, ccl::reduction::sum, comm).wait();
      break;
    case kBroadcast:
      ccl::broadcast(in, static_cast<size_t>(s.send), f32, 0, comm).wait();
      break;
    case kAllGather:
      ccl::allgather(in, out, static_cast<size_t>(s.send), f32, comm).wait();
      break;
    case kReduceScatter:
      ccl::reduce_scatter(in, out, static_cast<size_t>(s.recv), f32, ccl::reduction::sum, comm)
          .wait();
      break;
    case kAllToAll:
      ccl::alltoall(in, out, static_cast<size_t>(s.send / gSize), f32, comm).wait();
      break;
    default:
      ccl::barrier(comm).wait();
      break;
  }
}

// Seconds this rank spent on `iters` operations started together.
double runBatch(int op, const Shape& s, Slots* sl, int64_t iters) {
  ccl::barrier(*gComm).wait();
  const double start = now();
  for (int64_t i = 0; i < iters; ++i) {
    issue(op, s, sl->in + sl->inStride * static_cast<size_t>(sl->next),
          sl->out + sl->outStride * static_cast<size_t>(sl->next));
    sl->next = (sl->next + 1) % sl->slots;
  }
  return now() - start;
}

double maxOverRanks(double v) {
  ccl::allreduce(&v, &v, 1, ccl::datatype::float64, ccl::reduction::max, *gComm).wait();
  return v;
}

// meshcomm-bench's calibrate(): batches grow until one lasts 20 ms (each
// decision on the slowest rank's time, so every rank agrees), then enough
// iterations for the target.
int64_t calibrate(int op, const Shape& s, Slots* sl) {
  int64_t batch = 1;
  double perIter = 0;
  for (;;) {
    const double t = maxOverRanks(runBatch(op, s, sl, batch));
    if (t >= kCalibrationSeconds || batch >= kMaxIters) {
      perIter = t / static_cast<double>(batch);
      break;
    }
    const double grow = t > 0 ? std::min(1.2 * kCalibrationSeconds / t, 100.0) : 100.0;
    int64_t nextBatch = static_cast<int64_t>(static_cast<double>(batch) * grow + 0.999999);
    nextBatch = std::max(nextBatch, batch * 2);
    batch = std::min(nextBatch, kMaxIters);
  }
  const double want = perIter > 0 ? kTargetSeconds / perIter + 0.999999 : double(kMaxIters);
  if (want > static_cast<double>(kMaxIters)) return kMaxIters;
  return want < 5 ? 5 : static_cast<int64_t>(want);
}

// One operation on slot 0 with known inputs; returns this rank's count of
// wrong output elements.
int64_t checkOnce(int op, const Shape& s, Slots* sl) {
  const int n = gSize;
  float* in = reinterpret_cast<float*>(sl->in);
  float* out = reinterpret_cast<float*>(sl->out);
  if (op == kBroadcast && gRank != 0) {
    std::fill(in, in + s.send, -1.0f);  // only the root's data may arrive
  } else {
    fillInput(in, s.send, gRank, 0);
  }
  if (!s.inPlace) std::fill(out, out + s.recv, -1.0f);
  issue(op, s, sl->in, sl->out);

  int64_t wrong = 0;
  const int64_t block = s.count;
  switch (op) {
    case kAllReduce:
      for (int64_t i = 0; i < s.recv; ++i) {
        double want = 0;
        for (int r = 0; r < n; ++r) want += valueOf(r, i);
        wrong += out[i] != static_cast<float>(want);
      }
      break;
    case kBroadcast:
      for (int64_t i = 0; i < s.recv; ++i) wrong += out[i] != valueOf(0, i);
      break;
    case kAllGather:
      for (int64_t i = 0; i < s.recv; ++i) {
        wrong += out[i] != valueOf(static_cast<int>(i / block), i % block);
      }
      break;
    case kReduceScatter:
      for (int64_t i = 0; i < s.recv; ++i) {
        double want = 0;
        for (int r = 0; r < n; ++r) want += valueOf(r, gRank * block + i);
        wrong += out[i] != static_cast<float>(want);
      }
      break;
    case kAllToAll:
      // Block j comes from rank j, which sent its block number gRank.
      for (int64_t i = 0; i < s.recv; ++i) {
        wrong += out[i] != valueOf(static_cast<int>(i / block), gRank * block + i % block);
      }
      break;
    default:
      break;
  }
  // Restore the timing data so a later size starts from the same state.
  if (s.send > 0) fillInput(in, s.send, gRank, 0);
  return wrong;
}

// The sweep over sizes; returns whether any --check failed.
bool sweep(const Options& o) {
  bool failed = false;
  uint64_t bytes = o.op == kBarrier ? 0 : o.minBytes;
  for (;;) {
    const Shape s = shapeFor(o.op, bytes, gSize);
    if (o.op != kBarrier && (s.send == 0 || s.recv == 0)) {
      if (gRank == 0) {
        std::fprintf(stderr, "ccl_bench: %s, %llu B: fewer than one float32 per rank; skipped\n",
                     kOpNames[o.op], static_cast<unsigned long long>(bytes));
      }
    } else {
      Slots sl;
      slotsInit(&sl, s, o.buffers > 0 ? o.buffers : slotCount(s));
      if (o.warmup > 0) runBatch(o.op, s, &sl, o.warmup);
      const int64_t iters = o.iters > 0 ? o.iters : calibrate(o.op, s, &sl);
      const double seconds = maxOverRanks(runBatch(o.op, s, &sl, iters) / double(iters));
      const char* check = "skip";
      if (o.check) {
        double wrong = static_cast<double>(checkOnce(o.op, s, &sl));
        ccl::allreduce(&wrong, &wrong, 1, ccl::datatype::float64, ccl::reduction::sum, *gComm)
            .wait();
        check = wrong > 0 ? "fail" : "ok";
        failed |= wrong > 0;
      }
      slotsFree(&sl);
      if (gRank == 0) {
        const double algbw = seconds > 0 ? static_cast<double>(s.bytes) / seconds / 1e9 : 0;
        std::fprintf(gCsv, "%s,%d,%llu,%lld,float32,%.3f,%.4f,%.4f,%s\n", kOpNames[o.op], gSize,
                    static_cast<unsigned long long>(s.bytes), static_cast<long long>(s.count),
                    seconds * 1e6, algbw, algbw * s.busFactor, check);
        std::fflush(gCsv);
      }
    }
    if (o.op == kBarrier) break;
    // The same sweep as meshcomm-bench: multiply (a size of 0 steps to 1)
    // until the next size would pass -e or overflow.
    const uint64_t next = bytes == 0 ? 1 : bytes * o.factor;
    if ((bytes != 0 && next / o.factor != bytes) || next <= bytes || next > o.maxBytes) break;
    bytes = next;
  }
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  const int csvFd = dup(STDOUT_FILENO);
  if (csvFd < 0 || (gCsv = fdopen(csvFd, "w")) == nullptr || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    std::perror("ccl_bench: cannot set up stdout");
    return 2;
  }
  ccl::init();
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &gRank);
  MPI_Comm_size(MPI_COMM_WORLD, &gSize);
  const Options o = parseOptions(argc, argv);

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

    if (gRank == 0) {
      std::fprintf(gCsv, "op,nranks,bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,check\n");
      std::fflush(gCsv);
    }
    failed = sweep(o);
    gComm.reset();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ccl_bench: rank %d: %s\n", gRank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
  }
  MPI_Finalize();
  return failed ? 1 : 0;
}

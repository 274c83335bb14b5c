// gloo_bench: one Gloo collective over a range of message sizes, measured
// the way meshcomm-bench measures meshcomm (see bench/peers/mpi_bench.c for
// the shared definitions of bytes, count, algbw, busbw, buffer rotation,
// warm-up, adaptive iterations and time), with the same CSV columns.
//
//   gloo_bench OP -n N [-b SIZE] [-e SIZE] [-f F] [--iters N] [--warmup N]
//                      [--buffers K] [--algorithm ring|hd] [--check]
//                      [--timeout-ms T] [--time-limit S]
//                      [--netns NS0,NS1,... --iface NAME]
//   OP: all_reduce, broadcast, all_gather, reduce_scatter, all_to_all, barrier
//
// The process forks N ranks. They meet through a gloo::rendezvous::FileStore
// in a fresh temporary directory and connect a full mesh with the TCP
// transport on 127.0.0.1. Rank 0 prints; the parent kills every rank (by
// pid) when one fails or the run outlasts --time-limit.
//
// Several hosts, emulated with network namespaces (bench/compare.sh
// --transport tcp): --netns names one namespace (`ip netns`) per rank, which
// the rank enters right after the fork, before it opens any socket; Gloo
// then binds the address of interface --iface in that namespace. The file
// store needs no network, so the ranks still meet through it.
//
// Which Gloo code runs (Gloo 0.5.0 as Debian packages it):
// - all_reduce --algorithm ring: gloo::allreduce() with
//   AllreduceOptions::RING, the per-call API torch.distributed uses.
// - all_reduce --algorithm hd: gloo::AllreduceHalvingDoubling<float>.
// - broadcast, all_gather, all_to_all, barrier: gloo::broadcast(),
//   gloo::allgather(), gloo::alltoall(), gloo::barrier() (per-call API).
// - reduce_scatter: gloo::ReduceScatterHalvingDoubling<float>, the only
//   reduce-scatter this Gloo has. It works in place: the input holds
//   block*n elements and the rank's reduced block ends up at its start, so a
//   buffer set is the input alone.
// The halving-doubling classes bind their buffers when they are built, so
// there is one instance per buffer set, built before timing. Instances are
// capped at kMaxBoundSets: below 16 KiB per set the rotation then covers
// less than 64 MiB (a note on stderr says so). They also own scratch
// memory, which the 256 MiB budget for buffer sets does not count.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "../../tools/bench/calibration.h"

namespace {

using Clock = std::chrono::steady_clock;
using meshcomm::bench::calibrateIterations;

enum class Op { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kAllToAll, kBarrier };

struct OpName {
  Op op;
  const char* name;
};
constexpr OpName kOps[] = {
    {Op::kAllReduce, "all_reduce"},         {Op::kBroadcast, "broadcast"},
    {Op::kAllGather, "all_gather"},         {Op::kReduceScatter, "reduce_scatter"},
    {Op::kAllToAll, "all_to_all"},          {Op::kBarrier, "barrier"},
};

constexpr size_t kWordBytes = sizeof(float);
constexpr size_t kSlotAlign = 64;
constexpr size_t kCoverBytes = size_t{64} << 20;
constexpr size_t kMaxTotalBytes = size_t{256} << 20;
constexpr size_t kMinSlots = 4;
constexpr size_t kMaxBoundSets = 4096;
constexpr double kTargetSeconds = 0.25;
constexpr int kExitUsage = 2;
constexpr int kExitRuntime = 3;

struct Options {
  Op op = Op::kAllReduce;
  const char* opName = nullptr;
  int nranks = 0;
  uint64_t minBytes = uint64_t{32} << 20, maxBytes = uint64_t{32} << 20, factor = 2;
  int64_t iters = 0, warmup = 5, buffers = 0;
  bool hd = false;  // --algorithm hd (all_reduce only)
  bool check = false;
  std::chrono::milliseconds timeout{60000};
  std::chrono::seconds timeLimit{900};
  std::vector<std::string> netns;  // per rank; empty: this namespace, loopback
  std::string iface;               // with netns: the interface Gloo binds
};

[[noreturn]] void usage(const std::string& what) {
  std::fprintf(stderr, "gloo_bench: %s\nTry 'gloo_bench --help'.\n", what.c_str());
  std::exit(kExitUsage);
}

bool parseSize(std::string_view text, uint64_t& out) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 18) return false;
  uint64_t v = std::stoull(std::string(text.substr(0, digits)));
  std::string_view suffix = text.substr(digits);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.remove_suffix(1);
  int shift = 0;
  if (suffix.size() > 1) return false;
  if (suffix.size() == 1) {
    switch (suffix[0]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: return false;
    }
  }
  if (v > ((uint64_t{64} << 30) >> shift)) return false;
  out = v << shift;
  return true;
}

int64_t parseCount(std::string_view text, int64_t lo, const char* what) {
  char* end = nullptr;
  std::string s(text);
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < lo) {
    usage(std::string(what) + " expects an integer >= " + std::to_string(lo) + ", got '" + s + "'");
  }
  return v;
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf(
          "usage: gloo_bench OP -n N [-b SIZE] [-e SIZE] [-f F] [--iters N] [--warmup N]\n"
          "                  [--buffers K] [--algorithm ring|hd] [--check]\n"
          "                  [--timeout-ms T] [--time-limit S]\n"
          "                  [--netns NS0,NS1,... --iface NAME]\n"
          "OP: all_reduce broadcast all_gather reduce_scatter all_to_all barrier\n"
          "--algorithm picks the all_reduce algorithm (default ring).\n"
          "Prints meshcomm-bench --csv columns; see the comment at the top of the source.\n");
      std::exit(0);
    }
    if (a == "--check") { o.check = true; continue; }
    if (a == "--csv") continue;  // CSV is the only output format
    if (a.empty() || a[0] != '-') {
      for (const auto& k : kOps) {
        if (a == k.name) o.op = k.op, o.opName = k.name;
      }
      if (o.opName == nullptr) usage("unknown operation '" + std::string(a) + "'");
      continue;
    }
    if (i + 1 >= argc) usage("option '" + std::string(a) + "' needs a value");
    std::string_view v = argv[++i];
    if (a == "-n" || a == "--nranks") {
      o.nranks = static_cast<int>(parseCount(v, 1, "-n"));
    } else if (a == "-b" || a == "--minbytes") {
      if (!parseSize(v, o.minBytes)) usage("-b expects a size like 8, 64K or 1M");
    } else if (a == "-e" || a == "--maxbytes") {
      if (!parseSize(v, o.maxBytes)) usage("-e expects a size like 8, 64K or 1M");
    } else if (a == "-f" || a == "--stepfactor") {
      o.factor = static_cast<uint64_t>(parseCount(v, 2, "-f"));
    } else if (a == "--iters") {
      o.iters = parseCount(v, 1, "--iters");
    } else if (a == "--warmup") {
      o.warmup = parseCount(v, 0, "--warmup");
    } else if (a == "--buffers") {
      o.buffers = parseCount(v, 1, "--buffers");
    } else if (a == "--algorithm") {
      if (v == "hd") o.hd = true;
      else if (v != "ring") usage("--algorithm expects ring or hd");
    } else if (a == "--timeout-ms") {
      o.timeout = std::chrono::milliseconds(parseCount(v, 1, "--timeout-ms"));
    } else if (a == "--time-limit") {
      o.timeLimit = std::chrono::seconds(parseCount(v, 1, "--time-limit"));
    } else if (a == "--netns") {
      o.netns.clear();
      for (size_t start = 0; start <= v.size();) {
        size_t comma = std::min(v.find(',', start), v.size());
        o.netns.emplace_back(v.substr(start, comma - start));
        if (o.netns.back().empty()) usage("--netns expects comma-separated namespace names");
        start = comma + 1;
      }
    } else if (a == "--iface") {
      o.iface = std::string(v);
    } else {
      usage("unknown option '" + std::string(a) + "'");
    }
  }
  if (o.opName == nullptr) usage("no operation given");
  if (o.nranks < 1) usage("-n N is required");
  if (o.minBytes > o.maxBytes) usage("-b is larger than -e");
  if (o.hd && o.op != Op::kAllReduce) usage("--algorithm applies to all_reduce only");
  if (!o.netns.empty() && static_cast<int>(o.netns.size()) != o.nranks) {
    usage("--netns names " + std::to_string(o.netns.size()) + " namespace(s) for " +
          std::to_string(o.nranks) + " ranks; give one per rank");
  }
  if (o.netns.empty() != o.iface.empty()) usage("--netns and --iface go together");
  return o;
}

// Element counts of one size (meshcomm-bench's shapeFor()).
struct Shape {
  int64_t send = 0, recv = 0;  // elements of this rank's input and output
  int64_t count = 0;           // the "count" column
  uint64_t bytes = 0;          // the "bytes" column, also what algbw counts
  double busFactor = 0;
  bool inPlace = false;        // the input buffer is also the output
};

Shape shapeFor(Op op, uint64_t bytes, int n) {
  const auto count = static_cast<int64_t>(bytes / kWordBytes);
  const int64_t block = count / n;
  const double share = static_cast<double>(n - 1) / n;
  Shape s;
  switch (op) {
    case Op::kAllReduce:
    case Op::kBroadcast:
      s.send = s.recv = s.count = count;
      s.busFactor = op == Op::kAllReduce ? 2.0 * share : 1.0;
      s.inPlace = true;
      break;
    case Op::kAllGather: s.send = block, s.recv = block * n; break;
    case Op::kReduceScatter:
      s.send = block * n, s.recv = block;
      s.inPlace = true;  // Gloo's halving-doubling reduce-scatter, see the top
      break;
    case Op::kAllToAll: s.send = s.recv = block * n; break;
    case Op::kBarrier: return s;
  }
  if (op != Op::kAllReduce && op != Op::kBroadcast) {
    s.count = block;
    s.busFactor = share;
  }
  s.bytes = static_cast<uint64_t>(std::max(s.send, s.recv)) * kWordBytes;
  return s;
}

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

// meshcomm-bench's defaultSlotCount(), applied to this library's buffers.
size_t slotCount(const Shape& s) {
  size_t slotBytes = roundUp(static_cast<size_t>(s.send) * kWordBytes, kSlotAlign);
  if (!s.inPlace) slotBytes += roundUp(static_cast<size_t>(s.recv) * kWordBytes, kSlotAlign);
  if (slotBytes == 0) return 1;
  size_t slots = std::max((kCoverBytes + slotBytes - 1) / slotBytes, kMinSlots);
  return std::min(slots, std::max<size_t>(1, kMaxTotalBytes / slotBytes));
}

// Exact in float32 and distinct per rank (see mpi_bench.c).
float valueOf(int rank, int64_t index) {
  return static_cast<float>((rank + 1) * 1000 + static_cast<int>(index % 997));
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Memory = std::unique_ptr<float, FreeDeleter>;

Memory allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = std::aligned_alloc(4096, roundUp(bytes, 4096));
  if (p == nullptr) throw std::bad_alloc();
  return Memory(static_cast<float*>(p));
}

// One rank: its Gloo context and the operations it times.
class Rank {
 public:
  Rank(const Options& o, int rank, const std::string& storeDir) : o_(o), rank_(rank) {
    gloo::transport::tcp::attr attr;
    if (o.iface.empty()) {
      attr.hostname = "127.0.0.1";  // loopback only
    } else {
      attr.iface = o.iface;
    }
    attr.ai_family = AF_INET;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(storeDir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, o.nranks);
    ctx->setTimeout(o.timeout);
    ctx->connectFullMesh(store, device);
    ctx_ = ctx;
  }

  int run() {
    if (rank_ == 0) {
      std::printf("op,nranks,bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,check\n");
      std::fflush(stdout);
    }
    bool failed = false;
    uint64_t bytes = o_.op == Op::kBarrier ? 0 : o_.minBytes;
    for (;;) {
      failed |= runSize(bytes);
      if (o_.op == Op::kBarrier) break;
      // meshcomm-bench's sweep: multiply (0 steps to 1) until past -e.
      uint64_t next = bytes == 0 ? 1 : bytes * o_.factor;
      if ((bytes != 0 && next / o_.factor != bytes) || next <= bytes || next > o_.maxBytes) break;
      bytes = next;
    }
    barrier();  // nobody closes its connections while a peer still needs them
    return failed ? 1 : 0;
  }

 private:
  bool bound() const { return (o_.op == Op::kAllReduce && o_.hd) || o_.op == Op::kReduceScatter; }

  // Returns true when --check found wrong elements.
  bool runSize(uint64_t bytes) {
    shape_ = shapeFor(o_.op, bytes, o_.nranks);
    if (o_.op != Op::kBarrier && (shape_.send == 0 || shape_.recv == 0)) {
      if (rank_ == 0) {
        std::fprintf(stderr, "gloo_bench: %s, %" PRIu64 " B: fewer than one float32 per rank; skipped\n",
                     o_.opName, bytes);
      }
      return false;
    }
    size_t slots = o_.buffers > 0 ? static_cast<size_t>(o_.buffers) : slotCount(shape_);
    if (bound() && slots > kMaxBoundSets) {
      if (rank_ == 0) {
        std::fprintf(stderr,
                     "gloo_bench: %s, %" PRIu64 " B: %zu buffer sets capped at %zu (one algorithm "
                     "instance each)\n",
                     o_.opName, bytes, slots, kMaxBoundSets);
      }
      slots = kMaxBoundSets;
    }
    allocateSlots(slots);
    if (o_.warmup > 0) runBatch(o_.warmup);
    int64_t iters = o_.iters > 0 ? o_.iters : calibrate();
    double seconds = maxOverRanks(runBatch(iters) / static_cast<double>(iters));
    const char* check = "skip";
    bool failed = false;
    if (o_.check) {
      double wrong = sumOverRanks(static_cast<double>(checkOnce()));
      failed = wrong > 0;
      check = failed ? "fail" : "ok";
    }
    releaseSlots();
    if (rank_ == 0) {
      double algbw = seconds > 0 ? static_cast<double>(shape_.bytes) / seconds / 1e9 : 0;
      std::printf("%s,%d,%" PRIu64 ",%" PRId64 ",float32,%.3f,%.4f,%.4f,%s\n", o_.opName,
                  o_.nranks, shape_.bytes, shape_.count, seconds * 1e6, algbw,
                  algbw * shape_.busFactor, check);
      std::fflush(stdout);
    }
    return failed;
  }

  float* input(size_t k) const { return in_.get() + inStride_ * k; }
  float* output(size_t k) const { return shape_.inPlace ? input(k) : out_.get() + outStride_ * k; }

  void allocateSlots(size_t slots) {
    slots_ = slots;
    next_ = 0;
    inStride_ = roundUp(shape_.send * kWordBytes, kSlotAlign) / kWordBytes;
    outStride_ = shape_.inPlace ? 0 : roundUp(shape_.recv * kWordBytes, kSlotAlign) / kWordBytes;
    in_ = allocate(inStride_ * kWordBytes * slots);
    out_ = allocate(outStride_ * kWordBytes * slots);
    // Same data in every input, zeroed outputs: every page is faulted in
    // before anything is timed.
    for (size_t k = 0; k < slots && shape_.send > 0; ++k) fill(input(k));
    if (out_) std::memset(out_.get(), 0, outStride_ * kWordBytes * slots);

    const int count = static_cast<int>(shape_.send);
    for (size_t k = 0; k < slots && bound(); ++k) {
      if (o_.op == Op::kAllReduce) {
        hd_.push_back(std::make_unique<gloo::AllreduceHalvingDoubling<float>>(
            ctx_, std::vector<float*>{input(k)}, count));
      } else {
        std::vector<int> recvElems(o_.nranks, static_cast<int>(shape_.recv));
        hd_.push_back(std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
            ctx_, std::vector<float*>{input(k)}, count, recvElems));
      }
    }
    // The instances register their buffers with the peers while they are
    // built; nobody starts before everyone has.
    barrier();
  }

  void releaseSlots() {
    barrier();  // no peer may still be sending into an instance's buffers
    hd_.clear();
    in_.reset();
    out_.reset();
  }

  void fill(float* p) const {
    for (int64_t i = 0; i < shape_.send; ++i) p[i] = valueOf(rank_, i);
  }

  // One operation on buffer set k.
  void issue(size_t k) {
    if (bound()) {
      hd_[k]->run();
      return;
    }
    const uint32_t tag = tag_++;
    float* in = input(k);
    float* out = output(k);
    switch (o_.op) {
      case Op::kAllReduce: {
        gloo::AllreduceOptions opts(ctx_);
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        opts.setOutput(out, static_cast<size_t>(shape_.recv));
        opts.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        opts.setTag(tag);
        gloo::allreduce(opts);
        break;
      }
      case Op::kBroadcast: {
        gloo::BroadcastOptions opts(ctx_);
        opts.setOutput(out, static_cast<size_t>(shape_.recv));  // the root sends from it
        opts.setRoot(0);
        opts.setTag(tag);
        gloo::broadcast(opts);
        break;
      }
      case Op::kAllGather: {
        gloo::AllgatherOptions opts(ctx_);
        opts.setInput(in, static_cast<size_t>(shape_.send));
        opts.setOutput(out, static_cast<size_t>(shape_.recv));
        opts.setTag(tag);
        gloo::allgather(opts);
        break;
      }
      case Op::kAllToAll: {
        gloo::AlltoallOptions opts(ctx_);
        opts.setInput(in, static_cast<size_t>(shape_.send));
        opts.setOutput(out, static_cast<size_t>(shape_.recv));
        opts.setTag(tag);
        gloo::alltoall(opts);
        break;
      }
      case Op::kBarrier: barrier(tag); break;
      case Op::kReduceScatter: break;  // bound(): handled above
    }
  }

  // Seconds this rank spent on `iters` operations started together.
  double runBatch(int64_t iters) {
    barrier();
    auto start = Clock::now();
    for (int64_t i = 0; i < iters; ++i) {
      issue(next_);
      next_ = (next_ + 1) % slots_;
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  // meshcomm-bench's rule (tools/bench/calibration.h).
  int64_t calibrate() {
    return calibrateIterations([this](int64_t batch) { return maxOverRanks(runBatch(batch)); },
                               kTargetSeconds);
  }


  // One operation on set 0 with known inputs; this rank's wrong elements.
  int64_t checkOnce() {
    const int n = o_.nranks;
    float* in = input(0);
    float* out = output(0);
    if (o_.op == Op::kBroadcast && rank_ != 0) {
      std::fill(in, in + shape_.send, -1.0f);
    } else {
      fill(in);
    }
    if (!shape_.inPlace) std::fill(out, out + shape_.recv, -1.0f);
    barrier();
    issue(0);

    const int64_t block = shape_.count;
    auto reduced = [n](int64_t index) {
      double want = 0;
      for (int r = 0; r < n; ++r) want += valueOf(r, index);
      return static_cast<float>(want);
    };
    int64_t wrong = 0;
    for (int64_t i = 0; i < shape_.recv; ++i) {
      float want = 0;
      switch (o_.op) {
        case Op::kAllReduce: want = reduced(i); break;
        case Op::kBroadcast: want = valueOf(0, i); break;
        case Op::kAllGather: want = valueOf(static_cast<int>(i / block), i % block); break;
        case Op::kReduceScatter: want = reduced(rank_ * block + i); break;
        case Op::kAllToAll:
          want = valueOf(static_cast<int>(i / block), rank_ * block + i % block);
          break;
        case Op::kBarrier: break;
      }
      wrong += out[i] != want;
    }
    return wrong;
  }

  void barrier(uint32_t tag = 0xffffff00u) {
    gloo::BarrierOptions opts(ctx_);
    opts.setTag(tag);
    gloo::barrier(opts);
  }

  double reduceDouble(double v, void (*fn)(void*, const void*, const void*, size_t)) {
    gloo::AllreduceOptions opts(ctx_);
    opts.setOutput(&v, 1);
    opts.setReduceFunction(fn);
    opts.setTag(0xffffff01u);
    gloo::allreduce(opts);
    return v;
  }
  double maxOverRanks(double v) {
    return reduceDouble(v, static_cast<void (*)(void*, const void*, const void*, size_t)>(
                               &gloo::max<double>));
  }
  double sumOverRanks(double v) {
    return reduceDouble(v, static_cast<void (*)(void*, const void*, const void*, size_t)>(
                               &gloo::sum<double>));
  }

  const Options& o_;
  const int rank_;
  std::shared_ptr<gloo::Context> ctx_;
  Shape shape_;
  size_t slots_ = 1, next_ = 0;
  size_t inStride_ = 0, outStride_ = 0;  // in floats
  Memory in_, out_;
  std::vector<std::unique_ptr<gloo::Algorithm>> hd_;
  // Tags of the timed per-call operations; the bookkeeping operations use
  // tags far above them, so the two never meet within a run.
  uint32_t tag_ = 0;
};

void killAll(const std::vector<pid_t>& pids, std::vector<bool>& reaped) {
  for (size_t i = 0; i < pids.size(); ++i) {
    if (!reaped[i]) ::kill(pids[i], SIGKILL);
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (!reaped[i]) ::waitpid(pids[i], nullptr, 0), reaped[i] = true;
  }
}

volatile sig_atomic_t gStop = 0;
void onStop(int) { gStop = 1; }

// Waits for every rank; the first failure, a signal or the time limit kills
// the rest. Returns the exit code of the run.
int supervise(const Options& o, const std::vector<pid_t>& pids) {
  struct sigaction sa {};
  sa.sa_handler = onStop;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  const auto deadline = Clock::now() + o.timeLimit;
  std::vector<bool> reaped(pids.size(), false);
  size_t alive = pids.size();
  int result = 0;
  while (alive > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      int status = 0;
      if (reaped[r] || ::waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      reaped[r] = true;
      --alive;
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitRuntime;
      if (code == 1) {
        result = std::max(result, 1);  // a --check failed; the others go on
      } else if (code != 0) {
        std::fprintf(stderr, "gloo_bench: rank %zu failed (%s %d); stopping the others\n", r,
                     WIFEXITED(status) ? "exit" : "signal",
                     WIFEXITED(status) ? code : WTERMSIG(status));
        killAll(pids, reaped);
        return kExitRuntime;
      }
    }
    if (alive == 0) break;
    if (gStop || Clock::now() >= deadline) {
      std::fprintf(stderr, "gloo_bench: %s; killing %zu rank(s)\n",
                   gStop ? "interrupted" : "--time-limit exceeded", alive);
      killAll(pids, reaped);
      return kExitRuntime;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return result;
}

// Moves the calling process into network namespace `name` (made by `ip
// netns add`, so it has a handle in /var/run/netns).
void enterNetns(const std::string& name) {
  const std::string path = "/var/run/netns/" + name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    throw std::runtime_error("cannot enter network namespace " + path + ": " +
                             std::strerror(errno) + " (needs root and `ip netns add " + name +
                             "`)");
  }
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parseOptions(argc, argv);
  char dirTemplate[] = "/tmp/gloo_bench.XXXXXX";
  if (::mkdtemp(dirTemplate) == nullptr) {
    std::perror("gloo_bench: mkdtemp");
    return kExitRuntime;
  }
  const std::string storeDir = dirTemplate;

  const pid_t parent = ::getpid();
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < o.nranks; ++rank) {
    pid_t pid = ::fork();
    if (pid == 0) {
      // A rank never outlives the parent that supervises it.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) _exit(kExitRuntime);
      int rc = kExitRuntime;
      try {
        if (!o.netns.empty()) enterNetns(o.netns[static_cast<size_t>(rank)]);
        Rank r(o, rank, storeDir);
        rc = r.run();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gloo_bench: rank %d: %s\n", rank, e.what());
      }
      std::fflush(nullptr);
      _exit(rc);  // skip destructors of state shared with the parent
    }
    if (pid < 0) {
      std::perror("gloo_bench: fork");
      std::vector<bool> reaped(pids.size(), false);
      killAll(pids, reaped);
      return kExitRuntime;
    }
    pids.push_back(pid);
  }
  int rc = supervise(o, pids);
  std::error_code ignored;
  std::filesystem::remove_all(storeDir, ignored);
  return rc;
}

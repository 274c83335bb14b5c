// gloo_bench: one Gloo collective over a range of message sizes, measured
// the way meshcomm-bench measures meshcomm, by the code the peer benchmarks
// share (peer_bench.h; bench/peers/mpi_bench.c describes the definitions of
// bytes, count, algbw, busbw, buffer rotation, warm-up, adaptive iterations
// and time), with the same CSV columns.
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
// pid) when one fails or the run outlasts --time-limit, as meshcomm-bench's
// does (tools/bench/forked_job.h).
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
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
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

#include "../../tools/bench/forked_job.h"
#include "peer_bench.h"

namespace {

using meshcomm::bench::forkRanks;
using meshcomm::bench::kExitRuntime;
using meshcomm::bench::kExitUsage;
using meshcomm::bench::superviseRanks;

constexpr int64_t kMaxBoundSets = 4096;

struct Options {
  SweepOptions sweep{};
  int nranks = 0;
  bool hd = false;  // --algorithm hd (all_reduce only)
  std::chrono::milliseconds timeout{60000};
  std::chrono::seconds timeLimit{900};
  std::vector<std::string> netns;  // per rank; empty: this namespace, loopback
  std::string iface;               // with netns: the interface Gloo binds
};

[[noreturn]] void usage(const std::string& what) {
  std::fprintf(stderr, "gloo_bench: %s\nTry 'gloo_bench --help'.\n", what.c_str());
  std::exit(kExitUsage);
}

// The options only gloo_bench has (an ExtraOption).
int takeOption(void* ctx, const char* name, const char* value, char* why, size_t whySize) {
  Options& o = *static_cast<Options*>(ctx);
  const std::string_view a = name, v = value;
  int64_t n = 0;
  if (a == "-n" || a == "--nranks") {
    if (!parseCount(value, 1, "-n", &n, why, whySize)) return -1;
    o.nranks = static_cast<int>(n);
  } else if (a == "--algorithm") {
    if (v != "ring" && v != "hd") {
      std::snprintf(why, whySize, "--algorithm expects ring or hd");
      return -1;
    }
    o.hd = v == "hd";
  } else if (a == "--timeout-ms") {
    if (!parseCount(value, 1, "--timeout-ms", &n, why, whySize)) return -1;
    o.timeout = std::chrono::milliseconds(n);
  } else if (a == "--time-limit") {
    if (!parseCount(value, 1, "--time-limit", &n, why, whySize)) return -1;
    o.timeLimit = std::chrono::seconds(n);
  } else if (a == "--netns") {
    o.netns.clear();
    for (size_t start = 0; start <= v.size();) {
      size_t comma = std::min(v.find(',', start), v.size());
      o.netns.emplace_back(v.substr(start, comma - start));
      if (o.netns.back().empty()) {
        std::snprintf(why, whySize, "--netns expects comma-separated namespace names");
        return -1;
      }
      start = comma + 1;
    }
  } else if (a == "--iface") {
    o.iface = value;
  } else {
    return 0;
  }
  return 1;
}

Options parseOptions(int argc, char** argv) {
  Options o;
  char why[200];
  switch (parseSweepOptions(argc, argv, &o.sweep, takeOption, &o, why, sizeof why)) {
    case kParsedHelp:
      std::printf(
          "usage: gloo_bench OP -n N [-b SIZE] [-e SIZE] [-f F] [--iters N] [--warmup N]\n"
          "                  [--buffers K] [--algorithm ring|hd] [--check]\n"
          "                  [--timeout-ms T] [--time-limit S]\n"
          "                  [--netns NS0,NS1,... --iface NAME]\n"
          "OP: all_reduce broadcast all_gather reduce_scatter all_to_all barrier\n"
          "--algorithm picks the all_reduce algorithm (default ring).\n"
          "Prints meshcomm-bench --csv columns; see the comment at the top of the source.\n");
      std::exit(0);
    case kParsedError:
      usage(why);
  }
  if (o.nranks < 1) usage("-n N is required");
  if (o.hd && o.sweep.op != kAllReduce) usage("--algorithm applies to all_reduce only");
  if (!o.netns.empty() && static_cast<int>(o.netns.size()) != o.nranks) {
    usage("--netns names " + std::to_string(o.netns.size()) + " namespace(s) for " +
          std::to_string(o.nranks) + " ranks; give one per rank");
  }
  if (o.netns.empty() != o.iface.empty()) usage("--netns and --iface go together");
  return o;
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
    PeerLibrary lib{};
    lib.ctx = this;
    lib.rank = rank_;
    lib.nranks = o_.nranks;
    lib.barrier = [](void* self) { of(self).barrier(); };
    lib.issue = [](void* self, int op, const Shape* s, const Slots* sl, int64_t slot) {
      of(self).issue(op, *s, *sl, slot);
    };
    lib.maxOverRanks = [](void* self, double v) {
      return of(self).reduceDouble(v, &gloo::max<double>);
    };
    lib.sumOverRanks = [](void* self, double v) {
      return of(self).reduceDouble(v, &gloo::sum<double>);
    };
    lib.fail = [](void*, const char* why) { throw std::runtime_error(why); };
    lib.limitSlots = [](void* self, int op, int64_t slots, uint64_t bytes) {
      return of(self).limitSlots(op, slots, bytes);
    };
    lib.bind = [](void* self, int op, const Shape* s, const Slots* sl) {
      of(self).bind(op, *s, *sl);
    };
    lib.unbind = [](void* self) { of(self).unbind(); };
    lib.reduceScatterInPlace = 1;  // Gloo's halving-doubling reduce-scatter, see the top
    const bool failed = runSweep("gloo_bench", &o_.sweep, &lib, stdout);
    barrier();  // nobody closes its connections while a peer still needs them
    return failed ? 1 : 0;
  }

 private:
  using ReduceFunction = void (*)(void*, const void*, const void*, size_t);

  static Rank& of(void* self) { return *static_cast<Rank*>(self); }

  bool bound(int op) const { return (op == kAllReduce && o_.hd) || op == kReduceScatter; }

  int64_t limitSlots(int op, int64_t slots, uint64_t bytes) const {
    if (!bound(op) || slots <= kMaxBoundSets) return slots;
    if (rank_ == 0) {
      std::fprintf(stderr,
                   "gloo_bench: %s, %" PRIu64 " B: %" PRId64 " buffer sets capped at %" PRId64
                   " (one algorithm instance each)\n",
                   kOpNames[op], bytes, slots, kMaxBoundSets);
    }
    return kMaxBoundSets;
  }

  // One algorithm instance per buffer set for the bound algorithms.
  void bind(int op, const Shape& s, const Slots& sl) {
    const int count = static_cast<int>(s.send);
    for (int64_t k = 0; k < sl.slots && bound(op); ++k) {
      if (op == kAllReduce) {
        hd_.push_back(std::make_unique<gloo::AllreduceHalvingDoubling<float>>(
            ctx_, std::vector<float*>{slotIn(&sl, k)}, count));
      } else {
        std::vector<int> recvElems(o_.nranks, static_cast<int>(s.recv));
        hd_.push_back(std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
            ctx_, std::vector<float*>{slotIn(&sl, k)}, count, recvElems));
      }
    }
    // The instances register their buffers with the peers while they are
    // built; nobody starts before everyone has.
    barrier();
  }

  void unbind() {
    barrier();  // no peer may still be sending into an instance's buffers
    hd_.clear();
  }

  // One operation on buffer set `slot`.
  void issue(int op, const Shape& s, const Slots& sl, int64_t slot) {
    if (bound(op)) {
      hd_[static_cast<size_t>(slot)]->run();
      return;
    }
    const uint32_t tag = tag_++;
    float* in = slotIn(&sl, slot);
    float* out = slotOut(&sl, slot);
    switch (op) {
      case kAllReduce: {
        gloo::AllreduceOptions opts(ctx_);
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        opts.setOutput(out, static_cast<size_t>(s.recv));
        opts.setReduceFunction(static_cast<ReduceFunction>(&gloo::sum<float>));
        opts.setTag(tag);
        gloo::allreduce(opts);
        break;
      }
      case kBroadcast: {
        gloo::BroadcastOptions opts(ctx_);
        opts.setOutput(out, static_cast<size_t>(s.recv));  // the root sends from it
        opts.setRoot(0);
        opts.setTag(tag);
        gloo::broadcast(opts);
        break;
      }
      case kAllGather: exchange<gloo::AllgatherOptions>(&gloo::allgather, s, in, out, tag); break;
      case kAllToAll: exchange<gloo::AlltoallOptions>(&gloo::alltoall, s, in, out, tag); break;
      case kBarrier: barrier(tag); break;
      default: break;  // reduce_scatter is bound(): handled above
    }
  }

  // all_gather and all_to_all, whose options are alike.
  template <class GlooOptions>
  void exchange(void (*call)(GlooOptions&), const Shape& s, float* in, float* out, uint32_t tag) {
    GlooOptions opts(ctx_);
    opts.setInput(in, static_cast<size_t>(s.send));
    opts.setOutput(out, static_cast<size_t>(s.recv));
    opts.setTag(tag);
    call(opts);
  }

  void barrier(uint32_t tag = 0xffffff00u) {
    gloo::BarrierOptions opts(ctx_);
    opts.setTag(tag);
    gloo::barrier(opts);
  }

  double reduceDouble(double v, ReduceFunction fn) {
    gloo::AllreduceOptions opts(ctx_);
    opts.setOutput(&v, 1);
    opts.setReduceFunction(fn);
    opts.setTag(0xffffff01u);
    gloo::allreduce(opts);
    return v;
  }

  const Options& o_;
  const int rank_;
  std::shared_ptr<gloo::Context> ctx_;
  std::vector<std::unique_ptr<gloo::Algorithm>> hd_;
  // Tags of the timed per-call operations; the bookkeeping operations use
  // tags far above them, so the two never meet within a run.
  uint32_t tag_ = 0;
};

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
  const auto pids = forkRanks("gloo_bench", o.nranks, [&](int rank) {
    if (!o.netns.empty()) enterNetns(o.netns[static_cast<size_t>(rank)]);
    Rank r(o, rank, storeDir);
    return r.run();
  });
  const int rc = pids ? superviseRanks("gloo_bench", *pids, o.timeLimit) : kExitRuntime;
  std::error_code ignored;
  std::filesystem::remove_all(storeDir, ignored);
  return rc;
}

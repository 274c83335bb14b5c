#include "runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <type_traits>

#include "calibration.h"

namespace meshcomm::bench {
namespace {

using Clock = std::chrono::steady_clock;

// `op` of one value over every rank.
template <class T>
T overRanks(ProcessGroup& group, T value, ReduceOp op) {
  static_assert(std::is_same_v<T, double> || std::is_same_v<T, int64_t>);
  TensorRef t{&value, 1, std::is_same_v<T, double> ? DType::kFloat64 : DType::kInt64};
  OpOptions o;
  o.op = op;
  o.blocking = true;
  group.allReduce(t, o)->wait();
  return value;
}

void barrier(ProcessGroup& group) {
  OpOptions o;
  o.blocking = true;
  group.barrier(o)->wait();
}

// Runs batches of one collective over rotating slots.
class Loop {
 public:
  Loop(const Options& options, ProcessGroup& group, const Slots& slots)
      : options_(options), group_(group), slots_(slots) {
    op_.op = options.op;
    op_.root = options.root;
    op_.timeout = options.timeout;
    op_.blocking = options.mode == WaitMode::kBlocking;
  }

  // Seconds this rank spent on `iters` operations that all ranks start
  // together (after a barrier).
  double run(int64_t iters) {
    barrier(group_);
    auto start = Clock::now();
    if (options_.mode == WaitMode::kAsync) {
      std::deque<WorkPtr> inFlight;
      for (int64_t i = 0; i < iters; ++i) {
        inFlight.push_back(issueNext());
        if (static_cast<int64_t>(inFlight.size()) >= options_.window) {
          inFlight.front()->wait();
          inFlight.pop_front();
        }
      }
      for (auto& w : inFlight) w->wait();
    } else {
      for (int64_t i = 0; i < iters; ++i) issueNext()->wait();
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  const OpOptions& opOptions() const { return op_; }

 private:
  WorkPtr issueNext() {
    WorkPtr w = issue(*options_.collective, group_, slots_, next_, op_);
    next_ = (next_ + 1) % slots_.count();
    return w;
  }

  const Options& options_;
  ProcessGroup& group_;
  const Slots& slots_;
  OpOptions op_;
  int next_ = 0;
};

// Iterations that make the timed phase last about `target` seconds
// (calibration.h).
int64_t calibrate(Loop& loop, ProcessGroup& group, double target) {
  struct Batches {
    Loop& loop;
    ProcessGroup& group;
  } batches{loop, group};
  auto slowest = [](void* ctx, int64_t batch) {
    auto& b = *static_cast<Batches*>(ctx);
    return overRanks(b.group, b.loop.run(batch), ReduceOp::kMax);
  };
  return calibrateIterations(slowest, &batches, target);
}

}  // namespace

std::vector<uint64_t> sweepSizes(const Options& o) {
  // An operation that moves no data has one size.
  if (operationInfo(o.collective->operation).layout == Layout::kNone) return {0};
  std::vector<uint64_t> sizes;
  uint64_t s = o.minBytes;
  while (s <= o.maxBytes) {
    sizes.push_back(s);
    uint64_t next;
    if (o.stepBytes > 0) {
      next = s + o.stepBytes;
    } else {
      next = s == 0 ? 1 : s * o.stepFactor;
      if (s != 0 && next / o.stepFactor != s) break;  // overflow
    }
    if (next <= s) break;
    s = next;
  }
  return sizes;
}

int runSweep(const Options& options, ProcessGroup& group, Reporter* reporter) {
  const CollectiveInfo& info = *options.collective;
  const int rank = group.rank();
  const int nranks = group.size();
  const ValueClass cls = valueClassFor(info.reduces(), options.op);
  bool anyFailed = false;

  for (uint64_t bytes : sweepSizes(options)) {
    Shape shape = shapeFor(info, bytes, options.dtype, nranks, rank, options.root);
    int slotCount = options.buffers > 0 ? static_cast<int>(options.buffers)
                                        : defaultSlotCount(shape, options.dtype, info.inPlace);
    Slots slots(shape, options.dtype, info.inPlace, slotCount);
    slots.fillAll(cls, rank);
    Loop loop(options, group, slots);

    if (options.warmup > 0) loop.run(options.warmup);
    int64_t iters = options.iters > 0 ? options.iters : calibrate(loop, group, options.targetSeconds);
    double mean = loop.run(iters) / static_cast<double>(iters);
    double seconds = overRanks(group, mean, ReduceOp::kMax);

    Row row;
    row.bytes = shape.printedBytes;
    row.count = shape.paramCount;
    row.iters = iters;
    row.timeUs = seconds * 1e6;
    row.algbwGBps = seconds > 0 ? shape.algBytes / seconds / 1e9 : 0;
    row.busbwGBps = row.algbwGBps * shape.busFactor;

    if (options.check) {
      prepareCheck(info, slots, cls, rank, options.root);
      OpOptions once = loop.opOptions();
      once.blocking = true;
      issue(info, group, slots, 0, once)->wait();
      CheckResult mine = verify(info, slots, cls, options.op, rank, nranks, options.root);
      if (mine.wrong > 0) {
        std::fprintf(stderr, "meshcomm-bench: rank %d: %s, %llu bytes: %lld wrong elements, first %s\n",
                     rank, info.name, static_cast<unsigned long long>(bytes),
                     static_cast<long long>(mine.wrong), mine.firstError.c_str());
      }
      row.wrong = overRanks(group, mine.wrong, ReduceOp::kSum);
      row.check = row.wrong > 0 ? CheckState::kFailed : CheckState::kOk;
      anyFailed |= row.wrong > 0;
    }
    if (reporter) reporter->row(row);
  }
  return anyFailed ? kExitCheckFailed : kExitOk;
}

}  // namespace meshcomm::bench

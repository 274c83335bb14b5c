// A small distributed job: every rank holds a shard of a data set, and the
// ranks agree on its global mean, variance and extremes with collectives,
// then check the answer against what rank 0 computes from the whole set.
//
// Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT (meshrun, torchrun, or scripts/demo.sh).
#include <meshcomm/error.h>
#include <meshcomm/process_group.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

using namespace meshcomm;

namespace {

// The whole data set, generated identically on every rank.
std::vector<double> dataset(size_t n) {
  std::mt19937_64 gen(42);
  std::normal_distribution<double> dist(3.0, 2.0);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

}  // namespace

int main() {
  try {
    InitOptions init;
    init.initMethod = "env://";
    auto world = World::init(init);
    auto group = world->worldGroup();
    const int rank = world->rank();
    const int size = world->size();
    OpOptions sync;
    sync.blocking = true;

    const size_t total = 1'000'003;
    std::vector<double> all = dataset(total);
    size_t begin = total * static_cast<size_t>(rank) / static_cast<size_t>(size);
    size_t end = total * static_cast<size_t>(rank + 1) / static_cast<size_t>(size);
    std::vector<double> shard(all.begin() + static_cast<ptrdiff_t>(begin),
                              all.begin() + static_cast<ptrdiff_t>(end));

    // Sum, sum of squares and count in one all_reduce.
    double stats[3] = {0, 0, static_cast<double>(shard.size())};
    for (double x : shard) {
      stats[0] += x;
      stats[1] += x * x;
    }
    group->allReduce(TensorRef{stats, 3, DType::kFloat64}, sync);
    double lo = *std::min_element(shard.begin(), shard.end());
    double hi = *std::max_element(shard.begin(), shard.end());
    OpOptions minOp = sync;
    minOp.op = ReduceOp::kMin;
    OpOptions maxOp = sync;
    maxOp.op = ReduceOp::kMax;
    group->allReduce(TensorRef{&lo, 1, DType::kFloat64}, minOp);
    group->allReduce(TensorRef{&hi, 1, DType::kFloat64}, maxOp);
    // Everyone learns every shard's size, as rank 0 would need for a report.
    int64_t mine = static_cast<int64_t>(shard.size());
    std::vector<int64_t> sizes(static_cast<size_t>(size));
    group->allGatherIntoTensor(TensorRef{sizes.data(), size, DType::kInt64},
                         TensorRef{&mine, 1, DType::kInt64}, sync);

    double mean = stats[0] / stats[2];
    double variance = stats[1] / stats[2] - mean * mean;
    std::printf("[rank %d/%d] shard of %zu values; global mean %.6f variance %.6f min %.4f max %.4f\n",
                rank, size, shard.size(), mean, variance, lo, hi);

    int ok = 1;
    if (rank == 0) {
      double s = 0, s2 = 0;
      for (double x : all) {
        s += x;
        s2 += x * x;
      }
      double m = s / static_cast<double>(total);
      double var = s2 / static_cast<double>(total) - m * m;
      int64_t counted = 0;
      for (int64_t c : sizes) counted += c;
      ok = std::fabs(m - mean) < 1e-9 && std::fabs(var - variance) < 1e-9 &&
           counted == static_cast<int64_t>(total) &&
           lo == *std::min_element(all.begin(), all.end()) &&
           hi == *std::max_element(all.begin(), all.end());
      std::printf("[rank 0] single-process check: mean %.6f variance %.6f -> %s\n", m, var,
                  ok ? "match" : "MISMATCH");
    }
    // Everyone exits with rank 0's verdict.
    group->broadcast(TensorRef{&ok, 1, DType::kInt32}, sync);
    group->barrier(sync);
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "average_demo: %s\n", e.what());
    return 1;
  }
}

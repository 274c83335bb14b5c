// Ranks that pass different values for an argument that must agree (a
// root, a reduction op, split sizes) to a rooted or split-size collective:
// every rank fails with Mismatch within a second, the message names the
// argument, two of the values and the ranks that passed them, no output
// buffer is written, and the group stays usable (the next correct call
// succeeds). One job per transport, size and message size runs every case
// in turn, so each case also proves the one before left the group intact.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "collective_harness.h"
#include "transport_cases.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

// One rank's buffers for a case: what it sends and where output lands.
struct Buffers {
  std::vector<int32_t> input;
  std::vector<int32_t> output;
  std::vector<std::vector<int32_t>> list;  // gather's / scatter's per-rank tensors
};

constexpr int32_t kUntouched = 0x5a5a5a5a;
// Elements that make a block larger than any that travels with its
// agreement record (collectives/agreement.h, kEagerBlockBytes).
constexpr int64_t kLargeBlockExtra = 16 * 1024;
int32_t own(int rank) { return 1000 + rank; }
constexpr int kOdd = 1;  // the rank that disagrees where only one does

struct AgreementCase {
  const char* name;
  // Fills `b` and issues the call; `n` elements per rank's share.
  std::function<WorkPtr(ProcessGroup&, int64_t n, Buffers& b)> call;
  // Substrings every rank's message must hold, given the group size.
  std::function<std::vector<std::string>(int p)> says;
};

TensorRef ref(std::vector<int32_t>& v) { return TensorRef{v.data(), static_cast<int64_t>(v.size()), DType::kInt32}; }

// The roots of a rooted call: every rank names itself; or every rank names
// rank 0 but the odd one, which names the last.
OpOptions ownRoot(const ProcessGroup& pg) {
  OpOptions o;
  o.root = pg.rank();
  return o;
}
OpOptions oddRoot(const ProcessGroup& pg) {
  OpOptions o;
  o.root = pg.rank() == kOdd ? pg.size() - 1 : 0;
  return o;
}

// n elements for each rank, but the odd rank counts one more for rank 0.
std::vector<int64_t> oddSplits(const ProcessGroup& pg, int64_t n) {
  std::vector<int64_t> splits(static_cast<size_t>(pg.size()), n);
  if (pg.rank() == kOdd) splits[0] += 1;
  return splits;
}

size_t total(const std::vector<int64_t>& splits) {
  return static_cast<size_t>(std::accumulate(splits.begin(), splits.end(), int64_t{0}));
}

// all_to_all_single with these split sizes, on buffers of the sizes they add up to.
WorkPtr allToAllWithSplits(ProcessGroup& pg, Buffers& b, const std::vector<int64_t>& sends,
                           const std::vector<int64_t>& recvs) {
  b.input.assign(total(sends), own(pg.rank()));
  b.output.assign(total(recvs), kUntouched);
  return pg.allToAllSingle(ref(b.output), ref(b.input), recvs, sends);
}

// A case's call on n of the rank's own values, in place (broadcast, reduce).
template <typename Call>
std::function<WorkPtr(ProcessGroup&, int64_t, Buffers&)> onOwnValues(Call call) {
  return [call](ProcessGroup& pg, int64_t n, Buffers& b) {
    b.output.assign(static_cast<size_t>(n), own(pg.rank()));
    return call(pg, ref(b.output));
  };
}

std::vector<AgreementCase> agreementCases() {
  auto selfRoot = [](const char* arg) {
    return [arg](int) {
      return std::vector<std::string>{std::string("different ") + arg + ": rank 0 passes 0, rank 1 passes 1"};
    };
  };
  auto oneOff = [](const char* arg) {
    return [arg](int p) {
      return std::vector<std::string>{std::string("different ") + arg + ": rank 0 passes 0, rank 1 passes " +
                                      std::to_string(p - 1)};
    };
  };
  auto splitsDoNotMatch = [](int) {
    return std::vector<std::string>{"split sizes that do not match", "rank 0 sends", "to rank 1",
                                    "output_split_sizes[0]"};
  };
  return {
      {"broadcast, every rank its own src",
       onOwnValues([](ProcessGroup& pg, TensorRef t) { return pg.broadcast(t, ownRoot(pg)); }),
       selfRoot("src")},
      {"broadcast, one rank names another src",
       onOwnValues([](ProcessGroup& pg, TensorRef t) { return pg.broadcast(t, oddRoot(pg)); }),
       oneOff("src")},
      {"reduce, every rank its own dst",
       onOwnValues([](ProcessGroup& pg, TensorRef t) { return pg.reduce(t, ownRoot(pg)); }),
       selfRoot("dst")},
      {"reduce, different ops",
       onOwnValues([](ProcessGroup& pg, TensorRef t) {
         OpOptions o;
         o.op = pg.rank() == kOdd ? ReduceOp::kMax : ReduceOp::kSum;
         return pg.reduce(t, o);
       }),
       [](int) { return std::vector<std::string>{"different op: rank 0 passes sum, rank 1 passes max"}; }},
      {"gather, every rank its own dst",
       [](ProcessGroup& pg, int64_t n, Buffers& b) {
         b.input.assign(static_cast<size_t>(n), own(pg.rank()));
         b.list.assign(static_cast<size_t>(pg.size()), std::vector<int32_t>(static_cast<size_t>(n), kUntouched));
         std::vector<TensorRef> outs;
         for (auto& t : b.list) outs.push_back(ref(t));
         return pg.gather(outs, ref(b.input), ownRoot(pg));
       },
       selfRoot("dst")},
      {"gather_into_tensor, one rank names another dst",
       [](ProcessGroup& pg, int64_t n, Buffers& b) {
         b.input.assign(static_cast<size_t>(n), own(pg.rank()));
         b.output.assign(static_cast<size_t>(n * pg.size()), kUntouched);
         return pg.gatherIntoTensor(ref(b.output), ref(b.input), oddRoot(pg));
       },
       oneOff("dst")},
      {"gather_into_tensor, different element counts",
       [](ProcessGroup& pg, int64_t n, Buffers& b) {
         // The odd rank's block is one element longer: over messages it
         // goes to the root with the odd rank's record and must be drained.
         const int64_t mine = n + (pg.rank() == kOdd ? 1 : 0);
         b.input.assign(static_cast<size_t>(mine), own(pg.rank()));
         b.output.assign(static_cast<size_t>(mine * pg.size()), kUntouched);
         return pg.gatherIntoTensor(ref(b.output), ref(b.input));
       },
       [](int) { return std::vector<std::string>{"different element counts: rank 0 passes "}; }},
      {"scatter, one rank names another src",
       [](ProcessGroup& pg, int64_t n, Buffers& b) {
         b.output.assign(static_cast<size_t>(n), kUntouched);
         b.list.assign(static_cast<size_t>(pg.size()), std::vector<int32_t>(static_cast<size_t>(n), own(pg.rank())));
         std::vector<TensorRef> ins;
         for (auto& t : b.list) ins.push_back(ref(t));
         return pg.scatter(ref(b.output), ins, oddRoot(pg));
       },
       oneOff("src")},
      {"scatter_tensor, every rank its own src",
       [](ProcessGroup& pg, int64_t n, Buffers& b) {
         b.output.assign(static_cast<size_t>(n), kUntouched);
         b.input.assign(static_cast<size_t>(n * pg.size()), own(pg.rank()));
         return pg.scatterTensor(ref(b.output), ref(b.input), ownRoot(pg));
       },
       selfRoot("src")},
      {"broadcast, a dtype of the same size",
       [](ProcessGroup& pg, int64_t n, Buffers& b) {
         // The odd rank reads the same bytes as float32: every size agrees.
         b.output.assign(static_cast<size_t>(n), own(pg.rank()));
         TensorRef t = ref(b.output);
         if (pg.rank() == kOdd) t.dtype = DType::kFloat32;
         return pg.broadcast(t);
       },
       [](int) { return std::vector<std::string>{"different dtype: rank 0 passes int32, rank 1 passes float32"}; }},
      {"broadcast, different element counts",
       [](ProcessGroup& pg, int64_t n, Buffers& b) {
         // The root's buffer is 256 B longer: at 4 elements it no longer
         // fits in the records and goes out with them to the ranks the
         // root sends to first (collectives/agreement.h, kFirstHopBytes),
         // which must take it in before they fail.
         b.output.assign(static_cast<size_t>(n + (pg.rank() == 0 ? 64 : 0)), own(pg.rank()));
         return pg.broadcast(ref(b.output));
       },
       [](int) { return std::vector<std::string>{"different element counts: rank 0 passes "}; }},
      {"all_to_all_single, a dtype of the same size",
       [](ProcessGroup& pg, int64_t n, Buffers& b) {
         const int p = pg.size();
         b.input.assign(static_cast<size_t>(n * p), own(pg.rank()));
         b.output.assign(static_cast<size_t>(n * p), kUntouched);
         TensorRef in = ref(b.input), out = ref(b.output);
         if (pg.rank() == kOdd) in.dtype = out.dtype = DType::kFloat32;
         return pg.allToAllSingle(out, in, {}, {});
       },
       [](int) { return std::vector<std::string>{"different dtype: rank 0 passes int32, rank 1 passes float32"}; }},
      {"all_to_all_single, split sizes that do not match",
       [](ProcessGroup& pg, int64_t n, Buffers& b) {
         // The odd rank expects one element more from rank 0 than rank 0 sends.
         return allToAllWithSplits(pg, b, std::vector<int64_t>(static_cast<size_t>(pg.size()), n),
                                   oddSplits(pg, n));
       },
       splitsDoNotMatch},
      {"all_to_all_single, a block too large to travel with the records",
       [](ProcessGroup& pg, int64_t n, Buffers& b) {
         // Rank 0 sends rank 1 64 KiB more than rank 1 expects: rank 0's
         // blocks wait for the verdict while the others' travel with their
         // records, and must be drained.
         std::vector<int64_t> sends(static_cast<size_t>(pg.size()), n), recvs = sends;
         if (pg.rank() == 0) sends[1] += kLargeBlockExtra;
         return allToAllWithSplits(pg, b, sends, recvs);
       },
       splitsDoNotMatch},
      {"all_gather_into_tensor_uneven, different split sizes",
       [](ProcessGroup& pg, int64_t n, Buffers& b) {
         // The odd rank gives rank 0 one element more (and its output one more).
         const std::vector<int64_t> splits = oddSplits(pg, n);
         b.input.assign(static_cast<size_t>(n), own(pg.rank()));
         b.output.assign(total(splits), kUntouched);
         return pg.allGatherIntoTensorUneven(ref(b.output), ref(b.input), splits);
       },
       [](int) { return std::vector<std::string>{"different output_split_sizes: rank 0 passes [", "rank 1 passes ["}; }},
      {"reduce_scatter_tensor_uneven, different split sizes",
       [](ProcessGroup& pg, int64_t n, Buffers& b) {
         const std::vector<int64_t> splits = oddSplits(pg, n);
         b.input.assign(total(splits), own(pg.rank()));
         b.output.assign(static_cast<size_t>(n), kUntouched);
         return pg.reduceScatterTensorUneven(ref(b.output), ref(b.input), splits);
       },
       [](int) { return std::vector<std::string>{"different input_split_sizes: rank 0 passes [", "rank 1 passes ["}; }},
  };
}

// Whether every output of `b` is as the case left it before the call:
// buffers a rank owns hold own(rank), the others kUntouched.
bool untouched(const Buffers& b, int rank, const char* caseName) {
  const bool ownData = std::strncmp(caseName, "broadcast", 9) == 0 || std::strncmp(caseName, "reduce,", 7) == 0;
  const int32_t expected = ownData ? own(rank) : kUntouched;
  for (int32_t v : b.output) {
    if (v != expected) return false;
  }
  if (std::strncmp(caseName, "gather", 6) == 0) {
    for (const auto& t : b.list) {
      for (int32_t v : t) {
        if (v != kUntouched) return false;
      }
    }
  }
  return true;
}

// Runs the cases whose name starts with `only` (all by default), with
// `env` in every rank (forced algorithms), `repeats` times over.
void runAgreement(const TransportCase& transport, int64_t n, const std::string& only = "",
                  const std::vector<std::pair<std::string, std::string>>& env = {}, int repeats = 1) {
  JobOptions o;
  o.env = env;
  o.bound = 120s;
  o.timeout = 30s;  // far above the bound checked below, so a Timeout cannot pass for a Mismatch
  auto statuses = runWorld(transport.p, withTransport(transport, o), [&](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    for (int repeat = 0; repeat < repeats; ++repeat) {
      for (const auto& c : agreementCases()) {
        if (std::string(c.name).rfind(only, 0) != 0) continue;
        // Everyone enters the case together, so the time measured is the check's.
        pg.barrier()->wait();
        Buffers b;
        std::string what;
        const uint64_t t0 = monoNowNs();
        Caught got = catchError([&] { c.call(pg, n, b)->wait(); }, &what);
        const double ms = msBetween(t0, monoNowNs());
        CHILD_CHECK(got == Caught::kMismatch,
                    "" << c.name << ": rank " << e.rank << " got " << caughtName(got) << " (" << what << ")");
        // Far below the timeout: the check failed the call, no wait ran out.
        const double boundMs = static_cast<double>(scaledBound(std::chrono::milliseconds(3000)).count());
        CHILD_CHECK(ms < boundMs, "" << c.name << ": rank " << e.rank << " took " << ms << " ms to fail");
        CHILD_CHECK(what.find("not running the same operation") != std::string::npos &&
                        what.find("the group is still usable") != std::string::npos,
                    "" << c.name << ": unclear message on rank " << e.rank << ": " << what);
        for (const auto& s : c.says(pg.size())) {
          CHILD_CHECK(what.find(s) != std::string::npos,
                      "" << c.name << ": rank " << e.rank << "'s message lacks \"" << s << "\": " << what);
        }
        CHILD_CHECK(untouched(b, e.rank, c.name), "" << c.name << ": rank " << e.rank << "'s output was written");
        // The group is intact: a correct call works, with the right result.
        std::vector<int32_t> data(static_cast<size_t>(n), own(e.rank));
        OpOptions root;
        root.root = pg.size() - 1;
        Caught next = catchError([&] { pg.broadcast(ref(data), root)->wait(); }, &what);
        CHILD_CHECK(next == Caught::kNone, "" << c.name << ": the next call failed on rank " << e.rank << ": " << what);
        CHILD_CHECK(data.front() == own(pg.size() - 1) && data.back() == own(pg.size() - 1),
                    "" << c.name << ": the next call's result is wrong on rank " << e.rank);
      }
    }
    return kExitOk;
  });
  EXPECT_TRUE(allOk(statuses)) << transport.name() << ", " << n << " elements\n" << describeAll(statuses);
}

class Agreement : public ::testing::TestWithParam<TransportCase> {};

TEST_P(Agreement, SmallMessages) { runAgreement(GetParam(), 4); }
// 4 MiB per rank's share: the large-message algorithms of every family.
TEST_P(Agreement, LargeMessages) { runAgreement(GetParam(), int64_t{1} << 20); }
// 4 KiB: a broadcast's root over messages sends its buffer with its record.
TEST_P(Agreement, MiddleMessages) { runAgreement(GetParam(), 1000); }

INSTANTIATE_TEST_SUITE_P(Conformance, Agreement,
                         ::testing::Values(shmCase(2), shmCase(3), shmCase(4), tcpCase(2), tcpCase(3),
                                           tcpCase(4), kHierarchical2x2),
                         TransportCaseName{});

// The check runs before any algorithm: the ones the defaults do not pick
// at these sizes, forced.
TEST(AgreementForcedAlgorithms, Tcp) {
  const std::vector<std::pair<std::string, std::string>> forced = {
      {"MESHCOMM_ALGO_BROADCAST", "chain"}, {"MESHCOMM_ALGO_REDUCE", "reduce_scatter_gather"}};
  runAgreement(tcpCase(3), 4, "", forced);
  runAgreement(tcpCase(3), int64_t{1} << 20, "", forced);
}

// all_to_all_single's blocks that travel with the records are drained
// when the records disagree: repeated disagreements leave nothing in the
// inboxes, whose bound would otherwise be hit within a few calls.
TEST(AgreementLeavesNothingBehind, AllToAllSingleOverTcp) {
  const std::vector<std::pair<std::string, std::string>> bound = {{"MESHCOMM_MAX_UNEXPECTED_BYTES", "100000"}};
  runAgreement(tcpCase(3), 1000, "all_to_all_single", bound, 20);
  runAgreement(kHierarchical2x2, 1000, "all_to_all_single", bound, 20);
}

// The same for the buffer a broadcast's root sends with its record, and
// the blocks of a gather or scatter.
TEST(AgreementLeavesNothingBehind, RootedCallsOverTcp) {
  const std::vector<std::pair<std::string, std::string>> bound = {{"MESHCOMM_MAX_UNEXPECTED_BYTES", "100000"}};
  for (const char* op : {"broadcast", "gather", "scatter"}) {
    runAgreement(tcpCase(3), 1000, op, bound, 20);
    runAgreement(tcpCase(4), 1000, op, bound, 20);
  }
  runAgreement(kHierarchical2x2, 1000, "gather", bound, 20);
  runAgreement(kHierarchical2x2, 1000, "scatter", bound, 20);
}

// all_to_all_single with ranks that agree, where some send their blocks
// with their agreement records and one, with a large block, after the
// verdict: every block lands where it belongs.
class AgreeingAllToAll : public ::testing::TestWithParam<TransportCase> {};

TEST_P(AgreeingAllToAll, SmallAndLargeBlocksMix) {
  // What rank `from` sends rank `to`: small, except rank 0's block for the
  // last rank.
  const int p = GetParam().p;
  auto count = [p](int from, int to) -> int64_t {
    return from == 0 && to == p - 1 ? kLargeBlockExtra : 3 + from + 2 * to;
  };
  JobOptions o;
  o.bound = 60s;
  auto statuses = runWorld(p, withTransport(GetParam(), o), [&](RankEnv& e) {
    for (int round = 0; round < 3; ++round) {
      auto value = [round](int from, int to, int64_t i) {
        return from * 1000000 + to * 10000 + static_cast<int32_t>(i) + round;
      };
      checkAllToAllSingle<int32_t>(e.pg(), count, value, true,
                                   "rank " + std::to_string(e.rank) + ", round " + std::to_string(round));
    }
    return kExitOk;
  });
  EXPECT_TRUE(allOk(statuses)) << GetParam().name() << "\n" << describeAll(statuses);
}

INSTANTIATE_TEST_SUITE_P(Conformance, AgreeingAllToAll,
                         ::testing::Values(shmCase(3), tcpCase(2), tcpCase(3), tcpCase(5), kHierarchical2x2),
                         TransportCaseName{});

// all_to_all_single's split check with eight ranks: 64 pairs of tables.
class AgreementOnEightRanks : public ::testing::TestWithParam<TransportCase> {};

TEST_P(AgreementOnEightRanks, AllToAllSplitSizes) { runAgreement(GetParam(), 40, "all_to_all_single"); }

INSTANTIATE_TEST_SUITE_P(Conformance, AgreementOnEightRanks, ::testing::Values(shmCase(8), tcpCase(8)),
                         TransportCaseName{});

}  // namespace
}  // namespace meshcomm::test

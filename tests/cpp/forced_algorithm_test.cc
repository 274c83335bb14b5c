// The TCP algorithms forced one by one (MESHCOMM_ALGO_*), with small
// pipeline chunks so a 1 MiB message is hundreds of pipelined chunks, over
// the collective matrix (collective_matrix.h); and the refusal of an
// algorithm that belongs to another collective.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "collective_matrix.h"
#include "transport_cases.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

void runForced(const TransportCase& c, const MatrixSpec& spec,
               std::vector<std::pair<std::string, std::string>> env) {
  JobOptions o;
  o.bound = 150s;
  o.env = std::move(env);
  runMatrixJob(c.p, spec, withTransport(c, o));
}

// Ring all-reduce, chain broadcast, reduce-scatter+gather reduce, ring
// all-gather (the default only above 1 MiB) and ring reduce-scatter (on a
// power of two, the default only from 4 MiB), with 4 KiB chunks.
class RingAndChain : public ::testing::TestWithParam<TransportCase> {};

TEST_P(RingAndChain, ForcedWithSmallChunks) {
  runForced(GetParam(),
            {"ring/chain/reduce_scatter_gather chunk=4096",
             {Operation::kAllReduce, Operation::kBroadcast, Operation::kReduce, Operation::kReduceScatterTensor,
              Operation::kReduceScatterTensorUneven, Operation::kAllGather, Operation::kAllGatherIntoTensor,
              Operation::kAllGatherIntoTensorUneven}},
            {{"MESHCOMM_ALGO_ALLREDUCE", "ring"},
             {"MESHCOMM_ALGO_BROADCAST", "chain"},
             {"MESHCOMM_ALGO_REDUCE", "reduce_scatter_gather"},
             {"MESHCOMM_ALGO_ALLGATHER", "ring"},
             {"MESHCOMM_ALGO_REDUCESCATTER", "ring"},
             {"MESHCOMM_CHUNK_BYTES", "4096"}});
}

INSTANTIATE_TEST_SUITE_P(TcpAlgorithms, RingAndChain,
                         ::testing::Values(tcpCase(2), tcpCase(3), tcpCase(4), tcpCase(5), tcpCase(8)),
                         TransportCaseName{});

// Recursive doubling all-reduce (including the non-power-of-two fold-in),
// binomial-tree broadcast and reduce, and Bruck's all-gather at every size
// (the default only up to 1 MiB), with a chunk size (6000 bytes) that is
// not a multiple of every element size. The waits do not spin and yield
// for up to a second before sleeping (what TCP waits do when ranks
// outnumber cores), so that path runs whatever the machine's cores.
class RecursiveDoublingAndTree : public ::testing::TestWithParam<TransportCase> {};

TEST_P(RecursiveDoublingAndTree, ForcedWithOddChunks) {
  runForced(GetParam(),
            {"recursive_doubling/binomial_tree/bruck chunk=6000",
             {Operation::kAllReduce, Operation::kBroadcast, Operation::kReduce, Operation::kAllGather,
              Operation::kAllGatherIntoTensor, Operation::kAllGatherIntoTensorUneven}},
            {{"MESHCOMM_ALGO_ALLREDUCE", "recursive_doubling"},
             {"MESHCOMM_ALGO_BROADCAST", "binomial_tree"},
             {"MESHCOMM_ALGO_REDUCE", "binomial_tree"},
             {"MESHCOMM_ALGO_ALLGATHER", "bruck"},
             {"MESHCOMM_CHUNK_BYTES", "6000"},
             {"MESHCOMM_SPIN_US", "0"},
             {"MESHCOMM_TCP_YIELD_US", "1000000"}});
}

INSTANTIATE_TEST_SUITE_P(TcpAlgorithms, RecursiveDoublingAndTree,
                         ::testing::Values(tcpCase(2), tcpCase(3), tcpCase(5), tcpCase(6), tcpCase(8)),
                         TransportCaseName{});

// Recursive halving and doubling all-reduce at powers of two and through
// the fold of the others, and recursive-halving reduce-scatter (the ring on
// groups that are not a power of two), over the matrix's counts (fewer
// elements than ranks, odd counts, empty tensors, uneven blocks).
class HalvingDoubling : public ::testing::TestWithParam<TransportCase> {};

TEST_P(HalvingDoubling, Forced) {
  runForced(GetParam(),
            {"halving_doubling/recursive_halving",
             {Operation::kAllReduce, Operation::kReduceScatter, Operation::kReduceScatterTensor,
              Operation::kReduceScatterTensorUneven}},
            {{"MESHCOMM_ALGO_ALLREDUCE", "halving_doubling"},
             {"MESHCOMM_ALGO_REDUCESCATTER", "recursive_halving"}});
}

INSTANTIATE_TEST_SUITE_P(TcpAlgorithms, HalvingDoubling,
                         ::testing::Values(tcpCase(2), tcpCase(3), tcpCase(4), tcpCase(5), tcpCase(6),
                                           tcpCase(8)),
                         TransportCaseName{});

// The MESHCOMM_ALGO_* variables are read in the children at the first call
// and checked against the algorithms of their collective: a name that exists
// but belongs to another collective is refused, so a typo in the forced
// runs above cannot silently fall back to the default choice.
TEST(CollAlgoEnv, AlgorithmOfAnotherCollectiveIsRefused) {
  JobOptions o;
  o.bound = 30s;
  o.env = {{"MESHCOMM_ALGO_ALLREDUCE", "chain"}, {"MESHCOMM_ALGO_BROADCAST", "ring"},
           {"MESHCOMM_ALGO_REDUCE", "recursive_doubling"}};
  expectWorldOk(2, o, [](RankEnv& e) {
    std::vector<float> x(8, 1.0f);
    TensorRef t{x.data(), 8, DType::kFloat32};
    std::string what;
    CHILD_CHECK(catchError([&] { e.pg().allReduce(t); }, &what) == Caught::kInvalidArgument);
    CHILD_CHECK(what.find("MESHCOMM_ALGO_ALLREDUCE") != std::string::npos, "" << what);
    CHILD_CHECK(catchError([&] { e.pg().broadcast(t); }) == Caught::kInvalidArgument);
    CHILD_CHECK(catchError([&] { e.pg().reduce(t); }) == Caught::kInvalidArgument);
    // Nothing was queued, so the group still works.
    std::vector<float> gathered(16, 0.0f);
    TensorRef all{gathered.data(), 16, DType::kFloat32};
    e.pg().allGatherIntoTensor(all, t)->wait();
    CHILD_CHECK(gathered[15] == 1.0f);
    return kExitOk;
  });
}

}  // namespace
}  // namespace meshcomm::test

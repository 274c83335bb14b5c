// The settings every rank must share (runtime/shared_settings.h): ranks
// whose MESHCOMM_ALGO_<OP>, MESHCOMM_CHUNK_BYTES or MESHCOMM_HIER_PIECE_BYTES
// differ fail to join, every one of them with the same message; ranks that
// differ only in writing a default out join and run.
#include "runtime/shared_settings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collective_harness.h"
#include "transport_cases.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;
using Settings = std::vector<std::pair<std::string, std::string>>;

TensorRef ints(std::vector<int32_t>& v) { return TensorRef{v.data(), static_cast<int64_t>(v.size()), DType::kInt32}; }

TEST(SharedSettings, RecordsThatAgreeOrCarryNoneAgree) {
  EXPECT_EQ(sharedSettingsDisagreement({}), "");
  EXPECT_EQ(sharedSettingsDisagreement({"world_size=2 shared=- host=a", "world_size=2 shared=- host=b"}), "");
  EXPECT_EQ(sharedSettingsDisagreement({"world_size=2 shared=A=1,B=x host=a", "world_size=2 shared=A=1,B=x"}), "");
  // A record without the field (a rank of an older meshcomm) has every setting at its default.
  EXPECT_EQ(sharedSettingsDisagreement({"world_size=2 shared=- host=a", "world_size=2 host=b"}), "");
}

TEST(SharedSettings, DisagreementNamesEveryVariableAndBothRanks) {
  const std::string why = sharedSettingsDisagreement(
      {"w shared=MESHCOMM_ALGO_ALLREDUCE=ring,MESHCOMM_CHUNK_BYTES=65536 h", "w shared=- h",
       "w shared=MESHCOMM_ALGO_ALLREDUCE=ring,MESHCOMM_CHUNK_BYTES=65536,MESHCOMM_ALGO_BROADCAST=chain h"});
  EXPECT_NE(why.find("MESHCOMM_ALGO_ALLREDUCE=ring on rank 0, MESHCOMM_ALGO_ALLREDUCE unset on rank 1"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("MESHCOMM_CHUNK_BYTES=65536 on rank 0, MESHCOMM_CHUNK_BYTES unset on rank 1"),
            std::string::npos)
      << why;
  // The first rank that differs from rank 0 is the one named.
  EXPECT_EQ(why.find("rank 2"), std::string::npos) << why;
  EXPECT_NE(why.find("alike on every rank"), std::string::npos) << why;
}

// Rank `odd` runs with `settings`, the others without: every rank's join
// fails with InvalidArgument naming `expect` (each of them), rank 0 and
// rank `odd`; or, with `expect` empty, every rank joins and an all_reduce
// and a broadcast give the right answers.
void join(const TransportCase& transport, int odd, const Settings& settings, const std::vector<std::string>& expect) {
  JobOptions o;
  o.bound = 60s;
  o.timeout = 20s;
  o.bodyJoins = true;
  o.rankEnv = [&](int rank) { return rank == odd ? settings : Settings{}; };
  auto statuses = runWorld(transport.p, withTransport(transport, o), [&](RankEnv& e) {
    std::string what;
    const Caught got = catchError([&] { e.world = World::init(e.init); }, &what);
    if (expect.empty()) {
      CHILD_CHECK(got == Caught::kNone, "rank " << e.rank << " could not join: " << what);
      std::vector<int32_t> sum(4096, 1);
      e.pg().allReduce(ints(sum))->wait();
      std::vector<int32_t> data(4096, e.rank == 0 ? 7 : 0);
      e.pg().broadcast(ints(data))->wait();
      CHILD_CHECK(sum.back() == e.pg().size() && data.back() == 7, "wrong result on rank " << e.rank);
      return kExitOk;
    }
    CHILD_CHECK(got == Caught::kInvalidArgument,
                "rank " << e.rank << " got " << caughtName(got) << " (" << what << ")");
    for (const std::string& word : expect) {
      CHILD_CHECK(what.find(word) != std::string::npos, "rank " << e.rank << ": no '" << word << "' in: " << what);
    }
    CHILD_CHECK(what.find("on rank 0") != std::string::npos &&
                    what.find("on rank " + std::to_string(odd)) != std::string::npos,
                "rank " << e.rank << " does not name both ranks: " << what);
    return kExitOk;
  });
  EXPECT_TRUE(allOk(statuses)) << transport.name() << "\n" << describeAll(statuses);
}

TEST(SharedSettings, RanksThatForceDifferentAlgorithmsFailToJoinAlike) {
  join(shmCase(2), 1, {{"MESHCOMM_ALGO_ALLREDUCE", "ring"}},
       {"MESHCOMM_ALGO_ALLREDUCE=ring on rank 1", "MESHCOMM_ALGO_ALLREDUCE unset on rank 0"});
  join(shmCase(3), 2, {{"MESHCOMM_ALGO_BROADCAST", "binomial_tree"}, {"MESHCOMM_ALGO_ALLGATHER", "bruck"}},
       {"MESHCOMM_ALGO_BROADCAST=binomial_tree on rank 2", "MESHCOMM_ALGO_ALLGATHER=bruck on rank 2"});
  join(tcpCase(3), 0, {{"MESHCOMM_ALGO_REDUCE", "chain"}, {"MESHCOMM_ALGO_ALLREDUCE", "ring"}},
       {"MESHCOMM_ALGO_ALLREDUCE=ring on rank 0", "MESHCOMM_ALGO_REDUCE=chain on rank 0"});
}

TEST(SharedSettings, RanksWithDifferentChunksOrPiecesFailToJoinAlike) {
  join(tcpCase(3), 1, {{"MESHCOMM_CHUNK_BYTES", "65536"}}, {"MESHCOMM_CHUNK_BYTES=65536 on rank 1"});
  join(kHierarchical2x2, 3, {{"MESHCOMM_HIER_PIECE_BYTES", "0"}}, {"MESHCOMM_HIER_PIECE_BYTES=0 on rank 3"});
}

TEST(SharedSettings, RanksThatCheckAndRanksThatDoNotFailToJoinAlike) {
  join(shmCase(2), 1, {{"MESHCOMM_CHECK", "0"}}, {"MESHCOMM_CHECK=0 on rank 1", "MESHCOMM_CHECK unset on rank 0"});
  join(tcpCase(3), 2, {{"MESHCOMM_CHECK", "0"}}, {"MESHCOMM_CHECK=0 on rank 2"});
}

TEST(SharedSettings, DefaultsWrittenOutJoin) {
  join(shmCase(3), 1,
       {{"MESHCOMM_ALGO_ALLREDUCE", "auto"}, {"MESHCOMM_ALGO_BROADCAST", ""}, {"MESHCOMM_CHUNK_BYTES", "1048576"},
        {"MESHCOMM_HIER_PIECE_BYTES", "4194304"}, {"MESHCOMM_CHECK", "1"}},
       {});
  // A chunk below the 4 KiB floor is the floor, whatever is written.
  join(tcpCase(2), 0, {{"MESHCOMM_CHUNK_BYTES", "100"}}, {"MESHCOMM_CHUNK_BYTES=4096 on rank 0"});
}

}  // namespace
}  // namespace meshcomm::test

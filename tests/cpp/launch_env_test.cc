// Reading the launchers' variables (runtime/launch_env.h): rank, size and
// local rank from each launcher, in precedence order, and the port derived
// from a Slurm job.
#include "runtime/launch_env.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "meshcomm/error.h"
#include "scoped_env.h"

namespace meshcomm {
namespace {

constexpr const char* kAll[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "SLURM_PROCID",
    "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID", "SLURM_STEP_ID"};

// Starts every test from an environment with no launcher in it.
class LaunchEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kAll) {
      cleared_.push_back(std::make_unique<ScopedEnv>(name, std::nullopt));
    }
  }
  void set(const char* name, const char* value) {
    cleared_.push_back(std::make_unique<ScopedEnv>(name, std::string(value)));
  }

 private:
  std::vector<std::unique_ptr<ScopedEnv>> cleared_;
};

TEST_F(LaunchEnvTest, NoLauncher) { EXPECT_FALSE(launchEnvFromEnvironment()); }

TEST_F(LaunchEnvTest, EachLauncherGivesItsLocalRank) {
  struct Case {
    const char *rank, *size, *local;
  };
  for (Case c : {Case{"RANK", "WORLD_SIZE", "LOCAL_RANK"},
                 Case{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
                 Case{"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
                 Case{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}}) {
    SCOPED_TRACE(c.rank);
    ScopedEnv rank(c.rank, "5"), size(c.size, "8"), local(c.local, "1");
    auto env = launchEnvFromEnvironment();
    ASSERT_TRUE(env);
    EXPECT_EQ(env->rank, 5);
    EXPECT_EQ(env->worldSize, 8);
    EXPECT_EQ(env->localRank, 1);
  }
}

TEST_F(LaunchEnvTest, LocalRankIsUnknownWithoutTheVariableOrOutOfRange) {
  set("SLURM_PROCID", "2");
  set("SLURM_NTASKS", "4");
  EXPECT_EQ(launchEnvFromEnvironment()->localRank, -1);
  set("SLURM_LOCALID", "4");
  EXPECT_EQ(launchEnvFromEnvironment()->localRank, -1);
}

TEST_F(LaunchEnvTest, LocalRankComesFromTheLauncherThatGaveTheRank) {
  // meshrun under srun: meshrun's variables describe this process.
  set("SLURM_PROCID", "0");
  set("SLURM_NTASKS", "1");
  set("SLURM_LOCALID", "0");
  set("RANK", "3");
  set("WORLD_SIZE", "4");
  set("LOCAL_RANK", "3");
  auto env = launchEnvFromEnvironment();
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->localRank, 3);
}

TEST_F(LaunchEnvTest, MalformedLocalRankIsAnError) {
  set("RANK", "0");
  set("WORLD_SIZE", "2");
  set("LOCAL_RANK", "zero");
  EXPECT_THROW(launchEnvFromEnvironment(), InvalidArgument);
}

TEST_F(LaunchEnvTest, SlurmPortIsTheSameForEveryTaskAndBelowTheEphemeralRange) {
  EXPECT_FALSE(slurmDerivedPort());
  set("SLURM_JOB_ID", "123456");
  set("SLURM_STEP_ID", "0");
  auto first = slurmDerivedPort();
  ASSERT_TRUE(first);
  EXPECT_EQ(first, slurmDerivedPort());
  EXPECT_GE(*first, 10000);
  EXPECT_LT(*first, 32000);
  set("SLURM_STEP_ID", "1");
  EXPECT_NE(first, slurmDerivedPort());
  set("SLURM_JOB_ID", "123457");
  set("SLURM_STEP_ID", "0");
  EXPECT_NE(first, slurmDerivedPort());
}

TEST(FirstSlurmHost, TakesTheFirstEntryAndItsFirstNumber) {
  EXPECT_EQ(firstSlurmHost("node[01-04],gpu7"), "node01");
  EXPECT_EQ(firstSlurmHost("vm"), "vm");
  EXPECT_EQ(firstSlurmHost("a[3,5-7]"), "a3");
}

}  // namespace
}  // namespace meshcomm

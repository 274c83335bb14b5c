// Reading the job's shape from the environment that launchers set:
// meshrun and torchrun (RANK, WORLD_SIZE, LOCAL_RANK), Open MPI
// (OMPI_COMM_WORLD_*), MPICH/Hydra (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID) and
// Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_NODELIST).
#pragma once

#include <optional>
#include <string>

namespace meshcomm {

struct LaunchEnv {
  int rank = -1;
  int worldSize = -1;
  int localRank = -1;  // index on this host, when the launcher says
  std::string source;  // which variables they came from, for messages
};

// The first complete (rank, world size) pair found, in the order above.
// Throws InvalidArgument when a launcher's variables are malformed.
std::optional<LaunchEnv> launchEnvFromEnvironment();

// Under Slurm without MASTER_PORT: a port every task of the job step
// computes alike from SLURM_JOB_ID and SLURM_STEP_ID, in [10000, 32000)
// (below Linux's ephemeral range, so outgoing connections do not hold it);
// consecutive jobs and the first 8 steps of a job get distinct ports.
std::optional<int> slurmDerivedPort();

// The first host of a Slurm node list ("node[01-04],gpu7" -> "node01").
std::string firstSlurmHost(const std::string& nodeList);

}  // namespace meshcomm

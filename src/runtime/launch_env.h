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

// The first host of a Slurm node list ("node[01-04],gpu7" -> "node01").
std::string firstSlurmHost(const std::string& nodeList);

}  // namespace meshcomm

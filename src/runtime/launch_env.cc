#include "runtime/launch_env.h"

#include <algorithm>

#include "common/env.h"
#include "meshcomm/error.h"

namespace meshcomm {

std::optional<LaunchEnv> launchEnvFromEnvironment() {
  struct Source {
    const char* rank;
    const char* size;
    const char* localRank;
    const char* name;
  };
  static constexpr Source kSources[] = {
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "RANK/WORLD_SIZE"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "Open MPI's OMPI_COMM_WORLD_RANK/SIZE"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI_RANK/PMI_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "Slurm's SLURM_PROCID/SLURM_NTASKS"},
  };
  for (const auto& s : kSources) {
    auto rank = envInt(s.rank);
    auto size = envInt(s.size);
    if (!rank || !size) continue;
    LaunchEnv env;
    env.rank = static_cast<int>(*rank);
    env.worldSize = static_cast<int>(*size);
    if (auto local = envInt(s.localRank); local && *local >= 0 && *local < *size) {
      env.localRank = static_cast<int>(*local);
    }
    env.source = s.name;
    return env;
  }
  return std::nullopt;
}

std::optional<int> slurmDerivedPort() {
  auto job = envInt("SLURM_JOB_ID");
  if (!job || *job < 0) return std::nullopt;
  const int64_t step = std::max<int64_t>(0, envInt("SLURM_STEP_ID").value_or(0));
  return static_cast<int>(10000 + (*job * 8 + step % 8) % 22000);
}

std::string firstSlurmHost(const std::string& nodeList) {
  // Grammar: entries separated by commas outside brackets; an entry is a
  // prefix optionally followed by [ranges] ("n[1-3,7]").
  std::string first;
  int depth = 0;
  for (char c : nodeList) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    first.push_back(c);
  }
  size_t open = first.find('[');
  if (open == std::string::npos) return first;
  std::string prefix = first.substr(0, open);
  std::string range = first.substr(open + 1);
  size_t end = range.find_first_of(",-]");
  return prefix + range.substr(0, end);
}

}  // namespace meshcomm

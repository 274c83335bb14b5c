#include "transport/machine.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "common/socket.h"

namespace meshcomm {

std::string localMachineId() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string bootId;
  std::getline(boot, bootId);
  if (!bootId.empty()) return bootId;
  return hostName();
}

int usableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace meshcomm

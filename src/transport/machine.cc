#include "transport/machine.h"

#include <fstream>

#include "common/socket.h"

namespace meshcomm {

std::string localMachineId() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string bootId;
  std::getline(boot, bootId);
  if (!bootId.empty()) return bootId;
  return hostName();
}

}  // namespace meshcomm

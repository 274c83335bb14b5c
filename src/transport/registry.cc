#include "transport/registry.h"

#include "transport/shm/shm_setup.h"
#include "transport/tcp/tcp_link.h"

namespace meshcomm {

std::span<const TransportKind> transportKinds() {
  static constexpr TransportKind kKinds[] = {
      {"tcp", &setUpTcpLink},           // every rank, on any host
      {"shm", &setUpSharedMemoryLink},  // the ranks of this host
  };
  return kKinds;
}

}  // namespace meshcomm

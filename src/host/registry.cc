#include "host/registry.h"

#include <cstring>
#include <string>

#include "host/shm/shm_collectives.h"
#include "meshcomm/error.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm::host {
namespace {

struct HostKind {
  const char* name;  // HostDomain::kind() of the domains it runs on
  const HostCollectives& (*collectives)();
};

constexpr HostKind kKinds[] = {
    {ShmDomain::kKind, &shmCollectives},
};

}  // namespace

const HostCollectives& collectivesFor(const HostDomain& domain) {
  for (const HostKind& kind : kKinds) {
    if (std::strcmp(kind.name, domain.kind()) == 0) return kind.collectives();
  }
  throw Error(std::string("no collectives are registered for host domains of kind '") + domain.kind() +
              "' (src/host/registry.cc)");
}

}  // namespace meshcomm::host

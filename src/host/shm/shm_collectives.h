// The shared-memory kind's collectives behind collectives/host_collectives.h
// (registered in host/registry.cc).
#pragma once

#include "collectives/host_collectives.h"

namespace meshcomm::host {

const HostCollectives& shmCollectives();

}  // namespace meshcomm::host

// The machine a rank runs on, as distinct from the host it stands for.
//
// Placement (placement.h) groups ranks by host identity, which
// MESHCOMM_HOST_ID may set: several network namespaces or containers of one
// machine can act as separate hosts, each with its own shared memory and
// its ranks reached over TCP. Their ranks still share the machine's cores,
// and how long a wait may busy-poll depends on how many ranks compete for
// them. The running kernel's boot id tells: namespaces and containers of
// one kernel read the same one, and no two kernels (machines, or boots of
// one) do.
//
// Thread-safety: a pure function of the machine.
#pragma once

#include <string>

namespace meshcomm {

// This machine's identity: the kernel's boot id
// (/proc/sys/kernel/random/boot_id), or the host name where that cannot be
// read. MESHCOMM_HOST_ID does not change it.
std::string localMachineId();

// Cores this process may run on (its affinity mask), at least 1.
int usableCpus();

}  // namespace meshcomm

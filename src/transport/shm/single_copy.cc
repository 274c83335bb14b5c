#include "transport/shm/single_copy.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "meshcomm/error.h"

namespace meshcomm::single_copy {
namespace {

constexpr uint64_t kProbeValue = 0x6d63'7072'6f62'6521ULL;
const volatile uint64_t gProbe = kProbeValue;

// One process_vm_readv call; returns bytes read or -1 with errno.
ssize_t readOnce(pid_t pid, uintptr_t remote, void* local, size_t bytes) {
  iovec l{local, bytes};
  iovec r{reinterpret_cast<void*>(remote), bytes};
  return ::process_vm_readv(pid, &l, 1, &r, 1, 0);
}

}  // namespace

const void* probeAddress() { return const_cast<const uint64_t*>(&gProbe); }

bool probe(pid_t pid, uintptr_t remote) {
  uint64_t value = 0;
  return readOnce(pid, remote, &value, sizeof(value)) == static_cast<ssize_t>(sizeof(value)) &&
         value == kProbeValue;
}

void read(pid_t pid, uintptr_t remote, void* local, size_t bytes) {
  auto* out = static_cast<uint8_t*>(local);
  while (bytes > 0) {
    ssize_t n = readOnce(pid, remote, out, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EFAULT;
      if (err == ESRCH) {
        throw PeerLost("process " + std::to_string(pid) + " on this host exited during a transfer");
      }
      throw Error("reading " + std::to_string(bytes) + " bytes from process " + std::to_string(pid) +
                  " failed: " + std::strerror(err));
    }
    // Partial reads stop at a page the peer has not mapped; go on from there.
    out += n;
    remote += static_cast<uintptr_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

}  // namespace meshcomm::single_copy

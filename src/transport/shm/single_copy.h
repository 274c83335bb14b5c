// Single-copy transfers between the ranks of one host: a rank reads a
// peer's buffer straight out of the peer's address space
// (process_vm_readv), one copy instead of two through a shared segment.
// The kernel allows it when the reader may ptrace the peer (same user and
// no Yama restriction, or CAP_SYS_PTRACE); probe() tells, and the group
// set-up turns it off for a host unless every pair works.
//
// Thread-safety: all functions are thread-safe.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace meshcomm::single_copy {

// The address of a word with a known value in this process, for peers to
// probe.
const void* probeAddress();
// Whether this process can read `probeAddress()` of process `pid`
// (published by it as `remote`).
bool probe(pid_t pid, uintptr_t remote);

// Copies `bytes` from `remote` in process `pid` to `local`. Throws PeerLost
// when the process is gone and Error when the kernel refuses (the peer's
// buffer is not mapped, or permission was revoked).
void read(pid_t pid, uintptr_t remote, void* local, size_t bytes);

}  // namespace meshcomm::single_copy

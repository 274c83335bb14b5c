// The transport's message framing, shared by every stream transport.
// docs/transport-protocol.md describes it.
//
// Each message: a 40-byte header, then `bytes` payload bytes.
// The first message on a new connection is a hello: tag = the sender's
// group rank, opCount = the receiver's group rank, payload = the group's
// connection key (and an HMAC of it when MESHCOMM_AUTH_TOKEN is set).
#pragma once

#include <cstdint>

namespace meshcomm::wire {

inline constexpr uint32_t kMagic = 0x4D435450;  // "MCTP"

enum class Kind : uint8_t { kHello = 1, kData = 2, kAbort = 3 };

// Error categories carried by an abort message.
enum class AbortReason : uint8_t { kAborted = 0, kPeerLost = 1, kTimeout = 2, kMismatch = 3 };

struct Header {
  uint32_t magic = kMagic;
  uint8_t kind = 0;
  uint8_t opcode = 0;
  uint8_t dtype = 0;
  uint8_t reduceOp = 0;
  uint64_t tag = 0;
  uint64_t bytes = 0;
  uint64_t opCount = 0;
  uint64_t detail = 0;
};
static_assert(sizeof(Header) == 40, "wire header must stay 40 bytes");

// A hello's payload is at most this long; anything longer is refused.
inline constexpr uint64_t kMaxHelloBytes = 4096;
// An abort's message is truncated to this.
inline constexpr uint64_t kMaxAbortBytes = 4096;

}  // namespace meshcomm::wire

// Opcodes of the operations, carried in every message's signature so a
// receiver can tell which operation its peer is running.
#pragma once

#include <cstdint>

namespace meshcomm {

enum class Opcode : uint8_t {
  kAllReduce = 1,
  kBroadcast = 2,
  kReduce = 3,
  kAllGather = 4,
  kReduceScatter = 5,
  kGather = 6,
  kScatter = 7,
  kAllToAll = 8,
  kBarrier = 9,
  kPointToPoint = 10,
};

const char* opcodeName(uint8_t opcode);

}  // namespace meshcomm

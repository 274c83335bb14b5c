// One step of a pipelined ring reduction (all_reduce's ring and
// reduce_scatter): what the step sends to the right and receives from the
// left, chunk by chunk, so that the receiver reduces each chunk as it lands.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/blocks.h"
#include "collectives/comm.h"

namespace meshcomm::collectives {

// The receives of one ring step: the chunks of the incoming block and, in
// the same order, the request of each.
struct RingStepReceives {
  std::vector<Chunk> chunks;
  std::vector<RequestPtr> requests;
};

// Posts the sends of `sendCount` elements at `sending` to `right` and the
// receives of `recvCount` elements into `into` from `left`, in chunks of
// `chunk` elements (`es` bytes each), tagged `base` + the chunk's index.
inline RingStepReceives postRingStep(Comm& comm, int right, int left, uint32_t base,
                                     const uint8_t* sending, size_t sendCount, uint8_t* into,
                                     size_t recvCount, size_t chunk, size_t es) {
  const std::vector<Chunk> out = chunksOf(sendCount, chunk);
  for (size_t k = 0; k < out.size(); ++k) {
    comm.send(right, base + static_cast<uint32_t>(k), sending + out[k].offset * es,
              out[k].count * es);
  }
  RingStepReceives in{chunksOf(recvCount, chunk), {}};
  for (size_t k = 0; k < in.chunks.size(); ++k) {
    in.requests.push_back(comm.recv(left, base + static_cast<uint32_t>(k),
                                    into + in.chunks[k].offset * es, in.chunks[k].count * es));
  }
  return in;
}

}  // namespace meshcomm::collectives

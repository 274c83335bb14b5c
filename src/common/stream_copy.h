// Copies whose destination bypasses the caches.
//
// A plain store to a line that is not in cache first reads the line from
// memory (read for ownership), so copying into a large cold buffer moves
// its bytes through memory twice. Non-temporal stores write whole lines
// without reading them first: on the machine of docs/tuning.md a 16 MiB
// copy from cache into cold memory takes 390 us this way against 557 us
// with memcpy. The price is that the destination is not in cache
// afterwards, so they suit outputs too large to stay there anyway, and
// only outputs nothing has just read (a line in cache is evicted).
#pragma once

#include <cstddef>

namespace meshcomm {

// memcpy(to, from, bytes) with non-temporal stores where the target has
// them (x86-64; elsewhere plain memcpy). The stores are fenced before it
// returns, so they are ordered before any later store (a published flag).
// REQUIRES: the ranges do not overlap.
void streamCopy(void* to, const void* from, size_t bytes);

}  // namespace meshcomm

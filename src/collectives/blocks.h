// Splitting a buffer into per-rank blocks and blocks into pipeline chunks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "common/inline_list.h"

namespace meshcomm {

// A contiguous piece of a buffer.
struct Block {
  uint8_t* data = nullptr;
  size_t bytes = 0;
};

// The bytes of every block together.
inline size_t totalBytes(std::span<const Block> blocks) {
  size_t total = 0;
  for (const Block& b : blocks) total += b.bytes;
  return total;
}

// A call's block from a rank to itself: copied, unless it already lies in
// place.
inline void moveOwnBlock(void* to, const void* from, size_t bytes) {
  if (to != from && bytes > 0) std::memmove(to, from, bytes);
}
// The same for an exchange's block (all_to_all).
inline void copyOwnBlock(std::span<const Block> sends, std::span<const Block> recvs, int rank) {
  const Block& send = sends[static_cast<size_t>(rank)];
  moveOwnBlock(recvs[static_cast<size_t>(rank)].data, send.data, send.bytes);
}

// The per-rank blocks of one call, inline up to 8 ranks.
using BlockList = InlineList<Block, 8>;

// count elements split into `parts` nearly equal blocks (the first
// count % parts blocks get one more element).
inline std::vector<size_t> evenSplit(size_t count, int parts) {
  std::vector<size_t> out(static_cast<size_t>(parts), count / static_cast<size_t>(parts));
  for (size_t i = 0; i < count % static_cast<size_t>(parts); ++i) ++out[i];
  return out;
}

// Element counts, one per rank: a small group's take no allocation.
using BlockCounts = InlineList<size_t, 8>;
// Where each block starts, and the total last (one more than the blocks).
using BlockOffsets = InlineList<size_t, 9>;

// Exclusive prefix sums: offsets[i] = sum of counts[0..i), i up to
// counts.size() (the total).
inline BlockOffsets offsetsOf(std::span<const size_t> counts) {
  BlockOffsets out(counts.size() + 1);
  for (size_t i = 0; i < counts.size(); ++i) out[i + 1] = out[i] + counts[i];
  return out;
}

inline size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

// Whether two byte ranges share a byte (an empty range shares none).
inline bool rangesOverlap(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

// A piece of a block: `count` elements starting `offset` elements in.
struct Chunk {
  size_t offset;
  size_t count;
};

// A block of `count` elements cut into chunks of at most `chunk` elements.
// An empty block is one empty chunk, so sender and receiver still exchange
// a message (which carries the signature check).
inline std::vector<Chunk> chunksOf(size_t count, size_t chunk) {
  std::vector<Chunk> out;
  for (size_t c = 0; c < count; c += chunk) out.push_back({c, count - c < chunk ? count - c : chunk});
  if (out.empty()) out.push_back({0, 0});
  return out;
}

// (r + k) mod p for possibly negative k.
inline int wrap(int r, int k, int p) { return ((r + k) % p + p) % p; }

}  // namespace meshcomm

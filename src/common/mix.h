// Mixing 64-bit words into digests: one round of splitmix64's finalizer
// reaches every output bit from every input bit, in a few instructions, so
// the digests a call computes on its hot path (a shared-memory round's
// history, the agreement's record digests) cost next to nothing. Not a
// cryptographic hash: it tells honest values apart, it does not resist
// chosen ones.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

namespace meshcomm {

constexpr uint64_t mixWord(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// `seed` followed by `words`, mixed in order.
constexpr uint64_t mixWords(uint64_t seed, std::span<const int64_t> words) {
  uint64_t h = mixWord(seed);
  for (int64_t w : words) h = mixWord(h ^ static_cast<uint64_t>(w));
  return h;
}

}  // namespace meshcomm

// The layout of a message tag, the one place it is defined. A receive
// matches the oldest message from its peer with the same tag.
//
//   bit 63      1: a collective's message; 0: a user's point-to-point one
//   collective: bits 24..62 the call's sequence number in its group (the
//               same on every rank for the same call, modulo 2^39), bits
//               0..23 the step within the call's schedule
//   user:       bits 0..30 the user's non-negative tag
//
// So messages of different collective calls, and user messages, never
// match each other, and two messages of the same call can be told apart
// from those of another call (see sameCollectiveCall).
//
// Thread-safety: constants and pure functions.
#pragma once

#include <cstdint>

namespace meshcomm::tags {

inline constexpr uint64_t kCollectiveBit = uint64_t{1} << 63;
inline constexpr unsigned kStepBits = 24;
inline constexpr uint64_t kStepMask = (uint64_t{1} << kStepBits) - 1;
inline constexpr uint64_t kSeqMask = (uint64_t{1} << (63 - kStepBits)) - 1;
// Steps a collective call can number (across all its phases).
inline constexpr uint64_t kMaxSteps = uint64_t{1} << kStepBits;

// The tag of step `step` of collective call `seq`. REQUIRES: step < kMaxSteps.
constexpr uint64_t collective(uint64_t seq, uint64_t step) {
  return kCollectiveBit | ((seq & kSeqMask) << kStepBits) | (step & kStepMask);
}

// The tag of a user's point-to-point message. REQUIRES: userTag >= 0.
constexpr uint64_t pointToPoint(int userTag) {
  return static_cast<uint64_t>(static_cast<uint32_t>(userTag));
}

// Both tags belong to the same collective call (any steps).
constexpr bool sameCollectiveCall(uint64_t a, uint64_t b) {
  return (a & kCollectiveBit) != 0 && (b & kCollectiveBit) != 0 && (a >> kStepBits) == (b >> kStepBits);
}

}  // namespace meshcomm::tags

// ScratchArena: temporary buffers a group's collectives reuse from call to
// call. Allocating (and zero-filling) them afresh costs a page fault per
// page on every call, which at tens of MiB dominates the collective.
//
// Thread-safety: not thread-safe; owned by one group, used by the one
// operation running on it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace meshcomm {

// Named slots, so algorithms that call each other never share a buffer.
enum class Scratch : int {
  kRecv = 0,      // a receive staged for reduction
  kPartialA = 1,  // reduce-scatter partials (double-buffered)
  kPartialB = 2,
  kOwnBlock = 3,  // reduce: this rank's finished block
  kCopy = 4,      // reduce: a non-root's accumulator
  kPacked = 5,    // a list of tensors packed into one buffer
  kHostPartial = 6,  // hierarchical reduce and all_reduce: a leader's host result
  kAccumulator = 7,  // all_reduce: results kept from the output until every exchange succeeded
};
inline constexpr int kScratchSlots = 8;

class ScratchArena {
 public:
  // At least `bytes` of uninitialised memory, valid until the next get()
  // of the same slot or trim().
  uint8_t* get(Scratch slot, size_t bytes) {
    Buffer& b = slots_[static_cast<int>(slot)];
    if (b.capacity < bytes || !b.data) {
      b.data.reset(new uint8_t[bytes == 0 ? 1 : bytes]);
      b.capacity = bytes;
      largest_ = std::max(largest_, bytes);
    }
    return b.data.get();
  }

  // Frees buffers above `keepBytes` so one huge call does not pin its
  // memory for the life of the group.
  void trim(size_t keepBytes) {
    if (largest_ <= keepBytes) return;  // every call but an outsized one's
    largest_ = 0;
    for (auto& b : slots_) {
      if (b.capacity > keepBytes) {
        b.data.reset();
        b.capacity = 0;
      }
      largest_ = std::max(largest_, b.capacity);
    }
  }

 private:
  struct Buffer {
    std::unique_ptr<uint8_t[]> data;
    size_t capacity = 0;
  };
  Buffer slots_[kScratchSlots];
  size_t largest_ = 0;  // at least the largest capacity (exactly, after trim)
};

}  // namespace meshcomm

#include "host/shm/slot_stores.h"

#include <cstring>
#include <optional>
#include <string>

#include "common/env.h"
#include "common/stream_copy.h"
#include "meshcomm/error.h"

namespace meshcomm::host::shm {
SlotStoreSetting parseSlotStoreSetting(std::string_view value) {
  if (value.empty() || value == "auto") return SlotStoreSetting::kAuto;
  if (value == "cached") return SlotStoreSetting::kCached;
  if (value == "streaming") return SlotStoreSetting::kStreaming;
  throw InvalidArgument("MESHCOMM_SHM_SLOT_STORES='" + std::string(value) +
                        "' is not one of: auto, cached, streaming");
}

SlotStoreSetting slotStoreSetting() {
  static const SlotStoreSetting value =
      parseSlotStoreSetting(envString("MESHCOMM_SHM_SLOT_STORES").value_or(""));
  return value;
}

SlotStores& slotStores() {
  thread_local SlotStores stores;
  return stores;
}

void copyIntoSlot(void* slot, const void* from, size_t bytes, SlotStoreSetting setting) {
  switch (setting) {
    case SlotStoreSetting::kCached: std::memcpy(slot, from, bytes); return;
    case SlotStoreSetting::kStreaming: streamCopy(slot, from, bytes); return;
    case SlotStoreSetting::kAuto: break;
  }
  SlotStores& stores = slotStores();
  const SlotStores::Clock::time_point start = SlotStores::Clock::now();
  const SlotStores::Plan plan = stores.plan(bytes, start);
  if (plan.stream) {
    streamCopy(slot, from, bytes);
    return;
  }
  std::memcpy(slot, from, bytes);
  if (plan.timed) {
    const SlotStores::Clock::time_point end = SlotStores::Clock::now();
    stores.record(bytes, end - start, end);
  }
}

}  // namespace meshcomm::host::shm

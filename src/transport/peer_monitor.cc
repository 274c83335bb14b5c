#include "transport/peer_monitor.h"

#include <algorithm>
#include <sstream>

#include "meshcomm/error.h"
#include "transport/failure.h"

namespace meshcomm {

PeerMonitor::PeerMonitor(std::shared_ptr<Store> jobStore, std::string groupName,
                         std::string abortKey, std::vector<int> members)
    : store_(std::move(jobStore)),
      groupName_(std::move(groupName)),
      abortKey_(std::move(abortKey)),
      members_(std::move(members)) {}

void PeerMonitor::check(const std::string& during) {
  std::vector<Bytes> values;
  try {
    if (store_->check({abortKey_})) {
      if (auto error = errorOfAbortValue(store_->get(abortKey_), during + ": ")) {
        std::rethrow_exception(error);
      }
    }
    if (!store_->check({lostRanksKey()})) return;
    Bytes lost = store_->get(lostRanksKey());
    std::stringstream ss(std::string(lost.begin(), lost.end()));
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item.empty()) continue;
      int worldRank = std::stoi(item);
      auto it = std::find(members_.begin(), members_.end(), worldRank);
      if (it == members_.end()) continue;
      int groupRank = static_cast<int>(it - members_.begin());
      throw PeerLost(during + ": rank " + std::to_string(groupRank) + " (world rank " +
                     std::to_string(worldRank) + ") of group " + groupName_ +
                     " exited or was killed");
    }
  } catch (const StoreError& e) {
    throw PeerLost(during + ": lost the rendezvous store, whose host is presumed dead (" +
                   e.what() + ")");
  }
}

std::exception_ptr PeerMonitor::errorOfAbortValue(const Bytes& value, const std::string& prefix) {
  if (value.empty()) return nullptr;
  try {
    throwAbortReason(static_cast<wire::AbortReason>(value[0]),
                     prefix + std::string(value.begin() + 1, value.end()));
  } catch (...) {
    return std::current_exception();
  }
}

std::exception_ptr PeerMonitor::abortError() {
  try {
    if (!store_->check({abortKey_})) return nullptr;
    return errorOfAbortValue(store_->get(abortKey_), "");
  } catch (...) {
    return nullptr;
  }
}

bool PeerMonitor::listed(const Bytes& ranks, int worldRank) {
  std::stringstream ss(std::string(ranks.begin(), ranks.end()));
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty() && item == std::to_string(worldRank)) return true;
  }
  return false;
}

bool PeerMonitor::departed(int worldRank) {
  try {
    return store_->check({departedRanksKey()}) &&
           listed(store_->get(departedRanksKey()), worldRank);
  } catch (...) {
    return false;
  }
}

std::string PeerMonitor::howGone(int worldRank) {
  return departed(worldRank) ? "left the job (destroy_process_group or exit)"
                             : "exited or was killed";
}

void PeerMonitor::reportAbort(int worldRank, wire::AbortReason reason,
                              const std::string& message) {
  try {
    std::string text = "world rank " + std::to_string(worldRank) + " aborted group " +
                       groupName_ + ": " + message;
    Bytes value(1 + text.size());
    value[0] = static_cast<uint8_t>(reason);
    std::copy(text.begin(), text.end(), value.begin() + 1);
    // The first abort wins: later ones are usually echoes of it.
    if (store_->compareSet(abortKey_, Bytes{}, value) != value) return;
    // Claiming the slot first and filling it second leaves a slot empty
    // only if this process dies in between; the readers skip such a slot.
    const int64_t slot = store_->add(abortNoticeCountKey(), 1);
    store_->set(abortNoticeKey(slot), abortKey_);
  } catch (...) {
  }
}

}  // namespace meshcomm

// PeerMonitor: learns through the store that a member of a group died or
// that a member aborted the group, so a rank blocked on a healthy peer
// still fails promptly when some other member is gone.
//
// The store server appends "<world rank>," to the job's lost-ranks key when
// a rank's store connection closes without a clean shutdown (see
// TCPStore::appendOnDisconnect); an aborting rank sets the group's abort
// key. check() reads both without waiting.
//
// Thread-safety: check() and reportAbort() may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "meshcomm/store.h"
#include "transport/wire.h"

namespace meshcomm {

class PeerMonitor {
 public:
  // jobStore: the runtime's own store view (keys relative to the job).
  // members: world ranks of the group, indexed by group rank.
  PeerMonitor(std::shared_ptr<Store> jobStore, std::string groupName,
              std::string abortKey, std::vector<int> members);

  // Throws PeerLost naming the first lost member, or the error a member
  // reported when it aborted the group. Store failures count as losing
  // the store's host.
  void check(const std::string& during);

  // Publishes this rank's abort so members not connected to it learn why.
  // Never throws (the store may be the thing that failed).
  void reportAbort(int worldRank, wire::AbortReason reason, const std::string& message);

  // How a member that is gone left: "left the job" when it departed on
  // purpose (destroy_process_group, exit), "exited or was killed"
  // otherwise. Never throws.
  std::string howGone(int worldRank);
  // Whether `worldRank` left the job on purpose. Never throws.
  bool departed(int worldRank);

  static std::string lostRanksKey() { return "lost_ranks"; }
  // "<world rank>," per rank that left the job on purpose (World shutdown).
  static std::string departedRanksKey() { return "departed_ranks"; }
  // Whether `worldRank` is listed in a "<rank>,<rank>," value.
  static bool listed(const Bytes& ranks, int worldRank);

 private:
  std::shared_ptr<Store> store_;
  std::string groupName_;
  std::string abortKey_;
  std::vector<int> members_;
};

}  // namespace meshcomm

// PeerMonitor: learns through the store that a member of a group died or
// that a member aborted the group, so a rank blocked on a healthy peer
// still fails promptly when some other member is gone.
//
// The store server appends "<world rank>," to the job's lost-ranks key when
// a rank's store connection closes without a clean shutdown (see
// TCPStore::appendOnDisconnect); an aborting rank sets the group's abort
// key. check() reads both without waiting.
//
// The first rank to set a group's abort key also posts a notice of it, the
// key's name, in the next slot of the job's list of abort notices
// (abortNoticeKey(1), (2), ...), so each process can learn of the abort of
// any of its groups while it is idle by waiting for the next slot
// (runtime/abort_notices.h) instead of polling every group's key.
//
// Thread-safety: check() and reportAbort() may be called from any thread.
#pragma once

#include <cstdint>
#include <exception>
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

  // Publishes this rank's abort so members not connected to it learn why,
  // and, when it is the group's first, posts its notice. Never throws (the
  // store may be the thing that failed).
  void reportAbort(int worldRank, wire::AbortReason reason, const std::string& message);

  // The error a member's abort of the group stands for, or null while no
  // member aborted it (or the store cannot say). Never throws.
  std::exception_ptr abortError();
  const std::string& abortKey() const { return abortKey_; }

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
  // The job's count of abort notices, and the slot of the n-th (from 1),
  // which holds the abort key of the group it is about.
  static std::string abortNoticeCountKey() { return "abort_notices"; }
  static std::string abortNoticeKey(int64_t n) { return "abort_notice/" + std::to_string(n); }
  // The error an abort key's value stands for: its reason's exception, with
  // `prefix` before the aborting rank's text.
  static std::exception_ptr errorOfAbortValue(const Bytes& value, const std::string& prefix);

 private:
  std::shared_ptr<Store> store_;
  std::string groupName_;
  std::string abortKey_;
  std::vector<int> members_;
};

}  // namespace meshcomm

// ShmTransport: point-to-point messages between the ranks of one host,
// through the byte rings of the group's shared-memory domain.
//
// A message is a 64-byte header (tag, signature, size) followed by its
// payload, padded to a cache line; a send copies it into the ring to its
// peer as space frees up (in pieces, so the receiver copies out while the
// sender still copies in), and is done once it is all in the ring. Every
// wait and progress call also drains each incoming ring into the matching
// receives or, when none is posted yet, into buffers of their own
// (transport/inbox.h), so two ranks that both send before they receive
// never block each other.
//
// Failures go through the domain's abort line: a Mismatch, a corrupt
// header, a timeout or a dead peer on one rank fails every local rank.
//
// Thread-safety: as Transport: one driving thread at a time, and
// wakeProgress() (the domain's notify()) from any thread.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transport/inbox.h"
#include "transport/shm/shm_domain.h"
#include "transport/transport.h"

namespace meshcomm {

class ShmTransport final : public Transport {
 public:
  // `localOf[g]` is group rank g's local rank in `domain`, or -1 if it is
  // on another host.
  ShmTransport(ShmDomain& domain, int groupRank, std::vector<int> localOf,
               std::shared_ptr<ReceiveMatcher> matcher, Inbox::Describe describe);
  ~ShmTransport() override;

  // Whether `peer` shares this host (and so can be posted to here).
  bool reaches(int peer) const;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(localOf_.size()); }
  RequestPtr postSend(int peer, uint64_t tag, const MessageSignature& sig, const void* data,
                      size_t bytes) override;
  RequestPtr postRecv(int peer, uint64_t tag, const MessageSignature& sig, void* data,
                      size_t bytes) override;
  RequestPtr postRecvAny(uint64_t tag, const MessageSignature& sig, void* data,
                         size_t bytes) override;
  void wait(std::span<const RequestPtr> requests, const OpContext& ctx) override;
  // One pass over every ring: whether any byte moved. Throws (after
  // raising the abort line) what breaks the transport.
  bool poll(const std::string& during) override;
  void progress(std::chrono::milliseconds budget, int interruptFd) override;
  void wakeProgress() override { domain_.notify(); }
  bool hasPending() const override;
  void abort(std::exception_ptr error) override;
  // This rank's own error if it broke the transport (its full message),
  // else the abort line's.
  std::exception_ptr brokenError() const override {
    return broken_ ? broken_ : domain_.abortError();
  }
  bool broken() const override { return broken_ || domain_.abortRaised(); }


 private:
  struct Peer;

  bool pushSends(Peer& p);
  // Whether a send to, or a receive naming, local rank `local` is unfinished.
  bool pendingWith(int local) const;
  bool drainRing(Peer& p, const std::string& during);
  // Raises the abort line with the current exception, fails every pending
  // request and rethrows.
  [[noreturn]] void failAndRethrow();
  void failPending();
  std::string describePeer(int peer) const;

  ShmDomain& domain_;
  int rank_;
  std::vector<int> localOf_;
  Inbox::Describe describe_;
  // Before peers_: their inboxes detach from it when they go.
  std::shared_ptr<ReceiveMatcher> matcher_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by group rank; null if remote or self
  std::exception_ptr broken_;
  Deadline::Clock::time_point nextPeerCheck_{};
  std::string waitDuring_;  // what the current wait() is for (its failures say)
};

}  // namespace meshcomm

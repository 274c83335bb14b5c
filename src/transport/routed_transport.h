// RoutedTransport: a group's messages, each over the link that reaches its
// peer (transport/group_transport.h decides which): shared memory to the
// ranks of this host and TCP to the others, or any other composition of
// registered kinds.
//
// A wait whose requests all go over one link is that link's own wait. A
// wait over several alternates non-blocking passes of the more local links
// with a short blocking pass of the first (the network, which sleeps on its
// sockets), so no link's transfers stall behind another's.
//
// Thread-safety: as Transport (one driving thread at a time).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/receive_matcher.h"
#include "transport/transport.h"

namespace meshcomm {

class RoutedTransport final : public Transport {
 public:
  // links: in registry order, the broadest (the network) first.
  // linkOf[peer]: the index into `links` of the link that carries the
  // messages to and from group rank `peer` (-1 for this rank itself).
  // `matcher`: the one every link's inboxes share.
  // REQUIRES: two links or more, all speaking for the same rank of the
  // same group.
  RoutedTransport(std::vector<std::unique_ptr<Transport>> links, std::vector<int> linkOf,
                  std::shared_ptr<ReceiveMatcher> matcher);

  int rank() const override { return links_.front()->rank(); }
  int size() const override { return links_.front()->size(); }
  RequestPtr postSend(int peer, uint64_t tag, const MessageSignature& sig, const void* data,
                      size_t bytes) override;
  RequestPtr postRecv(int peer, uint64_t tag, const MessageSignature& sig, void* data,
                      size_t bytes) override;
  // Each peer's link expects its messages; the receive waits in the
  // shared matcher, where a message from any link finds it.
  RequestPtr postRecvAny(uint64_t tag, const MessageSignature& sig, void* data,
                         size_t bytes) override;
  void holdSends() override;
  void releaseSends() override;
  void wait(std::span<const RequestPtr> requests, const OpContext& ctx) override;
  bool poll(const std::string& during) override;
  void progress(std::chrono::milliseconds budget, int interruptFd) override;
  void wakeProgress() override;
  bool hasPending() const override;
  void abort(std::exception_ptr error) override;
  std::exception_ptr brokenError() const override;
  bool broken() const override;

 private:
  Transport& route(int peer) { return *links_[static_cast<size_t>(linkOf_[static_cast<size_t>(peer)])]; }
  void throwIfBroken() const;

  std::vector<std::unique_ptr<Transport>> links_;
  std::vector<int> linkOf_;
  std::string waitDuring_;  // what the current wait() is for (its failures say)
  std::shared_ptr<ReceiveMatcher> matcher_;
};

}  // namespace meshcomm

// RoutedTransport: a group's messages, each over the best way to its peer:
// shared memory (shm/shm_transport.h) to the ranks of this host, TCP to
// the others.
//
// A wait whose requests all go one way is that transport's own wait;
// a wait over both alternates non-blocking passes of the two, so neither
// side's transfers stall behind the other's.
//
// Thread-safety: as Transport (one driving thread at a time).
#pragma once

#include <memory>

#include "transport/shm/shm_transport.h"
#include "transport/transport.h"

namespace meshcomm {

class RoutedTransport final : public Transport {
 public:
  // REQUIRES: both speak for the same rank of the same group.
  RoutedTransport(std::unique_ptr<Transport> network, std::unique_ptr<ShmTransport> local);

  int rank() const override { return network_->rank(); }
  int size() const override { return network_->size(); }
  RequestPtr postSend(int peer, uint64_t tag, const MessageSignature& sig, const void* data,
                      size_t bytes) override;
  RequestPtr postRecv(int peer, uint64_t tag, const MessageSignature& sig, void* data,
                      size_t bytes) override;
  void wait(std::span<const RequestPtr> requests, const OpContext& ctx) override;
  void progress(std::chrono::milliseconds budget, int interruptFd) override;
  void wakeProgress() override {
    local_->wakeProgress();
    network_->wakeProgress();
  }
  bool hasPending() const override;
  void abort(std::exception_ptr error) override;
  std::exception_ptr brokenError() const override;

 private:
  Transport& route(int peer) { return local_->reaches(peer) ? *local_ : *network_; }
  void throwIfBroken() const;

  std::unique_ptr<Transport> network_;
  std::unique_ptr<ShmTransport> local_;
};

}  // namespace meshcomm

// SubsetTransport: a view of some ranks of a group as a group of their own
// (sub-rank i is parent rank ranks[i]), so an algorithm written for a whole
// group can run among, say, one leader per host. Requests go straight to
// the parent transport; tags stay the caller's business.
//
// Thread-safety: as the parent transport.
#pragma once

#include <algorithm>
#include <vector>

#include "common/check.h"
#include "transport/transport.h"

namespace meshcomm {

class SubsetTransport final : public Transport {
 public:
  // REQUIRES: ranks are distinct parent ranks and contain parent.rank().
  SubsetTransport(Transport& parent, std::vector<int> ranks)
      : parent_(parent), ranks_(std::move(ranks)) {
    rank_ = static_cast<int>(std::find(ranks_.begin(), ranks_.end(), parent_.rank()) -
                             ranks_.begin());
  }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  RequestPtr postSend(int peer, uint64_t tag, const MessageSignature& sig, const void* data,
                      size_t bytes) override {
    return parent_.postSend(ranks_[static_cast<size_t>(peer)], tag, sig, data, bytes);
  }
  RequestPtr postRecv(int peer, uint64_t tag, const MessageSignature& sig, void* data,
                      size_t bytes) override {
    return parent_.postRecv(ranks_[static_cast<size_t>(peer)], tag, sig, data, bytes);
  }
  void holdSends() override { parent_.holdSends(); }
  void releaseSends() override { parent_.releaseSends(); }
  // Subsets carry collectives, which always name their peers.
  RequestPtr postRecvAny(uint64_t, const MessageSignature&, void*, size_t) override {
    MESHCOMM_CHECK(false, "a receive from any peer on a subset of a group");
    return nullptr;
  }
  void wait(std::span<const RequestPtr> requests, const OpContext& ctx) override {
    parent_.wait(requests, ctx);
  }
  bool poll(const std::string& during) override { return parent_.poll(during); }
  void progress(std::chrono::milliseconds budget, int interruptFd) override {
    parent_.progress(budget, interruptFd);
  }
  bool hasPending() const override { return parent_.hasPending(); }
  void abort(std::exception_ptr error) override { parent_.abort(std::move(error)); }
  std::exception_ptr brokenError() const override { return parent_.brokenError(); }
  bool broken() const override { return parent_.broken(); }

 private:
  Transport& parent_;
  std::vector<int> ranks_;
  int rank_ = -1;
};

}  // namespace meshcomm

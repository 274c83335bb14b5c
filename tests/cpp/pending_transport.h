// A transport for the executor's tests (src/runtime/executor.h): rank 0 of
// a group of 2 whose posted requests wait in pending_, oldest first, until
// the test's subclass finishes them in its wait(), poll() or progress().
// abort() fails every unfinished one and leaves the group broken with the
// first error.
//
// Thread-safety: like a real transport, driven by one thread at a time.
#pragma once

#include <deque>
#include <exception>

#include "transport/transport.h"

namespace meshcomm::test {

class PendingTransport : public Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  RequestPtr postSend(int peer, uint64_t tag, const MessageSignature& sig, const void* data,
                      size_t bytes) override {
    return post(makeRequest(true, peer, tag, sig, data, bytes));
  }
  RequestPtr postRecv(int peer, uint64_t tag, const MessageSignature& sig, void* data,
                      size_t bytes) override {
    return post(makeRequest(false, peer, tag, sig, data, bytes));
  }
  RequestPtr postRecvAny(uint64_t tag, const MessageSignature& sig, void* data,
                         size_t bytes) override {
    return post(makeRequest(false, kAnyPeer, tag, sig, data, bytes));
  }
  bool hasPending() const override { return !pending_.empty(); }
  void abort(std::exception_ptr error) override {
    if (!broken_) broken_ = error;
    for (auto& r : pending_) {
      if (!r->done()) r->state = Request::State::kFailed;
    }
    pending_.clear();
  }
  std::exception_ptr brokenError() const override { return broken_; }

 protected:
  std::deque<RequestPtr> pending_;
  std::exception_ptr broken_;

 private:
  RequestPtr post(RequestPtr r) {
    pending_.push_back(r);
    return r;
  }
};

}  // namespace meshcomm::test

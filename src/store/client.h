// TCPStoreClient: one blocking connection to a TCPStoreServer.
//
// Connecting retries with exponential backoff until the deadline, so
// clients may start before the server. Each call sends one request and
// waits for its response; a connection whose response never came is
// abandoned (its stream would be out of step) and later calls fail fast.
//
// Thread-safety: calls are serialised by an internal mutex (mu_), which
// guards the connection and its buffers; interrupt() may be called from any
// thread, also while another one is blocked in a call.
#pragma once

#include <atomic>
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/fd.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "meshcomm/store.h"
#include "store/protocol.h"

namespace meshcomm {

class TCPStoreClient {
 public:
  // Connects and completes the handshake (and authentication when the
  // server asks for it). `local` marks the server's own client, which does
  // not count as a worker. Throws Timeout or StoreError.
  TCPStoreClient(std::string host, uint16_t port, const std::string& authToken,
                 bool local, const StoreLimits& limits, const Deadline& deadline);

  // Sends one request and returns the OK response's arguments. Throws
  // Timeout for a kTimeout response or a missing response, StoreError for
  // every other failure.
  std::vector<Bytes> call(store::Op op, const std::vector<std::span<const uint8_t>>& args,
                          const Deadline& deadline) EXCLUDES(mu_);

  const std::string& endpoint() const { return endpoint_; }

  // Ends a call blocked on another thread at once with StoreError, and
  // every later call too: for a thread that waits on the store and must
  // stop (the connection's stream would be out of step anyway).
  void interrupt();

 private:
  store::Frame roundTrip(store::Op op,
                         const std::vector<std::span<const uint8_t>>& args,
                         const Deadline& deadline) EXCLUDES(mu_);
  void handshake(const std::string& authToken, bool local, const Deadline& deadline)
      EXCLUDES(mu_);
  // Abandons the connection: later calls fail, saying `why`.
  void breakWith(const std::string& why) REQUIRES(mu_);

  std::string host_;
  uint16_t port_;
  std::string endpoint_;
  StoreLimits limits_;
  Mutex mu_;
  Fd fd_ GUARDED_BY(mu_);
  std::string brokenWhy_ GUARDED_BY(mu_);  // non-empty once unusable
  // interrupt() sets the flag and makes the eventfd readable; a blocked
  // call polls it beside the connection.
  std::atomic<bool> interrupted_{false};
  Fd interruptFd_;
  Bytes sendBuffer_ GUARDED_BY(mu_);
  Bytes recvBuffer_ GUARDED_BY(mu_);
  std::chrono::microseconds spin_;  // busy-poll for a response before sleeping
  int spinMisses_ GUARDED_BY(mu_) = 0;  // spins in a row that timed out
  uint32_t requestsSinceMiss_ GUARDED_BY(mu_) = 0;
};

}  // namespace meshcomm

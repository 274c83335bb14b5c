// TCPStoreServer: the store's server, one epoll thread serving every client.
//
// Each connection handles one request at a time: the next request is not
// read until the previous response has been written, so a client that
// pipelines or stops reading cannot make the server buffer without bound.
// Waiting requests (get, wait, multi_get) park the connection until their
// keys appear or their deadline passes; the server answers the timeout
// itself so the client's stream never falls out of step.
//
// Thread-safety: the constructor, destructor, port() and waitForWorkers()
// may be called from any thread. The count of arrived workers is guarded by
// workersMu_; all other state is owned by the loop thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "common/deadline.h"
#include "common/fd.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "meshcomm/store.h"
#include "store/protocol.h"

namespace meshcomm {

class TCPStoreServer {
 public:
  // Binds host:port (0 picks a free port) and starts the loop thread.
  // Throws InvalidArgument/Error when the address cannot be bound.
  TCPStoreServer(const std::string& host, uint16_t port, StoreLimits limits,
                 std::string authToken);
  // Stops the loop thread and closes every connection.
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  uint16_t port() const { return port_; }

  // Waits until `count` worker clients (not the server's own) have
  // connected and authenticated. Returns how many had arrived when it
  // returned (>= count on success, fewer on deadline).
  int waitForWorkers(int count, const Deadline& deadline) EXCLUDES(workersMu_);

 private:
  struct Connection;
  using ConnId = uint64_t;

  void loop();
  void acceptAll();
  // Accepts one pending connection and closes it at once, using the reserve
  // descriptor; returns whether a connection was refused this way.
  bool refuseWithSpare();
  void onReadable(Connection& c, uint32_t events);
  void resumeParkedInput();
  // Writes queued output until the socket would block. Returns false when
  // the connection failed.
  bool flushOutput(Connection& c);
  void onWritable(Connection& c);
  void handleFrame(Connection& c, store::Frame frame);
  void handleHandshake(Connection& c, store::Frame& frame) EXCLUDES(workersMu_);
  void handleCommand(Connection& c, store::Frame& frame);
  // Answers a parked request if its keys exist; returns whether it did.
  bool tryCompleteWaiter(Connection& c);
  void park(Connection& c, store::Frame frame, uint64_t timeoutMs);
  void unpark(Connection& c);
  void wakeWaiters(const std::string& key);
  void expireWaiters();
  void respond(Connection& c, store::Status status, const std::vector<Bytes>& args);
  void respondError(Connection& c, store::Status status, const std::string& message);
  void updateInterest(Connection& c);
  void closeConnection(ConnId id);
  int nextTimeoutMs() const;

  StoreLimits limits_;
  std::string authToken_;
  Fd listen_;
  Fd epoll_;
  Fd wake_;  // eventfd: the destructor's stop signal
  // Reserve descriptor (on /dev/null), given up to refuse a client when the
  // process is out of descriptors; see refuseWithSpare().
  Fd spare_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};

  // Loop-thread state.
  std::unordered_map<ConnId, std::unique_ptr<Connection>> conns_;
  ConnId nextId_ = 16;  // ids below are reserved for the listen and wake fds
  std::unordered_map<std::string, Bytes> data_;
  std::unordered_map<std::string, std::unordered_set<ConnId>> waitersByKey_;
  std::multimap<Deadline::Clock::time_point, ConnId> waiterDeadlines_;
  std::chrono::microseconds spin_{0};  // MESHCOMM_STORE_SPIN_US
  Bytes readBuffer_;  // shared by every connection's reads
  std::vector<ConnId> resume_;  // connections with input behind a finished wait

  Mutex workersMu_;
  CondVar workersCv_;  // waits under workersMu_
  int workers_ GUARDED_BY(workersMu_) = 0;

  std::thread thread_;
};

}  // namespace meshcomm

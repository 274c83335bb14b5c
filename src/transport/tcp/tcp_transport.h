// TcpTransport: the group's messages over TCP, one connection per peer.
//
// Connections are made lazily, the first time a request for a peer is
// posted: the lower rank of a pair always dials, the higher one accepts on
// the group's listener, so each pair gets exactly one connection without a
// tie-break. Addresses are exchanged through the group's store prefix.
// Payloads are written from and read straight into the callers' buffers.
//
// A peer's death shows up as EOF/reset on its connection, a refused dial,
// or (for peers this rank has no connection to) through the PeerMonitor,
// consulted every ~200 ms while a wait is blocked.
//
// Thread-safety: as Transport (one driving thread at a time).
#pragma once

#include <poll.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/fd.h"
#include "meshcomm/store.h"
#include "transport/inbox.h"
#include "transport/peer_monitor.h"
#include "transport/transport.h"
#include "transport/wire.h"

namespace meshcomm {

struct TcpTransportOptions {
  std::string groupName;
  int rank = 0;
  std::vector<int> worldRanks;  // by group rank, for messages
  std::string advertiseHost;    // address peers dial to reach this rank
  std::shared_ptr<Store> groupStore;  // keys private to this group
  std::shared_ptr<PeerMonitor> monitor;
  std::string authToken;        // empty: no authentication
  // Shared by the inboxes of the group's links; null: one of its own with
  // the default limit.
  std::shared_ptr<ReceiveMatcher> matcher;
  std::chrono::microseconds spin{50};  // busy-poll before blocking
  std::chrono::microseconds yield{0};  // then poll and yield the core before blocking
  // SO_SNDBUF asked for each connection (setSendBuffer); 0: the kernel's
  // autotuning.
  int sendBufferBytes = 0;
  // Renders a signature for Mismatch messages ("all_reduce float32 ...").
  std::function<std::string(const MessageSignature&, uint64_t bytes)> describeSignature;
};

class TcpTransport final : public Transport {
 public:
  // Creates the listener and publishes this rank's address in the group
  // store. Throws Error if no listener can be created.
  explicit TcpTransport(TcpTransportOptions options);
  ~TcpTransport() override;

  int rank() const override { return options_.rank; }
  int size() const override { return static_cast<int>(options_.worldRanks.size()); }

  RequestPtr postSend(int peer, uint64_t tag, const MessageSignature& sig,
                      const void* data, size_t bytes) override;
  RequestPtr postRecv(int peer, uint64_t tag, const MessageSignature& sig, void* data,
                      size_t bytes) override;
  RequestPtr postRecvAny(uint64_t tag, const MessageSignature& sig, void* data,
                         size_t bytes) override;
  // Dials `peer` or waits for it to dial, unless it left the group.
  void expectFrom(int peer) override;
  void holdSends() override;
  void releaseSends() override;
  void wait(std::span<const RequestPtr> requests, const OpContext& ctx) override;
  bool poll(const std::string& during) override;
  void progress(std::chrono::milliseconds budget, int interruptFd) override;
  void wakeProgress() override;
  bool hasPending() const override;
  void abort(std::exception_ptr error) override;
  std::exception_ptr brokenError() const override { return broken_; }
  bool broken() const override { return static_cast<bool>(broken_); }

  // Number of open peer connections (tests check for leaks).
  int connectionCount() const;

 private:
  struct Pair;

  Pair& pair(int peer);
  // The pair of a peer a request is about to be posted for. Throws the
  // transport's error when it is broken.
  Pair& pairToPost(int peer);
  void ensureConnection(Pair& p);
  void failWith(std::exception_ptr error);
  [[noreturn]] void throwBroken();
  std::string describePeer(int peer) const;

  // One round of non-blocking I/O on every active fd, waiting up to
  // timeoutMs for events (0: just poll). Returns false if interruptFd fired.
  bool pollOnce(int timeoutMs, int interruptFd, const std::string& during);
  // While a wait spins: reads and writes every active connection directly,
  // so a message that arrived is found by the call that reads it (poll(2)
  // first would make two). Returns false, doing nothing, while a
  // connection is still being accepted: then only pollOnce sees it.
  bool tryConnections(const std::string& during);
  void acceptPending();
  void readHellos(const std::string& during);
  void progressSend(Pair& p, const std::string& during);
  void progressRecv(Pair& p, const std::string& during);
  void finishDial(Pair& p, const std::string& during);
  void onHeader(Pair& p, const std::string& during);
  [[noreturn]] void peerLost(Pair& p, const std::string& why, const std::string& during);
  std::string helloPayload(int from, int to) const;

  TcpTransportOptions options_;
  Fd listener_;
  // eventfd in every poll: wakeProgress() ends a blocked wait at once (an
  // abort from another thread).
  Fd wakeFd_;
  // Before pairs_: their inboxes detach from it when they go.
  std::shared_ptr<ReceiveMatcher> matcher_;  // shared by every pair's inbox
  std::vector<std::unique_ptr<Pair>> pairs_;
  struct PendingAccept {
    Fd fd;
    wire::Header header;
    size_t headerFill = 0;
    std::string payload;
    size_t payloadFill = 0;
  };
  std::vector<PendingAccept> accepting_;
  std::vector<struct pollfd> pollFds_;
  std::vector<Pair*> pollOwners_;
  // Between holdSends() and releaseSends(): postSend queues without writing.
  bool holdingSends_ = false;
  // The last poll(2) was cut short by a signal handler.
  bool pollSawSignal_ = false;
  // The last poll(2) reported events on some descriptor.
  bool pollSawEvents_ = false;
  // Bytes written to or read from any socket so far: a wait that sees it
  // grow keeps spinning (wait()).
  uint64_t bytesMoved_ = 0;
  std::exception_ptr broken_;
  // What the current wait() is for (its failures name it), and what
  // progress() says it was doing: kept, so that neither allocates.
  std::string waitDuring_;
  const std::string backgroundDuring_ = "background progress on group " + options_.groupName;
};

}  // namespace meshcomm

// Transport: moving tagged messages between the ranks of one group.
//
// Collective algorithms post sends and receives and then wait for them; a
// transport (tcp/, shm/, or routed/ composing both) moves the bytes. Posting
// never blocks; data moves inside wait() and progress(), so every posted
// request of the group advances together (a ring's send and receive
// overlap, and a batch of point-to-point operations completes in any
// listing order).
//
// A receive matches the oldest unmatched message from its peer with the
// same tag; the message's signature and size must equal the receive's, or
// the operation fails with Mismatch. Messages with no matching receive yet
// are buffered (bounded by MESHCOMM_MAX_UNEXPECTED_BYTES). A receive from
// any peer (postRecvAny) takes the first message of its tag to arrive from
// whichever peer; a message goes to the earliest-posted receive that
// accepts it (transport/receive_matcher.h).
//
// Thread-safety: not thread-safe, except wakeProgress(). The group's
// executor guarantees one thread at a time drives a transport: the holder
// of its engine lock, which guards the transport (GUARDED_BY in
// runtime/executor.h, checked by clang's -Wthread-safety).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/deadline.h"

namespace meshcomm {

// What a message belongs to. Receivers check it so that ranks that disagree
// about an operation (a different collective, dtype, op or element count)
// fail with a Mismatch naming both sides instead of misreading bytes.
struct MessageSignature {
  uint8_t opcode = 0;    // Opcode, collectives/operations.h
  uint8_t dtype = 0;
  uint8_t reduceOp = 0;
  uint64_t opCount = 0;  // elements of the operation
  uint64_t detail = 0;   // root, or a digest of per-rank sizes
  bool operator==(const MessageSignature&) const = default;
};

// Passed to a signature describer when there is no message size to name.
inline constexpr uint64_t kNoMessageBytes = ~uint64_t{0};

// The peer of a receive from any peer until a message matches it.
inline constexpr int kAnyPeer = -1;

struct Request {
  enum class State { kPending, kDone, kFailed };
  bool isSend = false;
  int peer = -1;  // kAnyPeer: a receive from any peer, not matched yet
  uint64_t postStamp = 0;  // the receive's place in post order (ReceiveMatcher)
  uint64_t tag = 0;
  MessageSignature signature;
  uint8_t* data = nullptr;
  size_t bytes = 0;
  size_t transferred = 0;
  State state = State::kPending;
  bool done() const { return state != State::kPending; }
};
using RequestPtr = std::shared_ptr<Request>;

// A pending request over the caller's buffer: read by a send, written by a
// receive (the const_cast is never acted on for a send).
inline RequestPtr makeRequest(bool isSend, int peer, uint64_t tag, const MessageSignature& sig,
                              const void* data, size_t bytes) {
  auto r = std::make_shared<Request>();
  r->isSend = isSend;
  r->peer = peer;
  r->tag = tag;
  r->signature = sig;
  r->data = static_cast<uint8_t*>(const_cast<void*>(data));
  r->bytes = bytes;
  return r;
}

inline bool allDone(std::span<const RequestPtr> requests) {
  for (const auto& r : requests) {
    if (!r->done()) return false;
  }
  return true;
}

// Identity of the operation a wait belongs to, for error messages.
// The strings are views: the group and the operation's name outlive every
// operation (the group's name lives in the group, names are literals).
struct OpContext {
  std::string_view group;
  const char* op = "";
  uint64_t seq = 0;
  // When the call's time runs out. A group's calls start it at their first
  // wait that reads it (Deadline::afterFirstUse).
  Deadline deadline;
  std::string describe() const {
    std::string out;
    describeInto(out);
    return out;
  }
  // describe(), into `out` (whose buffer is reused).
  void describeInto(std::string& out) const {
    out = op;
    out += " #";
    out += std::to_string(seq);
    out += " on group ";
    out += group;
  }
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Queue a message to / from `peer` (a group rank other than this one).
  // The buffer must stay valid until the request is done. Throws the
  // group's error if the transport is already broken.
  virtual RequestPtr postSend(int peer, uint64_t tag, const MessageSignature& sig,
                              const void* data, size_t bytes) = 0;
  virtual RequestPtr postRecv(int peer, uint64_t tag, const MessageSignature& sig,
                              void* data, size_t bytes) = 0;
  // Queues a receive of the first message with `tag` from any peer; once
  // done, the request's `peer` names the sender. For point-to-point tags
  // only (collectives always know their peers). Peers that left the group
  // cleanly are not waited for; a peer lost otherwise breaks the transport.
  virtual RequestPtr postRecvAny(uint64_t tag, const MessageSignature& sig, void* data,
                                 size_t bytes) = 0;
  // Makes sure a message from `peer` can arrive before a receive naming
  // it is posted (postRecvAny calls it for every peer; a routed transport
  // for each peer on the link that carries it). TCP connects; a transport
  // always connected does nothing.
  virtual void expectFrom(int /*peer*/) {}

  // Between holdSends() and releaseSends(), posted sends may stay queued
  // so that the messages for one peer leave together: TCP writes a peer's
  // whole queue with one sendmsg, and the peer wakes once for all of them
  // rather than once per message. Holding never delays a wait: wait() and
  // progress() write whatever is queued. Transports that gain nothing from
  // it ignore it. releaseSends() throws what postSend would.
  virtual void holdSends() {}
  virtual void releaseSends() {}

  // Drives progress until every request is done. Throws Timeout at
  // ctx.deadline (naming the peers still awaited), PeerLost, Mismatch or
  // Aborted; any error breaks the transport and is reported to the peers.
  virtual void wait(std::span<const RequestPtr> requests, const OpContext& ctx) = 0;

  // One pass over whatever is pending, never blocking: whether anything
  // moved. Throws what breaks the transport.
  virtual bool poll(const std::string& during) = 0;

  // Drives progress on whatever is pending for up to `budget`, returning
  // early when something completes or `interruptFd` becomes readable.
  // Errors break the transport (they are rethrown by later calls).
  virtual void progress(std::chrono::milliseconds budget, int interruptFd) = 0;
  // Ends a progress() call sleeping on another thread, for transports that
  // sleep on more than interruptFd; call after making interruptFd readable.
  // Thread-safe.
  virtual void wakeProgress() {}

  virtual bool hasPending() const = 0;

  // Breaks the transport with `error` (if not already broken), tells the
  // connected peers why, and fails every pending request.
  virtual void abort(std::exception_ptr error) = 0;
  // The error that broke the transport, or null.
  virtual std::exception_ptr brokenError() const = 0;
  // Whether brokenError() is not null; asked before every operation, so a
  // transport answers it without building an exception_ptr.
  virtual bool broken() const { return brokenError() != nullptr; }
};

// Holds a transport's sends for a scope (Transport::holdSends). release()
// writes them; a scope left by an exception releases them without
// throwing, since the transport that threw is broken and says so next.
class SendHold {
 public:
  explicit SendHold(Transport& transport) : transport_(&transport) { transport.holdSends(); }
  ~SendHold() {
    if (transport_ == nullptr) return;
    try {
      transport_->releaseSends();
    } catch (...) {
    }
  }
  SendHold(const SendHold&) = delete;
  SendHold& operator=(const SendHold&) = delete;
  void release() { std::exchange(transport_, nullptr)->releaseSends(); }

 private:
  Transport* transport_;
};

}  // namespace meshcomm

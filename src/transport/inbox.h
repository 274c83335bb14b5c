// Inbox: the messages arriving from one peer, matched with the receives
// posted for them (the matching rules of transport.h), and with the
// receives from any peer that the transport's ReceiveMatcher holds.
//
// A transport feeds it one message at a time, in the order the peer sent
// them: arrive() with the message's envelope, then the payload, in pieces,
// into space(), then finish(). The payload goes straight into the matched
// receive's buffer, or, when no receive is posted yet, into a buffer of
// its own that a later post() takes (and that post() steers the rest of
// the message away from, if the message is still arriving).
//
// Thread-safety: as the transport that owns it (one driving thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/receive_matcher.h"
#include "transport/transport.h"

namespace meshcomm {

// What a message says about itself.
struct Envelope {
  uint64_t tag = 0;
  MessageSignature signature;
  uint64_t bytes = 0;
};

class Inbox {
 public:
  using Describe = std::function<std::string(const MessageSignature&, uint64_t bytes)>;

  // `peer` is the group rank the messages come from; `peerName` ("rank 1
  // (world rank 1)") and `describe` (may be empty) are for error messages.
  // Registers with `matcher`, which must outlive the inbox.
  Inbox(int peer, std::string peerName, const Describe& describe, ReceiveMatcher& matcher);
  ~Inbox();
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  int peer() const { return peer_; }

  // Matches `r` with the oldest buffered message of its tag, or queues it.
  // Throws Mismatch if that message, or a buffered message of the same
  // collective call, disagrees with it.
  void post(const RequestPtr& r, const std::string& during);

  // A new message begins: it goes to the earliest-posted receive for its
  // tag, from this peer or from any. Throws Mismatch if it disagrees with
  // that receive (or with one of the same collective call), and Error if it
  // would take the buffered bytes past the budget.
  void arrive(const Envelope& e, const std::string& during);
  bool midMessage() const { return arriving_; }
  // Where the next payload bytes of the current message go (empty once the
  // payload is complete).
  std::span<uint8_t> space();
  void arrived(size_t n);
  // The current message is complete: its receive, if any, is done.
  void finish();

  // Whether a receive naming this peer waits for a message.
  bool hasPosted() const { return !posted_.empty(); }
  // Whether a receive from any peer waits (this peer's messages can match it).
  bool anyPending() const { return matcher_.anyPending(); }
  // Fails every posted receive and the one arriving (the transport broke),
  // and the receives from any peer, and drops the buffered messages,
  // returning their bytes to the budget.
  void failAll();

  // For ReceiveMatcher::postAny: the arrival stamp of the first buffered
  // message with `tag` (UINT64_MAX if none), and handing it to `r`.
  uint64_t firstArrival(uint64_t tag) const;
  void claimBuffered(const RequestPtr& r, const std::string& during);

 private:
  struct Buffered {
    Envelope envelope;
    uint64_t arrival = 0;  // ReceiveMatcher::stampArrival()
    std::vector<uint8_t> data;
    size_t fill = 0;
  };

  void checkMatch(const Request& r, const Envelope& e, const std::string& during) const;
  // Hands buffered message `it` to `r` (the rest of it too, if it is still
  // arriving).
  void handOver(std::deque<std::shared_ptr<Buffered>>::iterator it, const RequestPtr& r,
                const std::string& during);
  // The message begins arriving into `r`'s buffer.
  void arriveInto(const RequestPtr& r, const Envelope& e, const std::string& during);

  int peer_;
  std::string peerName_;
  const Describe& describe_;
  ReceiveMatcher& matcher_;
  std::deque<RequestPtr> posted_;                    // not matched yet, in post order
  std::deque<std::shared_ptr<Buffered>> buffered_;  // not matched yet, in arrival order
  bool arriving_ = false;
  RequestPtr target_;                   // the arriving message's receive, or
  std::shared_ptr<Buffered> spill_;     // its buffer
};

}  // namespace meshcomm

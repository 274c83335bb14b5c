// TcpTransport's state for one peer: the connection, the queue of messages
// going out, and the message coming in. Private to the tcp folder: the
// transport (tcp_transport.cc) drives it, the connection set-up
// (tcp_connect.cc) opens it.
//
// Thread-safety: owned by one TcpTransport; not thread-safe.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "common/socket.h"
#include "transport/inbox.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"

namespace meshcomm {

struct TcpTransport::Pair {
  enum class State { kIdle, kAwaitingDial, kConnected, kClosed };

  Pair(int peerRank, const std::string& peerName, const Inbox::Describe& describe,
       ReceiveMatcher& matcher)
      : peer(peerRank),
        sendingTo("sending to " + peerName),
        receivingFrom("receiving from " + peerName),
        inbox(peerRank, peerName, describe, matcher) {}

  int peer;
  // What a failure while posting to or from this peer says the rank was
  // doing: made once, since every post passes one along.
  const std::string sendingTo;
  const std::string receivingFrom;
  State state = State::kIdle;
  Fd fd;
  // Outgoing messages in post order; the front one may be half written.
  struct Outgoing {
    RequestPtr request;
    wire::Header header;
    size_t headerSent = 0;
  };
  std::deque<Outgoing> sends;
  // The arriving message: its header, then its payload, which the inbox
  // places (a data message) or abortData takes (an abort frame).
  wire::Header inHeader;
  size_t inHeaderFill = 0;
  Inbox inbox;
  bool inAbort = false;
  Bytes abortData;
  size_t abortFill = 0;
  bool hangup = false;  // the peer closed its side; read out what is left
  // Bytes read past a header, not yet taken: [aheadBegin, aheadEnd). They
  // are always taken before progressRecv returns (wantsRead() holds while
  // any are left), so no message waits here while poll(2) sleeps.
  std::unique_ptr<uint8_t[]> ahead;
  size_t aheadBegin = 0;
  size_t aheadEnd = 0;

  bool inPayload() const { return inAbort || inbox.midMessage(); }
  bool midMessage() const { return inHeaderFill > 0 || inPayload() || aheadBegin < aheadEnd; }
  bool wantsRead() const {
    return inbox.hasPosted() || inbox.anyPending() || midMessage() || hangup;
  }
  bool active() const { return !sends.empty() || wantsRead(); }
  // An abort frame may only go between messages, never inside one.
  bool betweenSends() const {
    return sends.empty() || (sends.front().headerSent == 0 && sends.front().request->transferred == 0);
  }
};

// Whether a non-blocking socket call failed only for want of data or room.
inline bool wouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

}  // namespace meshcomm

// Inbox (transport/inbox.h) on its own: a message that arrives before its
// receive is buffered within the budget and handed over on post(); once the
// transport breaks, failAll() fails the receives and gives the buffered
// bytes back. With several inboxes on one ReceiveMatcher: receives from any
// peer take the first message to arrive, and a message goes to the
// earliest-posted receive that accepts it.
#include "transport/inbox.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "meshcomm/error.h"

namespace meshcomm {
namespace {

Inbox::Describe describe = [](const MessageSignature&, uint64_t bytes) {
  return std::to_string(bytes) + " bytes";
};

// Feeds a whole message of `payload` with `tag` into `inbox`.
void deliver(Inbox& inbox, uint64_t tag, const std::vector<uint8_t>& payload) {
  inbox.arrive(Envelope{tag, MessageSignature{}, payload.size()}, "test");
  std::span<uint8_t> space = inbox.space();
  ASSERT_EQ(space.size(), payload.size());
  std::memcpy(space.data(), payload.data(), payload.size());
  inbox.arrived(payload.size());
  inbox.finish();
}

RequestPtr receive(uint64_t tag, std::vector<uint8_t>& into) {
  auto r = std::make_shared<Request>();
  r->tag = tag;
  r->data = into.data();
  r->bytes = into.size();
  return r;
}

TEST(Inbox, EarlyMessageIsBufferedThenHandedToItsReceive) {
  ReceiveMatcher matcher{1000};
  Inbox inbox(1, "rank 1", describe, matcher);
  deliver(inbox, 7, std::vector<uint8_t>(100, 0xAB));
  EXPECT_EQ(matcher.used(), 100u);
  std::vector<uint8_t> out(100);
  RequestPtr r = receive(7, out);
  inbox.post(r, "test");
  EXPECT_EQ(r->state, Request::State::kDone);
  EXPECT_EQ(out, std::vector<uint8_t>(100, 0xAB));
  EXPECT_EQ(matcher.used(), 0u);
}

TEST(Inbox, FailAllFailsReceivesAndReleasesBufferedBytes) {
  ReceiveMatcher matcher{1000};
  Inbox inbox(1, "rank 1", describe, matcher);
  deliver(inbox, 1, std::vector<uint8_t>(300, 1));
  deliver(inbox, 2, std::vector<uint8_t>(200, 2));
  std::vector<uint8_t> out(10);
  RequestPtr pending = receive(3, out);
  inbox.post(pending, "test");
  EXPECT_EQ(matcher.used(), 500u);
  inbox.failAll();
  EXPECT_EQ(pending->state, Request::State::kFailed);
  EXPECT_EQ(matcher.used(), 0u);
  EXPECT_FALSE(inbox.hasPosted());
}

TEST(Inbox, FailAllMidMessageKeepsTheArrivingBufferWritable) {
  ReceiveMatcher matcher{1000};
  Inbox inbox(1, "rank 1", describe, matcher);
  inbox.arrive(Envelope{4, MessageSignature{}, 64}, "test");
  inbox.arrived(16);
  inbox.failAll();
  EXPECT_EQ(matcher.used(), 0u);
  std::span<uint8_t> rest = inbox.space();
  ASSERT_EQ(rest.size(), 48u);
  std::memset(rest.data(), 0, rest.size());
  inbox.arrived(rest.size());
  inbox.finish();
}

TEST(Inbox, BufferingBeyondTheBudgetIsRefused) {
  ReceiveMatcher matcher{100};
  Inbox inbox(1, "rank 1", describe, matcher);
  EXPECT_THROW(inbox.arrive(Envelope{1, MessageSignature{}, 101}, "test"), Error);
  EXPECT_EQ(matcher.used(), 0u);
}

// A receive from any peer takes, of the buffered messages with its tag, the
// one that arrived first, whichever inbox holds it, and learns its sender.
TEST(ReceiveMatcher, AnyPeerTakesTheFirstBufferedArrival) {
  ReceiveMatcher matcher{1000};
  Inbox one(1, "rank 1", describe, matcher), two(2, "rank 2", describe, matcher);
  deliver(two, 5, std::vector<uint8_t>(8, 2));
  deliver(one, 5, std::vector<uint8_t>(8, 1));
  deliver(one, 6, std::vector<uint8_t>(8, 9));  // another tag: never taken by tag 5
  std::vector<uint8_t> first(8), second(8);
  RequestPtr a = receive(5, first), b = receive(5, second);
  a->peer = b->peer = kAnyPeer;
  matcher.postAny(a, "test");
  matcher.postAny(b, "test");
  EXPECT_EQ(a->state, Request::State::kDone);
  EXPECT_EQ(a->peer, 2);
  EXPECT_EQ(first, std::vector<uint8_t>(8, 2));
  EXPECT_EQ(b->state, Request::State::kDone);
  EXPECT_EQ(b->peer, 1);
  EXPECT_EQ(second, std::vector<uint8_t>(8, 1));
  EXPECT_EQ(matcher.used(), 8u);  // tag 6 stays buffered
  EXPECT_FALSE(matcher.anyPending());
}

// A message goes to the earliest-posted receive that accepts it: a receive
// naming the peer posted first beats a later one from any peer, and the
// other way round.
TEST(ReceiveMatcher, EarliestPostedReceiveTakesTheMessage) {
  ReceiveMatcher matcher{1000};
  Inbox one(1, "rank 1", describe, matcher), two(2, "rank 2", describe, matcher);
  std::vector<uint8_t> fromTwo(4), fromAny(4), laterFromTwo(4);
  RequestPtr specific = receive(3, fromTwo);
  specific->peer = 2;
  two.post(specific, "test");
  RequestPtr any = receive(3, fromAny);
  any->peer = kAnyPeer;
  matcher.postAny(any, "test");
  EXPECT_TRUE(matcher.anyPending());
  deliver(two, 3, std::vector<uint8_t>(4, 20));
  EXPECT_EQ(specific->state, Request::State::kDone);
  EXPECT_EQ(any->state, Request::State::kPending);
  EXPECT_EQ(fromTwo, std::vector<uint8_t>(4, 20));
  // Now the receive from any peer is the earliest posted one.
  RequestPtr later = receive(3, laterFromTwo);
  later->peer = 2;
  two.post(later, "test");
  deliver(two, 3, std::vector<uint8_t>(4, 21));
  EXPECT_EQ(any->state, Request::State::kDone);
  EXPECT_EQ(any->peer, 2);
  EXPECT_EQ(fromAny, std::vector<uint8_t>(4, 21));
  EXPECT_EQ(later->state, Request::State::kPending);
  deliver(one, 3, std::vector<uint8_t>(4, 10));  // rank 1's message: nobody takes it yet
  EXPECT_EQ(matcher.used(), 4u);
  deliver(two, 3, std::vector<uint8_t>(4, 22));
  EXPECT_EQ(later->state, Request::State::kDone);
  EXPECT_EQ(laterFromTwo, std::vector<uint8_t>(4, 22));
}

// A message still arriving when a receive from any peer is posted goes on
// into that receive's buffer; one whose size disagrees is a Mismatch.
TEST(ReceiveMatcher, AnyPeerTakesAMessageMidArrivalAndChecksIt) {
  ReceiveMatcher matcher{1000};
  Inbox one(1, "rank 1", describe, matcher);
  one.arrive(Envelope{4, MessageSignature{}, 6}, "test");
  std::span<uint8_t> space = one.space();
  ASSERT_EQ(space.size(), 6u);
  std::memset(space.data(), 7, 3);
  one.arrived(3);
  std::vector<uint8_t> out(6);
  RequestPtr r = receive(4, out);
  r->peer = kAnyPeer;
  matcher.postAny(r, "test");
  EXPECT_EQ(r->peer, 1);
  EXPECT_EQ(r->state, Request::State::kPending);
  space = one.space();
  ASSERT_EQ(space.size(), 3u);
  std::memset(space.data(), 8, 3);
  one.arrived(3);
  one.finish();
  EXPECT_EQ(r->state, Request::State::kDone);
  EXPECT_EQ(out, (std::vector<uint8_t>{7, 7, 7, 8, 8, 8}));
  EXPECT_EQ(matcher.used(), 0u);

  std::vector<uint8_t> small(2);
  RequestPtr wrong = receive(4, small);
  wrong->peer = kAnyPeer;
  matcher.postAny(wrong, "test");
  EXPECT_THROW(one.arrive(Envelope{4, MessageSignature{}, 6}, "test"), Mismatch);
}

// A broken transport fails the receives from any peer too.
TEST(ReceiveMatcher, FailAllFailsReceivesFromAnyPeer) {
  ReceiveMatcher matcher{1000};
  Inbox one(1, "rank 1", describe, matcher);
  std::vector<uint8_t> out(4);
  RequestPtr r = receive(1, out);
  r->peer = kAnyPeer;
  matcher.postAny(r, "test");
  one.failAll();
  EXPECT_EQ(r->state, Request::State::kFailed);
  EXPECT_FALSE(matcher.anyPending());
}

}  // namespace
}  // namespace meshcomm

// Inbox (transport/inbox.h) on its own: a message that arrives before its
// receive is buffered within the budget and handed over on post(); once the
// transport breaks, failAll() fails the receives and gives the buffered
// bytes back.
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
  UnexpectedBudget budget{1000, 0};
  Inbox inbox("rank 1", describe, budget);
  deliver(inbox, 7, std::vector<uint8_t>(100, 0xAB));
  EXPECT_EQ(budget.used, 100u);
  std::vector<uint8_t> out(100);
  RequestPtr r = receive(7, out);
  inbox.post(r, "test");
  EXPECT_EQ(r->state, Request::State::kDone);
  EXPECT_EQ(out, std::vector<uint8_t>(100, 0xAB));
  EXPECT_EQ(budget.used, 0u);
}

TEST(Inbox, FailAllFailsReceivesAndReleasesBufferedBytes) {
  UnexpectedBudget budget{1000, 0};
  Inbox inbox("rank 1", describe, budget);
  deliver(inbox, 1, std::vector<uint8_t>(300, 1));
  deliver(inbox, 2, std::vector<uint8_t>(200, 2));
  std::vector<uint8_t> out(10);
  RequestPtr pending = receive(3, out);
  inbox.post(pending, "test");
  EXPECT_EQ(budget.used, 500u);
  inbox.failAll();
  EXPECT_EQ(pending->state, Request::State::kFailed);
  EXPECT_EQ(budget.used, 0u);
  EXPECT_FALSE(inbox.hasPosted());
}

TEST(Inbox, FailAllMidMessageKeepsTheArrivingBufferWritable) {
  UnexpectedBudget budget{1000, 0};
  Inbox inbox("rank 1", describe, budget);
  inbox.arrive(Envelope{4, MessageSignature{}, 64}, "test");
  inbox.arrived(16);
  inbox.failAll();
  EXPECT_EQ(budget.used, 0u);
  std::span<uint8_t> rest = inbox.space();
  ASSERT_EQ(rest.size(), 48u);
  std::memset(rest.data(), 0, rest.size());
  inbox.arrived(rest.size());
  inbox.finish();
}

TEST(Inbox, BufferingBeyondTheBudgetIsRefused) {
  UnexpectedBudget budget{100, 0};
  Inbox inbox("rank 1", describe, budget);
  EXPECT_THROW(inbox.arrive(Envelope{1, MessageSignature{}, 101}, "test"), Error);
  EXPECT_EQ(budget.used, 0u);
}

}  // namespace
}  // namespace meshcomm

// The shared-memory pieces on their own, in one process (shm_views.h):
// a named segment's life in /dev/shm, a domain's layout check, the abort
// line (the first abort wins and every view raises its error with the same
// type), and point-to-point through ShmTransport between two views.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "shm_views.h"
#include "transport_drive.h"
#include "transport/wire.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

// Every test must leave /dev/shm as it found it.
class ShmTest : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_TRUE(shmEntriesOfThisProcess().empty()) << "left in /dev/shm: " << shmEntriesOfThisProcess()[0];
  }
};

using ShmSegmentTest = ShmTest;

// The creator's segment is visible by name until the creator goes; the
// memory lives on in the other mappings.
TEST_F(ShmSegmentTest, OpenSeesTheCreatorsMemoryAndTheCreatorUnlinksTheName) {
  const std::string name = uniqueShmName();
  auto created = std::make_unique<ShmSegment>(ShmSegment::create(name, 8192));
  EXPECT_TRUE(shmEntryExists(name));
  EXPECT_EQ(created->data()[100], 0) << "a new segment is zero-filled";
  ShmSegment opened = ShmSegment::open(name, 8192);
  std::memcpy(created->data() + 100, "hello", 5);
  EXPECT_EQ(std::memcmp(opened.data() + 100, "hello", 5), 0);
  created.reset();
  EXPECT_FALSE(shmEntryExists(name));
  EXPECT_EQ(std::memcmp(opened.data() + 100, "hello", 5), 0);
}

TEST_F(ShmSegmentTest, WrongSizeAndTakenOrMissingNamesAreClearErrors) {
  const std::string name = uniqueShmName();
  ShmSegment created = ShmSegment::create(name, 8192);
  std::string what;
  EXPECT_EQ(catchError([&] { ShmSegment::open(name, 4096); }, &what), Caught::kOtherError);
  EXPECT_NE(what.find("holds 8192 bytes, expected 4096"), std::string::npos) << what;
  EXPECT_EQ(catchError([&] { ShmSegment::create(name, 8192); }, &what), Caught::kOtherError);
  EXPECT_NE(what.find("cannot create /dev/shm" + name), std::string::npos) << what;
  EXPECT_NE(what.find("MESHCOMM_SHM=0"), std::string::npos) << what;
  created.unlink();
  EXPECT_FALSE(shmEntryExists(name));
  EXPECT_EQ(catchError([&] { ShmSegment::open(name, 8192); }, &what), Caught::kOtherError);
  EXPECT_NE(what.find("cannot open"), std::string::npos) << what;
}

using ShmDomainTest = ShmTest;

// The name goes as soon as every local rank has attached, so a crash of
// any of them later cannot leave the segment behind.
TEST_F(ShmDomainTest, LastRankToAttachUnlinksTheName) {
  const ShmGeometry g;
  const std::string name = uniqueShmName();
  ShmDomain first(viewOptions(0, g), createFormattedSegment(name, g));
  EXPECT_TRUE(shmEntryExists(name));
  ShmDomain second(viewOptions(1, g), openSegment(name, g));
  EXPECT_FALSE(shmEntryExists(name));
  EXPECT_EQ(first.pidOf(1), ::getpid());
}

TEST_F(ShmDomainTest, ViewThatDisagreesAboutTheLayoutIsRefused) {
  const ShmGeometry g;
  const std::string name = uniqueShmName();
  ShmDomain first(viewOptions(0, g), createFormattedSegment(name, g));
  ShmGeometry other = g;
  other.chunkBytes = g.chunkBytes / 2;  // same segment size, another layout
  std::string what;
  EXPECT_EQ(catchError([&] { ShmDomain second(viewOptions(1, other), openSegment(name, g)); }, &what),
            Caught::kOtherError);
  EXPECT_NE(what.find("does not have the expected layout"), std::string::npos) << what;
  // The refused view never attached, so the name stays until its creator
  // goes (TearDown checks that it does).
  EXPECT_TRUE(shmEntryExists(name));
}

struct AbortCase {
  const char* name;
  wire::AbortReason reason;
  Caught raises;
};
void PrintTo(const AbortCase& c, std::ostream* os) { *os << c.name; }

class ShmAbortLine : public ShmTest, public ::testing::WithParamInterface<AbortCase> {};

// One view raises the abort line; every view throws the error it names.
// The first abort wins: a second one (another reason) changes nothing.
TEST_P(ShmAbortLine, EveryViewRaisesTheSameType) {
  TwoShmViews views;
  EXPECT_EQ(views.view(1).abortError(), nullptr);
  EXPECT_EQ(catchError([&] { views.view(1).throwIfAborted(); }), Caught::kNone);
  views.view(0).abort(GetParam().reason, "rank 0 gave up");
  views.view(1).abort(wire::AbortReason::kAborted, "too late to count");
  for (int local : {0, 1}) {
    std::string what;
    EXPECT_EQ(catchError([&] { views.view(local).throwIfAborted(); }, &what), GetParam().raises)
        << "view " << local << ": " << what;
    EXPECT_EQ(what, "rank 0 gave up");
    EXPECT_NE(views.view(local).abortError(), nullptr);
  }
}

INSTANTIATE_TEST_SUITE_P(Reasons, ShmAbortLine,
                         ::testing::Values(AbortCase{"PeerLost", wire::AbortReason::kPeerLost, Caught::kPeerLost},
                                           AbortCase{"Timeout", wire::AbortReason::kTimeout, Caught::kTimeout},
                                           AbortCase{"Mismatch", wire::AbortReason::kMismatch, Caught::kMismatch},
                                           AbortCase{"Aborted", wire::AbortReason::kAborted, Caught::kAborted}),
                         [](const ::testing::TestParamInfo<AbortCase>& info) { return std::string(info.param.name); });

// A long message cannot reach past the abort line's end into the next
// part of the segment.
TEST_F(ShmDomainTest, AbortMessageIsTruncatedToTheLine) {
  TwoShmViews views;
  views.view(0).abort(wire::AbortReason::kTimeout, std::string(100000, 'x'));
  std::string what;
  EXPECT_EQ(catchError([&] { views.view(1).throwIfAborted(); }, &what), Caught::kTimeout);
  EXPECT_GT(what.size(), 500u);
  EXPECT_LT(what.size(), 2000u);
}

// ---- rounds in parts of the slot area ----------------------------------------------------

// A writer whose rounds need nobody's data (a broadcast's root) runs up to
// parts-1 rounds ahead of its reader, and never writes into a part the
// reader has not finished: operations of 2, 16 and kSlotParts parts in a
// row (the most, which small rounds rotate through), the reader pausing now
// and then, every byte of every round checked.
TEST_F(ShmDomainTest, WriterRunsAheadByPartsButNeverOverUnreadRounds) {
  TwoShmViews views;
  const MessageSignature sig{2, 1, 0, 64, 0};
  constexpr int kOps = 9;
  constexpr size_t kRounds = 2 * ShmDomain::kSlotParts + 8;  // every part comes back twice
  const size_t partsOf[] = {2, 16, ShmDomain::kSlotParts};
  auto value = [](int op, size_t round, size_t i) { return static_cast<uint8_t>(op * 131 + round * 7 + i); };
  // Runs `round(op, o, parts, k)` for every round of every operation, as
  // one local rank.
  auto run = [&](int local, const char* role, auto round) {
    for (int o = 0; o < kOps; ++o) {
      const OpContext ctx = opContext("shm_test_group", role, std::chrono::seconds(20));
      ShmOp op(views.view(local), ctx, sig);
      for (size_t k = 0; k < kRounds; ++k) round(op, o, partsOf[o % 3], k);
    }
  };
  std::atomic<size_t> roundsRead{0};
  std::vector<size_t> maxLead(kOps, 0);
  std::thread writer([&] {
    size_t written = 0;
    run(0, "writer", [&](ShmOp& op, int o, size_t parts, size_t k) {
      uint8_t* part = op.begin(parts);
      for (size_t i = 0; i < op.slotPartBytes(parts); ++i) part[i] = value(o, k, i);
      op.publish();
      ++written;
      maxLead[o] = std::max(maxLead[o], written - roundsRead.load());
    });
  });
  size_t wrong = 0;
  run(1, "reader", [&](ShmOp& op, int o, size_t parts, size_t k) {
    op.beginReading(parts);
    op.publish();
    op.wait(0);
    if (k % 8 == 3) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const uint8_t* part = op.slot(0);
    for (size_t i = 0; i < op.slotPartBytes(parts); ++i) wrong += part[i] != value(o, k, i);
    roundsRead.fetch_add(1);
  });
  writer.join();
  EXPECT_EQ(wrong, 0u) << "the writer overwrote rounds its reader had not read";
  for (int o = 0; o < kOps; ++o) {
    // A round is counted read only after the reader checked it, so the
    // writer may be one past its part count here, never more.
    EXPECT_LE(maxLead[o], partsOf[o % 3] + 1) << "operation " << o;
  }
  EXPECT_GT(maxLead[kOps - 1], 3u) << "a writer of " << ShmDomain::kSlotParts
                                   << " parts never ran ahead of its paused reader";
}

// Rounds in which every rank writes and reads every other (all_reduce,
// all_gather), with part counts that change from round to round as call
// sizes do: no round may land on the part the round before wrote, or each
// rank would wait for the other to enter the round before writing into it.
// Every byte read is checked against what its writer wrote that round.
TEST_F(ShmDomainTest, AllWritingRoundsOfChangingPartCountsNeverWaitForEachOther) {
  TwoShmViews views;
  const MessageSignature sig{2, 1, 0, 64, 0};
  const size_t partsOf[] = {2, ShmDomain::kSlotParts, 16, ShmDomain::kSlotParts, 4, 2, 8};
  constexpr size_t kRounds = 3 * ShmDomain::kSlotParts;
  constexpr size_t kBytes = 256;  // what each round checks of its part
  auto value = [](int writer, size_t round, size_t i) {
    return static_cast<uint8_t>(writer * 97 + round * 13 + i);
  };
  std::atomic<size_t> wrong{0};
  auto rank = [&](int local) {
    const OpContext ctx = opContext("shm_test_group", "every rank writes", std::chrono::seconds(5));
    ShmOp op(views.view(local), ctx, sig);
    for (size_t k = 0; k < kRounds; ++k) {
      // The counts follow an odd cycle, so every pair of counts meets in
      // both orders and on both parities of the round.
      const size_t parts = partsOf[k % std::size(partsOf)];
      uint8_t* part = op.begin(parts);
      for (size_t i = 0; i < kBytes; ++i) part[i] = value(local, k, i);
      op.publish();
      op.waitAll();
      const uint8_t* theirs = op.slot(1 - local);
      for (size_t i = 0; i < kBytes; ++i) wrong += theirs[i] != value(1 - local, k, i);
    }
  };
  std::exception_ptr failed;
  std::thread other([&] {
    try {
      rank(1);
    } catch (...) {
      failed = std::current_exception();
    }
  });
  EXPECT_NO_THROW(rank(0));
  other.join();
  EXPECT_FALSE(failed) << "rank 1 failed (a round waited for its own part)";
  EXPECT_EQ(wrong.load(), 0u);
}

// ---- point-to-point through the rings --------------------------------------------------

OpContext context(std::chrono::milliseconds timeout) {
  return opContext("shm_test_group", "test exchange", timeout);
}

const MessageSignature kSig{4, 1, 0, 16, 0};

class ShmTransportPair : public ShmTest {
 protected:
  TwoShmViews views_;
  std::unique_ptr<ShmTransport> rank0_ = shmTransportOf(views_.view(0));
  std::unique_ptr<ShmTransport> rank1_ = shmTransportOf(views_.view(1));
};

// Messages of up to 256 rings' worth both ways at once, each side on its
// own thread: the sender refills the ring as the receiver drains it.
TEST_F(ShmTransportPair, MessagesLargerThanTheRingBothWays) {
  std::string what0, what1;
  auto [c0, c1] = exchangeBothWays(*rank0_, *rank1_, {0, 1, 63, 64, 4096, 4097, size_t{1} << 20}, &what0, &what1);
  EXPECT_EQ(c0, Caught::kNone) << what0;
  EXPECT_EQ(c1, Caught::kNone) << what1;
}

// A receive whose signature differs: Mismatch naming both sides; the abort
// line makes the sender's next call fail with the same Mismatch.
TEST_F(ShmTransportPair, MismatchFailsBothViews) {
  MessageSignature other = kSig;
  other.opCount = 17;
  Bytes out(16, 1), in(16, 0);
  RequestPtr s = rank0_->postSend(1, 1, kSig, out.data(), out.size());
  std::string what;
  Caught c = catchError(
      [&] {
        RequestPtr r = rank1_->postRecv(0, 1, other, in.data(), in.size());
        rank1_->wait({&r, 1}, context(5s));
      },
      &what);
  EXPECT_EQ(c, Caught::kMismatch) << what;
  EXPECT_NE(what.find("rank 0 (world rank 20) is not running the same operation"), std::string::npos) << what;
  EXPECT_NE(what.find("16 elements"), std::string::npos) << what;
  EXPECT_NE(what.find("17 elements"), std::string::npos) << what;
  std::string senderWhat;
  EXPECT_EQ(catchError([&] { rank0_->postSend(1, 2, kSig, out.data(), out.size()); }, &senderWhat),
            Caught::kMismatch);
  EXPECT_NE(senderWhat.find("world rank 21 failed"), std::string::npos) << senderWhat;
}

// A receive nobody sends to: Timeout at the deadline naming the peer.
TEST_F(ShmTransportPair, WaitPastItsDeadlineTimesOutNamingThePeer) {
  Bytes in(16);
  std::string what;
  const auto t0 = std::chrono::steady_clock::now();
  Caught c = catchError(
      [&] {
        RequestPtr r = rank1_->postRecv(0, 1, kSig, in.data(), in.size());
        rank1_->wait({&r, 1}, context(300ms));
      },
      &what);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(c, Caught::kTimeout) << what;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 3s);
  EXPECT_NE(what.find("rank 0 (world rank 20) to send"), std::string::npos) << what;
  // The timeout went through the abort line: the other view fails too.
  EXPECT_EQ(catchError([&] { rank0_->postSend(1, 1, kSig, in.data(), in.size()); }), Caught::kTimeout);
}

}  // namespace
}  // namespace meshcomm::test

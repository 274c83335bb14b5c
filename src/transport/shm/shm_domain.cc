#include "transport/shm/shm_domain.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <thread>

#include "common/check.h"
#include "common/interrupt.h"
#include "common/mix.h"
#include "meshcomm/error.h"
#include "transport/failure.h"

namespace meshcomm {
namespace {

constexpr uint64_t kMagic = 0x6873'6d6d'6f63'686dULL;  // "mhcommsh"
constexpr uint32_t kVersion = 5;
constexpr size_t kLine = 64;
constexpr size_t kPage = 4096;
// How often a waiting rank looks beyond its own flags (pids, store).
constexpr auto kLivenessEvery = std::chrono::milliseconds(50);
constexpr auto kStoreEvery = std::chrono::milliseconds(200);

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

struct alignas(kLine) Header {
  uint64_t magic;
  uint32_t version;
  uint32_t localSize;
  uint64_t slotBytes;
  uint64_t chunkBytes;
  uint64_t ringBytes;
  std::atomic<uint32_t> mapped;  // local ranks attached so far
};

// Sleepers register here before futex-waiting on `generation`, so a
// publisher makes the wake-up system call only when someone sleeps.
//
// The publisher stores its round and then reads `sleepers`; a sleeper adds
// itself and then reads the round. Each side needs a full barrier between
// its store and its load, or both can miss the other. A fence on every
// publish costs a cache-line round trip (the peers hold the flag line), a
// good part of a small collective; so when every local rank could register
// for membarrier(GLOBAL_EXPEDITED), only the sleeper pays: its membarrier
// call runs a barrier on every CPU that runs a registered process.
// `publisherFences` is set by any rank that could not register.
struct alignas(kLine) WakeLine {
  std::atomic<uint32_t> generation;
  std::atomic<uint32_t> sleepers;
  std::atomic<uint32_t> publisherFences;
};

struct alignas(kLine) AbortLine {
  std::atomic<uint32_t> claimed;  // 0 -> 1 by the first aborting rank
  std::atomic<uint32_t> raised;   // 1 once reason and message are written
  uint8_t reason;
  char message[kLine * 16 - 12];  // room for a Mismatch naming both signatures
};

// A local rank's process, and the collective call it entered last: its
// sequence number + 1 (0: none yet; written last, like a flag's round)
// and signature. A rank that waits long compares its peers' with its own.
struct alignas(kLine) MemberLine {
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> entryKind;  // opcode | dtype << 8 | reduceOp << 16
  std::atomic<uint64_t> entrySeq;
  std::atomic<uint64_t> entryCount;
  std::atomic<uint64_t> entryDetail;
  // Set when the rank lets go of the domain (its group destroyed, the rank
  // leaving the job): a goodbye, so a rank waiting for it fails at once
  // even while its process lives on.
  std::atomic<int32_t> departed;
};

// A ring's two counters, each written by one side only.
struct RingLines {
  alignas(kLine) std::atomic<uint64_t> written;
  alignas(kLine) std::atomic<uint64_t> consumed;
};
static_assert(sizeof(RingLines) == 2 * kLine);

}  // namespace

// One per rank and round modulo kDepth. The round is written last (release)
// and read first (acquire); everything else is plain data it publishes.
struct alignas(kLine) ShmDomain::FlagLine {
  std::atomic<uint64_t> round;
  uint8_t opcode;
  uint8_t dtype;
  uint8_t reduceOp;
  uint8_t pad;
  uint32_t history;
  uint64_t opCount;
  uint64_t detail;
  uint8_t inlineData[ShmDomain::kInlineBytes];
};
static_assert(sizeof(ShmDomain::FlagLine) == kLine);

namespace {

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// The history digest after an operation with signature `sig`. Every call
// on one host computes it, so it mixes whole words: byte by byte (FNV-1a)
// it cost about 80 instructions of an 8-byte all_reduce's 1,860.
uint32_t historyAfter(uint32_t history, const MessageSignature& sig) {
  const uint64_t head = uint64_t{history} | uint64_t{sig.opcode} << 32 | uint64_t{sig.dtype} << 40 |
                        uint64_t{sig.reduceOp} << 48;
  const uint64_t h = mixWord(mixWord(mixWord(head) ^ sig.opCount) ^ sig.detail);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

long membarrier(int cmd) { return ::syscall(SYS_membarrier, cmd, 0, 0); }

// Whether this process can take part in the asymmetric barrier.
bool registerForMembarrier() {
  long supported = membarrier(MEMBARRIER_CMD_QUERY);
  if (supported < 0 || (supported & MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0) return false;
  return membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
}

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

// Whether `pid` still runs (a zombie does not: it has exited, and only its
// parent has not collected it yet).
bool processAlive(int32_t pid) {
  if (pid <= 0) return true;  // not attached yet: nothing to judge by
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return true;
  char state = text[close + 2];
  return state != 'Z' && state != 'X';
}

}  // namespace

// Where everything is, for this domain's local size and slot size.
struct ShmDomain::Layout {
  Header header;
  WakeLine wake;
  AbortLine abort;
  // Followed by: MemberLine[localSize], FlagLine[kDepth * localSize],
  // page padding, each rank's kDepth cells, each rank's two slots,
  // RingLines[localSize^2] (page-padded), then the rings' data, localSize^2 rings (from * localSize + to; the
  // rings of a rank to itself are never touched, so they cost no memory).
  static MemberLine* members(Layout* l) {
    return reinterpret_cast<MemberLine*>(reinterpret_cast<uint8_t*>(l) + sizeof(Layout));
  }
  static FlagLine* flags(Layout* l) {
    return reinterpret_cast<FlagLine*>(members(l) + l->header.localSize);
  }
  static size_t cellsOffset(int localSize) {
    return roundUp(sizeof(Layout) + sizeof(MemberLine) * static_cast<size_t>(localSize) +
                       sizeof(FlagLine) * kDepth * static_cast<size_t>(localSize),
                   kPage);
  }
  static size_t slotsOffset(int localSize) {
    return cellsOffset(localSize) + kCellBytes * kDepth * static_cast<size_t>(localSize);
  }
  static size_t ringLinesOffset(int localSize, size_t slotBytes) {
    return slotsOffset(localSize) + 2 * roundUp(slotBytes, kPage) * static_cast<size_t>(localSize);
  }
  static size_t ringDataOffset(int localSize, size_t slotBytes) {
    const auto pairs = static_cast<size_t>(localSize) * static_cast<size_t>(localSize);
    return ringLinesOffset(localSize, slotBytes) + roundUp(sizeof(RingLines) * pairs, kPage);
  }
};

size_t ShmDomain::segmentBytes(int localSize, size_t slotBytes, size_t ringBytes) {
  const auto pairs = static_cast<size_t>(localSize) * static_cast<size_t>(localSize);
  return Layout::ringDataOffset(localSize, slotBytes) + roundUp(ringBytes * pairs, kPage);
}

void ShmDomain::format(uint8_t* base, int localSize, size_t slotBytes, size_t chunkBytes,
                       size_t ringBytes) {
  auto* l = new (base) Layout{};
  for (int i = 0; i < localSize; ++i) new (Layout::members(l) + i) MemberLine{};
  l->header.magic = kMagic;
  l->header.version = kVersion;
  l->header.localSize = static_cast<uint32_t>(localSize);
  l->header.slotBytes = slotBytes;
  l->header.chunkBytes = chunkBytes;
  l->header.ringBytes = ringBytes;
  auto* flags = reinterpret_cast<FlagLine*>(Layout::members(l) + localSize);
  for (size_t i = 0; i < kDepth * static_cast<size_t>(localSize); ++i) new (flags + i) FlagLine{};
  auto* rings = reinterpret_cast<RingLines*>(base + Layout::ringLinesOffset(localSize, slotBytes));
  for (int i = 0; i < localSize * localSize; ++i) new (rings + i) RingLines{};
}

ShmDomain::ShmDomain(ShmDomainOptions options, ShmSegment segment)
    : options_(std::move(options)),
      segment_(std::move(segment)),
      layout_(reinterpret_cast<Layout*>(segment_.data())) {
  const Header& h = layout_->header;
  if (h.magic != kMagic || h.version != kVersion ||
      h.localSize != static_cast<uint32_t>(localSize()) || h.slotBytes != options_.slotBytes ||
      h.chunkBytes != options_.chunkBytes || h.ringBytes != options_.ringBytes) {
    throw Error("shared-memory segment " + segment_.name() + " of group " + options_.groupName +
                " does not have the expected layout (another meshcomm version, or ranks that "
                "disagree about MESHCOMM_SHM_SLOT_BYTES or MESHCOMM_SHM_P2P_BYTES)");
  }
  // This rank's slot area, which its copies write from the first call on:
  // mapped now, its pages cost no fault per page in the first large calls
  // (the SlotStores of host/shm time those copies, and faults would read as
  // a slow placement). The segment's pages are reserved already
  // (ShmSegment::create), so this takes no more memory.
  const size_t slots = static_cast<size_t>(slotPart(options_.localRank, 0, 2) - segment_.data());
  segment_.prefaultForWriting(slots, 2 * roundUp(options_.slotBytes, kPage));
  // Before this rank can publish or sleep, so no publisher skips a fence
  // that a sleeper relies on.
  if (!registerForMembarrier()) layout_->wake.publisherFences.store(1);
  Layout::members(layout_)[options_.localRank].pid.store(static_cast<int32_t>(::getpid()),
                                                         std::memory_order_release);
  // The last rank to attach removes the name: from here on a crash of any
  // rank cannot leave the segment behind.
  if (layout_->header.mapped.fetch_add(1) + 1 == static_cast<uint32_t>(localSize())) {
    segment_.unlink();
  }
}

ShmDomain::~ShmDomain() {
  Layout::members(layout_)[options_.localRank].departed.store(1, std::memory_order_release);
  layout_->wake.generation.fetch_add(1);
  futex(&layout_->wake.generation, FUTEX_WAKE, INT_MAX, nullptr);
}

pid_t ShmDomain::pidOf(int local) const {
  return Layout::members(layout_)[local].pid.load(std::memory_order_acquire);
}

size_t ShmDomain::slotPartBytes(size_t parts) const {
  return 2 * roundUp(options_.slotBytes, kPage) / parts;
}

uint8_t* ShmDomain::slotPart(int local, uint64_t round, size_t parts) const {
  const size_t area = 2 * roundUp(options_.slotBytes, kPage);
  return segment_.data() + Layout::slotsOffset(localSize()) + area * static_cast<size_t>(local) +
         partIndex(round, parts) * slotPartBytes(parts);
}

uint8_t* ShmDomain::claimSlotPart(uint64_t round, size_t parts, const OpContext& ctx) {
  MESHCOMM_CHECK(parts >= 2 && parts <= kSlotParts && kSlotParts % parts == 0,
                 "a slot area splits into 2 to " << kSlotParts
                                                  << " parts, a power of two; asked for " << parts);
  const size_t span = kSlotParts / parts;
  uint64_t* written = slotWrittenIn_ + partIndex(round, parts) * span;
  uint64_t last = 0;
  for (size_t i = 0; i < span; ++i) last = std::max(last, written[i]);
  if (last > 0) awaitAllReached(last + 1, ctx);
  std::fill(written, written + span, round);
  return slotPart(options_.localRank, round, parts);
}

ShmDomain::Ring ShmDomain::ring(int fromLocal, int toLocal) const {
  const auto index = static_cast<size_t>(fromLocal) * static_cast<size_t>(localSize()) +
                     static_cast<size_t>(toLocal);
  uint8_t* base = segment_.data();
  auto* lines =
      reinterpret_cast<RingLines*>(base + Layout::ringLinesOffset(localSize(), options_.slotBytes));
  uint8_t* data = base + Layout::ringDataOffset(localSize(), options_.slotBytes) +
                  index * options_.ringBytes;
  return Ring{&lines[index].written, &lines[index].consumed, data, options_.ringBytes};
}

ShmDomain::FlagLine& ShmDomain::flag(int local, uint64_t round) const {
  return Layout::flags(layout_)[kDepth * static_cast<size_t>(local) + round % kDepth];
}

uint8_t* ShmDomain::inlineData(int local, uint64_t round) const { return flag(local, round).inlineData; }

uint8_t* ShmDomain::cell(int local, uint64_t round) const {
  return segment_.data() + Layout::cellsOffset(localSize()) +
         (kDepth * static_cast<size_t>(local) + round % kDepth) * kCellBytes;
}

void ShmDomain::publish(uint64_t round, const MessageSignature& sig, uint32_t history,
                        const uint8_t* inlineData) {
  FlagLine& f = flag(options_.localRank, round);
  if (inlineData != nullptr) std::memcpy(f.inlineData, inlineData, kInlineBytes);
  f.opcode = sig.opcode;
  f.dtype = sig.dtype;
  f.reduceOp = sig.reduceOp;
  f.history = history;
  f.opCount = sig.opCount;
  f.detail = sig.detail;
  f.round.store(round, std::memory_order_release);
  notify();
}

void ShmDomain::announce(uint64_t seq, const MessageSignature& sig) {
  MemberLine& m = Layout::members(layout_)[options_.localRank];
  // Readers check the sequence number before and after the fields.
  m.entrySeq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  m.entryKind.store(sig.opcode | (uint32_t{sig.dtype} << 8) | (uint32_t{sig.reduceOp} << 16),
                    std::memory_order_relaxed);
  m.entryCount.store(sig.opCount, std::memory_order_relaxed);
  m.entryDetail.store(sig.detail, std::memory_order_relaxed);
  m.entrySeq.store(seq + 1, std::memory_order_release);
  entrySeq_ = seq + 1;
  entrySig_ = sig;
}

void ShmDomain::checkEntries(const OpContext& ctx) {
  if (entrySeq_ == 0) return;
  MemberLine* members = Layout::members(layout_);
  for (int i = 0; i < localSize(); ++i) {
    if (i == options_.localRank) continue;
    MemberLine& m = members[i];
    if (m.entrySeq.load(std::memory_order_acquire) != entrySeq_) continue;
    const uint32_t kind = m.entryKind.load(std::memory_order_relaxed);
    MessageSignature theirs{static_cast<uint8_t>(kind), static_cast<uint8_t>(kind >> 8),
                            static_cast<uint8_t>(kind >> 16), m.entryCount.load(std::memory_order_relaxed),
                            m.entryDetail.load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);
    // Changed meanwhile: that rank has moved on to a later call.
    if (m.entrySeq.load(std::memory_order_relaxed) != entrySeq_) continue;
    // Only the collective itself: ranks that disagree about its arguments
    // fail where their data meets, or in the agreement step of rooted and
    // split-size calls, with a message naming the argument.
    if (theirs.opcode == entrySig_.opcode) continue;
    auto describe = [&](const MessageSignature& sig) {
      if (options_.describeSignature) return options_.describeSignature(sig, kNoMessageBytes);
      return "opcode " + std::to_string(sig.opcode);
    };
    std::string message =
        ctx.describe() + ": " + describeRank(i) + " on this host is not running the same operation: its call #" +
        std::to_string(entrySeq_ - 1) + " on this group is " + describe(theirs) + ", this rank's is " +
        describe(entrySig_) + "; every rank of the group must make the same collective calls in the same order";
    failOp(wire::AbortReason::kMismatch, message, std::make_exception_ptr(Mismatch(message)));
  }
}

void ShmDomain::notify() {
  // Pairs with the barrier in waitSlow (WakeLine): either the sleeper sees
  // the new state, or this rank sees the sleeper and wakes it.
  if (layout_->wake.publisherFences.load(std::memory_order_relaxed) != 0) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  if (layout_->wake.sleepers.load(std::memory_order_relaxed) != 0) {
    layout_->wake.generation.fetch_add(1);
    futex(&layout_->wake.generation, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

bool ShmDomain::abortRaised() const {
  return layout_->abort.raised.load(std::memory_order_acquire) != 0;
}

std::exception_ptr ShmDomain::abortError() const {
  if (!abortRaised()) return nullptr;
  try {
    throwIfAborted();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

void ShmDomain::fail(std::exception_ptr error) {
  failOp(abortReasonOf(error), errorMessageOf(error), error);
}

void ShmDomain::throwIfAborted() const {
  const AbortLine& a = layout_->abort;
  if (a.raised.load(std::memory_order_acquire) == 0) return;
  std::string text(a.message, strnlen(a.message, sizeof(a.message)));
  throwAbortReason(static_cast<wire::AbortReason>(a.reason), text);
}

void ShmDomain::abort(wire::AbortReason reason, const std::string& message) noexcept {
  AbortLine& a = layout_->abort;
  uint32_t expected = 0;
  if (a.claimed.compare_exchange_strong(expected, 1)) {
    a.reason = static_cast<uint8_t>(reason);
    size_t n = std::min(message.size(), sizeof(a.message) - 1);
    std::memcpy(a.message, message.data(), n);
    a.message[n] = '\0';
    a.raised.store(1, std::memory_order_release);
  }
  layout_->wake.generation.fetch_add(1);
  futex(&layout_->wake.generation, FUTEX_WAKE, INT_MAX, nullptr);
}

void ShmDomain::failOp(wire::AbortReason reason, const std::string& message,
                       std::exception_ptr error) {
  abort(reason, "world rank " +
                    std::to_string(options_.worldRanks[static_cast<size_t>(options_.localRank)]) +
                    " failed: " + message);
  std::rethrow_exception(error);
}

uint64_t ShmDomain::wordOf(int local, uint64_t round) const { return flag(local, round).opCount; }

void ShmDomain::waitFor(int local, uint64_t round, const MessageSignature* sig,
                        uint32_t history, const OpContext& ctx, bool countIsWord) {
  FlagLine& f = flag(local, round);
  auto reached = [&] { return f.round.load(std::memory_order_acquire) >= round; };
  if (!reached()) {
    waitUntil(reached, ctx,
              [&] {
                return describeRank(local) +
                       " on this host (shared memory); it has not reached this operation";
              },
              [local](int i) { return i == local; });
  }
  if (sig == nullptr) return;
  MessageSignature theirs{f.opcode, f.dtype, f.reduceOp, countIsWord ? sig->opCount : f.opCount, f.detail};
  if (theirs == *sig && f.history == history) return;
  if (theirs == *sig) {
    std::string message =
        ctx.describe() + ": " + describeRank(local) +
        " is not running the same operations: its earlier calls on this group differ from this "
        "rank's (for example a broadcast called with different roots); every rank of the group "
        "must make the same collective calls in the same order";
    failOp(wire::AbortReason::kMismatch, message, std::make_exception_ptr(Mismatch(message)));
  }
  auto describe = [&](const MessageSignature& s) {
    if (options_.describeSignature) return options_.describeSignature(s, kNoMessageBytes);
    std::ostringstream d;
    d << "opcode " << int(s.opcode) << ", " << s.opCount << " elements";
    return d.str();
  };
  std::string message =
      ctx.describe() + ": " + describeRank(local) + " is not running the same operation: it runs " +
      describe(theirs) + ", this rank runs " + describe(*sig) +
      "; every rank of the group must make the same collective calls in the same order";
  failOp(wire::AbortReason::kMismatch, message, std::make_exception_ptr(Mismatch(message)));
}

void ShmDomain::waitSlow(const std::function<bool()>& ready, const OpContext& ctx,
                         const std::function<std::string()>& awaited, const Needed& needed) {
  const auto yieldUntil = Deadline::Clock::now() + options_.yield;
  auto nextLiveness = Deadline::Clock::now() + kLivenessEvery;
  bool signalled = false;
  for (;;) {
    if (ready()) return;
    throwIfAborted();
    if (interruptRequested(signalled)) {
      try {
        throwInterrupted(ctx.describe(), describeRank(options_.localRank));
      } catch (const Interrupted& e) {
        failOp(wire::AbortReason::kAborted, e.what(), std::current_exception());
      }
    }
    signalled = false;
    auto now = Deadline::Clock::now();
    if (now >= nextLiveness || ctx.deadline.expired()) {
      checkLiveness(ctx, awaited, needed);
      nextLiveness = now + kLivenessEvery;
    }
    if (now < yieldUntil && contention_.yieldAllowed(now)) {
      // Yields that keep finding other processes on this core send this
      // wait, and the next second's, to sleep (core_contention.h). Timed
      // apart from the liveness check above, which may ask the store.
      const auto yieldStart = Deadline::Clock::now();
      sched_yield();
      const auto yieldEnd = Deadline::Clock::now();
      contention_.noteYield(yieldStart, yieldEnd);
      if (contention_.yieldAllowed(yieldEnd)) continue;
    }
    // Bounded, so liveness and the deadline are still checked while asleep.
    signalled = sleepOnce(ready, std::min<std::chrono::milliseconds>(ctx.deadline.remaining(),
                                                                     kLivenessEvery));
  }
}

bool ShmDomain::sleepOnce(const std::function<bool()>& ready, std::chrono::milliseconds timeout) {
  WakeLine& w = layout_->wake;
  w.sleepers.fetch_add(1);
  // Unregistered however this ends: ready() may throw (a ring poll that
  // finds a corrupt header), and a stale registration would cost every
  // publisher a wake-up call from then on.
  struct Registration {
    std::atomic<uint32_t>& sleepers;
    ~Registration() { sleepers.fetch_sub(1); }
  } registration{w.sleepers};
  if (w.publisherFences.load() != 0 || membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // membarrier failed after registering: no publisher can be trusted
    // to have fenced, so make them all do it from now on.
    w.publisherFences.store(1);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  uint32_t generation = w.generation.load();
  bool signalled = false;
  if (!ready() && layout_->abort.raised.load(std::memory_order_acquire) == 0) {
    timespec ts{0, static_cast<long>(std::clamp<int64_t>(timeout.count(), 1, 999)) * 1000000L};
    signalled = futex(&w.generation, FUTEX_WAIT, generation, &ts) != 0 && errno == EINTR;
  }
  return signalled;
}

std::string ShmDomain::describeRank(int local) const {
  return "rank " + std::to_string(groupRank(local)) + " (world rank " +
         std::to_string(options_.worldRanks[static_cast<size_t>(local)]) + ")";
}

void ShmDomain::checkPeers(const std::string& during, const Needed& needed) {
  MemberLine* members = Layout::members(layout_);
  for (int i = 0; i < localSize(); ++i) {
    if (i == options_.localRank || !needed(i)) continue;
    int32_t pid = members[i].pid.load(std::memory_order_acquire);
    const bool departed = members[i].departed.load(std::memory_order_acquire) != 0;
    if (!departed && processAlive(pid)) continue;
    // A rank that failed an operation raised the abort line before it left
    // or died; this rank's waits may have last looked at the line before
    // that. Its reason (a mismatch, say) is the group's error, not its
    // departure, so every rank reports the same one.
    throwIfAborted();
    if (departed) {
      std::string message = during + ": " + describeRank(i) + " left the group (it destroyed "
                            "the group or left the job: destroy_process_group or exit)";
      failOp(wire::AbortReason::kPeerLost, message, std::make_exception_ptr(PeerLost(message)));
    }
    std::string how = options_.monitor
                          ? options_.monitor->howGone(options_.worldRanks[static_cast<size_t>(i)])
                          : "exited or was killed";
    std::string message = during + ": " + describeRank(i) + ", process " + std::to_string(pid) +
                          " on this host, " + how;
    failOp(wire::AbortReason::kPeerLost, message, std::make_exception_ptr(PeerLost(message)));
  }
  auto now = Deadline::Clock::now();
  if (options_.monitor && now >= nextStoreCheck_) {
    nextStoreCheck_ = now + kStoreEvery;
    try {
      options_.monitor->check(during);
    } catch (const Error& e) {
      failOp(abortReasonOf(std::current_exception()), e.what(), std::current_exception());
    }
  }
}

void ShmDomain::checkLiveness(const OpContext& ctx, const std::function<std::string()>& awaited,
                              const Needed& needed) {
  const std::string during = ctx.describe();
  checkEntries(ctx);
  checkPeers(during, needed);
  if (ctx.deadline.expired()) {
    std::string message = timedOutMessage(during, awaited());
    failOp(wire::AbortReason::kTimeout, message, std::make_exception_ptr(Timeout(message)));
  }
}

uint8_t* ShmOp::begin(size_t parts) {
  beginReading(parts);
  return d_.claimSlotPart(d_.round_, parts, ctx_);
}

void ShmOp::beginReading(size_t parts) {
  start();
  wordRound_ = false;
  uint64_t round = ++d_.round_;
  parts_ = parts;
  // The flag line of this round was last used kDepth rounds ago.
  if (round >= ShmDomain::kDepth) d_.awaitAllReached(round - ShmDomain::kDepth + 1, ctx_);
}

uint8_t* ShmOp::beginCell() {
  start();
  wordRound_ = false;
  uint64_t round = ++d_.round_;
  // Flag lines and cells are reused every kDepth rounds, so a rank can run
  // up to kDepth-1 rounds ahead of the slowest reader.
  if (round >= ShmDomain::kDepth) d_.awaitAllReached(round - ShmDomain::kDepth + 1, ctx_);
  return d_.cell(d_.localRank(), round);
}

void ShmOp::start() {
  if (begun_) return;
  begun_ = true;
  history_ = d_.history_;
  d_.history_ = historyAfter(history_, sig_);
}

void ShmDomain::awaitAllReached(uint64_t round, const OpContext& ctx) {
  if (allReached_ >= round) return;
  for (int i = 0; i < localSize(); ++i) {
    if (i != options_.localRank) waitFor(i, round, nullptr, 0, ctx);
  }
  allReached_ = round;
}

void ShmOp::publish() {
  d_.publish(d_.round_, sig_, history_, staged_ ? staging_ : nullptr);
  staged_ = false;
}

void ShmOp::publishWord(uint64_t word) {
  MessageSignature carrying = sig_;
  carrying.opCount = word;
  d_.publish(d_.round_, carrying, history_, staged_ ? staging_ : nullptr);
  staged_ = false;
  wordRound_ = true;
}

void ShmOp::wait(int local) {
  if (local != d_.localRank()) d_.waitFor(local, d_.round_, &sig_, history_, ctx_, wordRound_);
}

void ShmOp::waitAll() {
  if (waitedRound_ == d_.round_) return;
  for (int i = 0; i < d_.localSize(); ++i) wait(i);
  d_.allReached_ = d_.round_;
  waitedRound_ = d_.round_;
}

void ShmOp::mismatch(const std::string& message) {
  std::string text = ctx_.describe() + ": " + message;
  d_.failOp(wire::AbortReason::kMismatch, text, std::make_exception_ptr(Mismatch(text)));
}

}  // namespace meshcomm

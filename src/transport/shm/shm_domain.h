// ShmDomain: the ranks of one group that share a host, talking through one
// shared-memory segment in rounds.
//
// Every local rank owns a slot (double-buffered), kDepth flag lines and
// kDepth small cells. A round is: write into your own slot (or cell),
// publish the round number in your flag line, wait for the flags of the
// ranks you read from, read their slots. Every buffer has a single writer,
// so no locks; and because a rank publishes round k+1 only after it has
// read everything of round k, a writer may reuse the buffers of round k
// once every flag shows k+1: no trailing barrier. A slot comes back every
// second round (or, for rounds that split the two slots into more parts,
// every `parts` rounds: ShmOp::begin), a cell and a flag line every kDepth
// rounds. The depth matters where some ranks wait for nobody (a
// broadcast's root, a reduce's leaves): those run up to kDepth-1 small
// rounds ahead of their readers, so a loop of them costs each rank its own
// work, not a rendezvous with the slowest one.
// Payloads of up to kInlineBytes travel in the flag line itself, so the
// tiniest collectives move one cache line per rank.
//
// A flag also carries the operation's signature: a rank that reads a peer
// running a different collective (or another size, dtype, op or root) fails
// with Mismatch instead of reading garbage.
//
// Waiting spins with pause, then yields, then sleeps on a futex in the
// segment (shared, not private: the waiters are different processes). When
// the host's ranks outnumber its usable CPUs the spin is cut short, so a
// rank that waits gives its core to the rank it waits for. While waiting
// it checks, from time to time, that the awaited processes are alive (pid),
// the group's abort line, the store's lost-rank list, and the deadline; any
// failure raises the abort line, so every local rank fails within
// microseconds instead of at its own deadline.
//
// The segment also holds one byte ring per ordered pair of local ranks,
// for point-to-point messages (shm_transport.h); they share the abort
// line, the wake-up futex and the liveness checks with the rounds.
//
// Thread-safety: one operation at a time (the group's executor), except
// notify(), which any thread may call (it touches only the segment's
// atomics).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/host_domain.h"
#include "transport/peer_monitor.h"
#include "transport/shm/core_contention.h"
#include "transport/shm/segment.h"
#include "transport/transport.h"
#include "transport/wire.h"

namespace meshcomm {

struct ShmDomainOptions {
  std::string groupName;
  int localRank = 0;
  std::vector<int> groupRanks;  // group rank of each local rank
  std::vector<int> worldRanks;  // world rank of each local rank
  size_t slotBytes = 0;         // per rank and round buffer
  size_t chunkBytes = 0;        // what most collectives use of a slot (at most slotBytes)
  size_t ringBytes = 0;         // per ordered pair of ranks (point-to-point)
  // Spin (pause) this long before yielding; yield this long before sleeping
  // (or less: a yield that kept the thread off its core for a time slice
  // sends it to sleep at once).
  std::chrono::microseconds spin{50};
  std::chrono::microseconds yield{1000};
  std::shared_ptr<PeerMonitor> monitor;  // may be null (tests)
  std::function<std::string(const MessageSignature&, uint64_t)> describeSignature;
};

class ShmDomain final : public HostDomain {
 public:
  static constexpr char kKind[] = "shm";
  static constexpr size_t kInlineBytes = 32;
  // Flag lines (and cells) per rank: rounds that use no slot may run this
  // many rounds deep. 16 cut a loop of 8-byte broadcasts over 8 ranks on 2
  // cores from about 50 us to 5 us a call, 64 to 2.3 us (docs/tuning.md).
  static constexpr size_t kDepth = 64;
  // Each rank's small buffer per flag line, for payloads of small rounds.
  static constexpr size_t kCellBytes = 4096;
  // A rank's slot area (its two slots) is tracked in this many equal
  // parts: the most a round may split it into (ShmOp::begin). Small rounds
  // rotate through that many places (host/shm/rounds.h, partsFor): on the
  // Intel host of docs/benchmarks.md, a 2-rank all_reduce of 1-4 KiB took
  // 1.13-1.19x the time with 16 as with 256, and 32, 64 or 256 alike.
  static constexpr size_t kSlotParts = 64;
  struct FlagLine;

  // Bytes of the segment for `localSize` ranks with `slotBytes` slots and
  // `ringBytes` rings (a multiple of 64).
  static size_t segmentBytes(int localSize, size_t slotBytes, size_t ringBytes);
  // Lays out a fresh (zero-filled) segment; the creator calls this before
  // telling anyone its name. The sizes are recorded so that every rank can
  // check that it agrees with them.
  static void format(uint8_t* base, int localSize, size_t slotBytes, size_t chunkBytes,
                     size_t ringBytes);

  // A single-writer, single-reader byte ring from one local rank to
  // another. `written` and `consumed` count bytes since the group began;
  // the writer owns the first, the reader the second, each on its own
  // cache line.
  struct Ring {
    std::atomic<uint64_t>* written;
    std::atomic<uint64_t>* consumed;
    uint8_t* data;
    size_t bytes;
  };
  Ring ring(int fromLocal, int toLocal) const;
  // Wakes the local ranks sleeping in a wait: call after changing shared
  // state one of them may be waiting for (a ring's counters).
  void notify();
  // The local ranks a wait depends on. Only their processes are checked:
  // a rank that finished its part may exit while others still run theirs.
  using Needed = std::function<bool(int local)>;
  // Waits until ready() returns true, as the rounds wait for a flag:
  // spin, yield, sleep, and fail (raising the abort line) on an abort, an
  // interrupt, a dead needed local rank, a lost rank or the deadline.
  // `awaited` names what the rank was waiting for, for the timeout message.
  // The spin is inlined with `ready`: a handoff that ends in it costs no
  // indirect call and no std::function.
  template <class Ready, class Awaited, class NeededRanks>
  void waitUntil(const Ready& ready, const OpContext& ctx, const Awaited& awaited,
                 const NeededRanks& needed) {
    if (ready() || spin(ready)) return;
    waitSlow(ready, ctx, awaited, needed);
  }
  // Sleeps until a local rank calls notify(), `timeout` (at most 999 ms)
  // passes, or a signal arrives (then returns true), unless ready() or the
  // abort line says not to sleep at all. For a thread that has nothing to
  // spin on: background progress waiting for a peer to move a ring.
  bool sleepOnce(const std::function<bool()>& ready, std::chrono::milliseconds timeout);
  // Fails (raising the abort line) if the process of a needed local rank
  // is gone or the store reports a lost rank; `during` opens the message.
  void checkPeers(const std::string& during, const Needed& needed);
  // The error of the raised abort line, or null.
  std::exception_ptr abortError() const override;
  // Whether the abort line is raised (abortError() is not null).
  bool abortRaised() const;
  // This rank failed mid-operation: raises the abort line with `error`'s
  // reason and message, so every local rank fails too, and rethrows it.
  [[noreturn]] void fail(std::exception_ptr error);

  // Attaches to a formatted segment: checks its header, records this
  // process's pid and unlinks the name once every local rank has mapped it.
  ShmDomain(ShmDomainOptions options, ShmSegment segment);
  ~ShmDomain() override;
  ShmDomain(const ShmDomain&) = delete;
  ShmDomain& operator=(const ShmDomain&) = delete;

  const char* kind() const override { return kKind; }
  int localRank() const override { return options_.localRank; }
  int localSize() const override { return static_cast<int>(options_.groupRanks.size()); }
  size_t slotBytes() const { return options_.slotBytes; }
  size_t chunkBytes() const { return options_.chunkBytes; }
  // Group rank of a local rank.
  int groupRank(int local) const override { return options_.groupRanks[static_cast<size_t>(local)]; }
  // "rank G (world rank W)" of a local rank.
  std::string describeRank(int local) const;

  // Single-copy transfers (transport/shm/single_copy.h) work between every
  // pair of local ranks; the set-up decides it for all of them at once.
  bool singleCopy() const { return singleCopy_; }
  void setSingleCopy(bool on) { singleCopy_ = on; }
  // The process of a local rank (attached ranks only).
  pid_t pidOf(int local) const;

  // Records, in this rank's member line, that it entered collective call
  // `seq` of the group with signature `sig` (a few stores). A rank that
  // waits long compares the calls its local peers entered with its own: a
  // peer in the same call of another collective is a Mismatch, even when
  // the two calls never wait on each other here (a hierarchical all_reduce
  // waiting on this host for a rank whose all_gather waits over TCP).
  void announce(uint64_t seq, const MessageSignature& sig) override;

  // Raises the abort line (first caller wins) and wakes every sleeper, so
  // the other local ranks fail with this error too. Never throws.
  void abort(wire::AbortReason reason, const std::string& message) noexcept override;
  // Throws what the abort line says, if it is raised.
  void throwIfAborted() const override;

 private:
  friend class ShmOp;
  struct Layout;

  FlagLine& flag(int local, uint64_t round) const;
  // Which of `parts` parts of a slot area `round` uses: one in the half
  // `round % 2`, the halves' parts taken in turn. Consecutive rounds thus
  // never share a part whatever their part counts (a round whose part the
  // previous round wrote would wait for every rank to enter it, and ranks
  // that all write would wait for each other), and a run of rounds with
  // one count takes every part once before it comes back to the first.
  static size_t partIndex(uint64_t round, size_t parts) {
    return static_cast<size_t>(round % 2) * (parts / 2) + static_cast<size_t>(round / 2 % (parts / 2));
  }
  // Part partIndex(round, parts) of a local rank's slot area.
  uint8_t* slotPart(int local, uint64_t round, size_t parts) const;
  size_t slotPartBytes(size_t parts) const;
  // This rank's part for `round`, once every rank has read what this rank
  // last wrote there.
  uint8_t* claimSlotPart(uint64_t round, size_t parts, const OpContext& ctx);
  uint8_t* cell(int local, uint64_t round) const;
  uint8_t* inlineData(int local, uint64_t round) const;
  // Waits until every local rank has published `round` (or later).
  void awaitAllReached(uint64_t round, const OpContext& ctx);
  // inlineData, if not null, is copied into the flag line first.
  // `history`: the digest of the operations this rank ran before the
  // current one (see ShmOp).
  void publish(uint64_t round, const MessageSignature& sig, uint32_t history,
               const uint8_t* inlineData);
  // Waits until local rank `local` has published `round`; with `sig`,
  // checks that it is running the same operation after the same history.
  // `countIsWord`: the round's flags carry a word of each rank's in place
  // of the signature's count (ShmOp::publishWord), which is then not
  // compared.
  void waitFor(int local, uint64_t round, const MessageSignature* sig, uint32_t history,
               const OpContext& ctx, bool countIsWord = false);
  // The word `local` published with `round` (ShmOp::publishWord); read it
  // only after waiting for that round.
  uint64_t wordOf(int local, uint64_t round) const;
  // Spins on ready() with pause for options_.spin (the clock read every 16
  // pauses, about half a microsecond: a fast handoff does not pay for it).
  // Returns whether it became true.
  template <class Ready>
  bool spin(const Ready& ready) {
    if (options_.spin.count() <= 0) return false;
    Deadline::Clock::time_point spinUntil{};
    for (int n = 1;; ++n) {
      cpuRelax();
      if (ready()) return true;
      if ((n & 15) != 0) continue;
      throwIfAborted();
      const auto now = Deadline::Clock::now();
      if (n == 16) spinUntil = now + options_.spin;
      if (now >= spinUntil) return false;
    }
  }
  static void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
  }
  // The slow path of the waits: yields, sleeps and checks liveness.
  void waitSlow(const std::function<bool()>& ready, const OpContext& ctx,
                const std::function<std::string()>& awaited, const Needed& needed);
  // Fails with Mismatch if a local rank announced this rank's call as
  // another collective.
  void checkEntries(const OpContext& ctx);
  void checkLiveness(const OpContext& ctx, const std::function<std::string()>& awaited,
                     const Needed& needed);
  [[noreturn]] void failOp(wire::AbortReason reason, const std::string& message,
                           std::exception_ptr error);

  ShmDomainOptions options_;
  ShmSegment segment_;
  Layout* layout_;
  uint64_t round_ = 0;        // the last round this rank started
  uint32_t history_ = 0;      // digest of the signatures of every operation begun
  uint64_t allReached_ = 0;   // every local rank is known to have published this round
  // The round in which this rank last wrote each kSlotParts-th of its slot
  // area (0: never). Every rank has read it once they all reach the next.
  uint64_t slotWrittenIn_[kSlotParts] = {};
  CoreContention contention_;  // whether waits yield or sleep (see waitSlow)
  uint64_t entrySeq_ = 0;     // the call this rank announced last, + 1 (0: none)
  MessageSignature entrySig_;
  Deadline::Clock::time_point nextStoreCheck_{};
  bool singleCopy_ = false;
};

// One collective's use of a domain: rounds tagged with its signature.
//
// Each round's flag also carries the digest of every operation this rank
// ran on the domain before this one, and every wait compares both with the
// waiting rank's own. That lets an operation finish on some ranks without
// waiting for all of them (a broadcast's root publishes and returns) and
// still have every disagreement caught: the first later wait between two
// ranks whose calls differed sees different histories.
class ShmOp {
 public:
  ShmOp(ShmDomain& domain, const OpContext& context, const MessageSignature& sig)
      : d_(domain), ctx_(context), sig_(sig) {}

  ShmDomain& domain() { return d_; }
  int rank() const { return d_.localRank(); }
  int size() const { return d_.localSize(); }
  // The whole slot. all_to_all uses up to a chunk of it per peer, the
  // hierarchical all_reduce on a host of two ranks all of it.
  size_t slotBytes() const { return d_.slotBytes(); }
  // What the other pipelined collectives publish per round. Every rank
  // reads every rank's, so their working set is P of these.
  size_t chunkBytes() const { return d_.chunkBytes(); }
  const OpContext& context() const { return ctx_; }

  // Starts the next round and returns this rank's slot for it: one of
  // `parts` equal parts of its slot area (both buffers). The default, two,
  // gives slotBytes() writable bytes; more parts give slotPartBytes(parts)
  // each. A part comes back every `parts` rounds, so a rank whose rounds
  // need nobody's data (a broadcast's root) runs up to parts-1 rounds
  // ahead of its readers: its copying in overlaps theirs out. Waits only
  // until every rank is done with what this rank last wrote there.
  uint8_t* begin(size_t parts = 2);
  // Starts the next round for a rank that writes nothing into its slot in
  // it (it only reads the others'): no wait. `parts` as the writers' begin.
  void beginReading(size_t parts = 2);
  // Writable bytes of one of `parts` parts of the slot area (a power of two
  // from 2 to ShmDomain::kSlotParts).
  size_t slotPartBytes(size_t parts) const { return d_.slotPartBytes(parts); }
  // Starts the next round without a slot, returning this rank's cell for
  // it (ShmDomain::kCellBytes writable bytes; the inline area is there
  // too). Slots are double-buffered but cells and flag lines kDepth deep,
  // so a rank whose rounds need nobody else's data (a broadcast's root)
  // runs up to kDepth-1 rounds ahead of the others instead of one.
  uint8_t* beginCell();
  // This rank's cell in the current round, whichever way the round began:
  // cells are kDepth deep like the flag lines, and every begin guards their
  // reuse, so any round may write its own (the agreement's records ride
  // the first round of an all_to_all this way).
  uint8_t* ownCell() { return d_.cell(d_.localRank(), d_.round_); }
  // This round's inline area (kInlineBytes), sent with the flag line. It
  // is staged here and written to the line by publish() together with the
  // flag, so the line changes in one burst: a peer polling it mid-update
  // would otherwise pull it away between the stores and cost another
  // cache-line transfer.
  uint8_t* inlineData() {
    staged_ = true;
    return staging_;
  }
  // Makes this round's writes visible to the other local ranks.
  void publish();
  // publish(), with `word` for every other rank to read (wordOf): a round
  // that hands out one value per rank (the agreement's digest of each
  // rank's record) without a slot or cell line more to read. The word
  // travels in the flag line in place of the signature's count, so this
  // round's waits check the rest of the signature and the history only.
  void publishWord(uint64_t word);
  // What rank `local` published with this round's publishWord, once waited
  // for (this rank's own included).
  uint64_t wordOf(int local) const { return d_.wordOf(local, d_.round_); }
  // Waits for `local`'s data of this round / for every rank's. waitAll
  // returns at once when it already waited for this round (the round that
  // carried the agreement's records waited for every rank to read them).
  void wait(int local);
  void waitAll();
  const uint8_t* slot(int local) const { return d_.slotPart(local, d_.round_, parts_); }
  // A rank's part of this round where writers split their slot areas into
  // different numbers of parts (each writer's own, which its readers work
  // out from what it published).
  const uint8_t* slot(int local, size_t parts) const { return d_.slotPart(local, d_.round_, parts); }
  const uint8_t* cell(int local) const { return d_.cell(local, d_.round_); }
  const uint8_t* inlineOf(int local) const { return d_.inlineData(local, d_.round_); }

  // "rank G (world rank W)" of a local rank, for messages.
  std::string describeRank(int local) const { return d_.describeRank(local); }

  // A check failed on this rank (e.g. a peer's sizes disagree): aborts the
  // domain with a Mismatch and throws it.
  [[noreturn]] void mismatch(const std::string& message);

 private:
  // Records the history on the operation's first round.
  void start();

  ShmDomain& d_;
  const OpContext& ctx_;
  MessageSignature sig_;
  uint32_t history_ = 0;  // the domain's history before this operation
  size_t parts_ = 2;      // the slot area's parts in the current round
  bool begun_ = false;
  bool wordRound_ = false;  // the current round's flags carry words (publishWord)
  // The last round whose waitAll saw every rank reach it and checked their
  // signatures (the domain's allReached_ is also set by waits that check
  // nothing). Rounds start at 1.
  uint64_t waitedRound_ = 0;
  alignas(8) uint8_t staging_[ShmDomain::kInlineBytes];
  bool staged_ = false;
};

}  // namespace meshcomm

// FlightRecorder: this process's record of its last operations, kept so
// that a hung or failed job can be diagnosed afterwards across all ranks
// (tools: meshcomm-diagnose, python/meshcomm/diagnose.py).
//
// Each collective and point-to-point operation of every group has one
// record, from the moment it is issued until it ends: group, sequence
// number, operation, dtype, element count, root or peer, algorithm,
// transport, state (enqueued, started, completed, failed) and the times of
// each step. The last MESHCOMM_FLIGHT_RECORDER records (default 2000; 0
// turns the recorder off) are kept in a ring.
//
// dump() writes them as JSON lines (docs/errors.md, "Diagnosing a hang"):
// one header line (rank, world size, groups), then one line per record.
// A dump reads the ring without stopping the operations that write it and
// touches no socket, so it may run at any time, from any thread.
//
// Thread-safety: every method may be called from any thread. Writing a
// record is lock-free: one fetch_add claims a slot, and each slot is a
// sequence lock (odd version while written) that readers retry on.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace meshcomm {

enum class OpState : uint8_t { kEnqueued, kStarted, kCompleted, kFailed };

class FlightRecorder {
 public:
  static constexpr int64_t kDefaultCapacity = 2000;
  // Value of `transport` and `algorithm` before they are known.
  static constexpr uint8_t kUnknown = 0xff;

  // The process's recorder, or null when MESHCOMM_FLIGHT_RECORDER=0.
  // Throws InvalidArgument (on first use) when the variable is malformed.
  static FlightRecorder* instance();

  // Who this process is in its job, for the dump's header and file name:
  // the first World it joins, for as long as that World lives. A World
  // made meanwhile (torch.distributed makes one per group) is a group of
  // the same job and leaves the identity alone. `jobKey` names the default
  // dump directory (the same on every rank). Returns whether this call
  // took the identity.
  static bool claimJob(int worldRank, int worldSize, const std::string& jobKey);
  // The World that claimed the identity ended: the next one to join takes
  // it (dumps name the old one until then).
  static void releaseJob();
  // This process's rank in its job, -1 before it joined one.
  static int jobRank();
  // A group this process belongs to. Returns the index its records carry.
  static uint32_t registerGroup(const std::string& name, int rank, const std::vector<int>& worldRanks);

  // What an operation is, when it is issued.
  struct Issue {
    uint32_t group = 0;
    const char* op = "";  // a name with static lifetime (the operation table's)
    bool pointToPoint = false;
    uint8_t dtype = 0;
    uint64_t count = 0;
    int64_t rootOrPeer = -1;  // -1: none, or several peers
  };
  // Records an issued operation; returns its id (never 0). With `started`,
  // it starts at once with sequence number `seq`.
  uint64_t issue(const Issue& what, int64_t nowTicks, bool started, uint64_t seq);
  // The operation began running as the group's `seq`-th of its kind.
  void start(uint64_t id, uint64_t seq, int64_t nowTicks);
  // What a point-to-point operation moves, learned once it is posted.
  void describePointToPoint(uint64_t id, uint8_t dtype, uint64_t count, int64_t peer,
                            uint8_t transport);
  // The operation ended. `error` is null on success.
  void finish(uint64_t id, OpState state, uint8_t algorithm, uint8_t transport, int64_t nowTicks,
              const char* error);

  // Writes every record to `path` ("" or a directory: rank_<R>.jsonl in it,
  // or in defaultDirectory()). Creates missing directories. Returns the
  // file written; throws Error naming it when it cannot be written.
  std::string dump(const std::string& path, const std::string& reason);
  // MESHCOMM_DUMP_DIR, else <root>/meshcomm-dumps-<job>, root being
  // MESHCOMM_DUMP_ROOT or /tmp (runtime/dump_folders.h: how long it stays).
  static std::string defaultDirectory();
  // rank_<R>.jsonl (pid_<P>.jsonl before the process joined a job).
  static std::string fileName();

  // "shm", "tcp" or "hierarchical": a Route (transport/placement.h) as
  // records and trace lines name it.
  static const char* transportName(uint8_t route);

  // The clock of every record, in ticks: the CPU's time-stamp counter
  // where the kernel uses it as its clock source (reading it costs a
  // fraction of clock_gettime, on every operation), else monotonic
  // nanoseconds. Inline: every operation reads it twice.
  static int64_t now() {
#if defined(__x86_64__)
    const int8_t clock = clock_.load(std::memory_order_relaxed);
    if (clock > 0) [[likely]] return static_cast<int64_t>(__rdtsc());
    if (clock == 0) return firstNow();
#endif
    return steadyNanoseconds();
  }
  // Nanoseconds per tick, measured over the process's life so far.
  static double nanosecondsPerTick();
  // A tick count as monotonic nanoseconds (steady_clock's epoch).
  static int64_t toNanoseconds(int64_t ticks, double nsPerTick);

 private:
  struct Slot;
  struct Snapshot;

  // now()'s first call: finds out which clock to use.
  static int64_t firstNow();
  static int64_t steadyNanoseconds();
  // 1: the time-stamp counter, -1: steady_clock, 0: not known yet.
  static inline std::atomic<int8_t> clock_{0};
  explicit FlightRecorder(size_t capacity);
  ~FlightRecorder() = delete;  // lives as long as the process

  // Claims `slot` for writing (spins while another writer holds it).
  static uint64_t lock(Slot& slot);
  static void unlock(Slot& slot, uint64_t version);
  Slot& slotOf(uint64_t id) const;
  bool read(const Slot& slot, Snapshot& out) const;
  void keepError(uint64_t id, const char* error);

  const size_t capacity_;  // records a dump shows: the last ones issued
  // The ring holds the next power of two of them, so that finding a
  // record's slot is a mask, not a division (two per operation).
  const size_t ringMask_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> nextId_{1};
  Mutex errorsMu_;
  std::map<uint64_t, std::string> errors_ GUARDED_BY(errorsMu_);  // failed records' messages
  Mutex dumpMu_;  // one dump at a time
};

}  // namespace meshcomm

// OpTrace: what the runtime reports about each operation of a group — to
// the flight recorder (runtime/flight_recorder.h) and, with
// MESHCOMM_LOG=coll, as one line per operation on stderr:
//
//   [meshcomm coll pid 4242] rank=0 group=world seq=42 op=all_reduce
//       bytes=4096 algorithm=ring transport=tcp us=81.3 state=completed
//
// A failed operation also writes the flight recorder to disk and names the
// file in its error, so the user can run meshcomm-diagnose on the job.
//
// Thread-safety: a TracedGroup may be used from any thread; an OpTrace by
// the thread running its operation.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "collectives/tuning.h"
#include "runtime/flight_recorder.h"
#include "transport/placement.h"
#include "transport/transport.h"

namespace meshcomm {

// A group as its operations' records name it. While one exists, SIGUSR1
// writes the flight recorder (runtime/dump_signal.h).
class TracedGroup {
 public:
  TracedGroup(const std::string& name, int rank, const std::vector<int>& worldRanks);
  ~TracedGroup();
  TracedGroup(const TracedGroup&) = delete;
  TracedGroup& operator=(const TracedGroup&) = delete;

  uint32_t index() const { return index_; }
  // Whether its operations are recorded or traced at all.
  bool traced() const { return traced_; }
  // The flight recorder, null when it is off.
  FlightRecorder* recorder() const { return recorder_; }
  // Whether each operation logs a line (MESHCOMM_LOG=coll).
  bool logsCalls() const { return logsCalls_; }
  const std::string& name() const { return name_; }
  int worldRank() const { return worldRank_; }
  // True the first time only: the group's first failure writes the flight
  // recorder; the calls that fail after it (the group is broken) do not.
  bool firstFailure() { return !failed_.exchange(true); }

 private:
  std::atomic<bool> failed_{false};
  // Both settings are read when the group is made, so that a malformed one
  // fails that, never an operation, and no operation asks a function-local
  // static.
  FlightRecorder* const recorder_;
  const bool logsCalls_;
  const bool traced_;
  uint32_t index_ = 0;
  std::string name_;
  int worldRank_ = -1;
};

class OpTrace {
 public:
  // An operation that waits in the group's queue: recorded as enqueued.
  // Returns the id to start it with (0 when nothing is recorded). `sig`:
  // the collective's signature, null for point-to-point.
  static uint64_t enqueued(const TracedGroup& group, const char* op, const MessageSignature* sig);

  // A collective starting as its group's `seq`-th; `issued` is what
  // enqueued() returned, or 0 when it starts as it is issued.
  static OpTrace collective(TracedGroup& group, uint64_t issued, const char* op,
                            const MessageSignature& sig, uint64_t seq, Route route) {
    if (!group.traced()) return OpTrace();
    return startCollective(group, issued, op, sig, seq, route);
  }
  // A point-to-point operation starting as its group's `seq`-th.
  static OpTrace pointToPoint(TracedGroup& group, uint64_t issued, const char* op,
                              uint64_t seq);
  // What a point-to-point operation posted (peers, sizes, transport).
  void posted(const std::vector<RequestPtr>& requests, const Placement& placement,
              bool hostDomain, int rank);

  // `algorithm`: a collective's (Comm::algorithm()), else kAuto.
  void completed(Algorithm algorithm = Algorithm::kAuto) {
    if (group_ != nullptr) finish(true, algorithm, nullptr);
  }
  // Records the failure and, at the group's first, writes the flight
  // recorder; returns `error` with the file it wrote appended to its
  // message (or `error` itself).
  std::exception_ptr failed(const std::exception_ptr& error, Algorithm algorithm = Algorithm::kAuto);

 private:
  // collective() once the group is traced.
  static OpTrace startCollective(TracedGroup& group, uint64_t issued, const char* op,
                                 const MessageSignature& sig, uint64_t seq, Route route);
  // What collective() and pointToPoint() share: the trace starts now, and
  // the recorder starts the record the call queued (`issued`), or issues
  // `what` as a record already started.
  static OpTrace begin(TracedGroup& group, uint64_t issued, const char* op, uint64_t seq,
                       FlightRecorder::Issue what);
  void finish(bool ok, Algorithm algorithm, const char* error);

  TracedGroup* group_ = nullptr;  // null: nothing to record or trace
  uint64_t id_ = 0;                      // 0: the recorder is off
  const char* op_ = "";
  uint64_t seq_ = 0;
  uint64_t bytes_ = 0;
  uint8_t transport_ = 0xff;
  int64_t startTicks_ = 0;
};

}  // namespace meshcomm

#include "runtime/op_trace.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <typeinfo>

#include "collectives/operations.h"
#include "common/env.h"
#include "common/logging.h"
#include "meshcomm/error.h"
#include "meshcomm/types.h"
#include "runtime/dump_signal.h"
#include "runtime/flight_recorder.h"
#include "transport/failure.h"

namespace meshcomm {
namespace {

// MESHCOMM_LOG: a comma-separated list of what to trace; "coll" is one
// line per operation.
bool traceCalls() {
  static const bool on = [] {
    const std::string list = envString("MESHCOMM_LOG").value_or("");
    bool coll = false;
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(',', start);
      if (end == std::string::npos) end = list.size();
      const std::string item = list.substr(start, end - start);
      if (item == "coll") {
        coll = true;
      } else if (!item.empty()) {
        throw InvalidArgument("MESHCOMM_LOG=" + list + ": unknown item '" + item +
                              "'; the one known item is 'coll' (one line per operation)");
      }
      start = end + 1;
    }
    return coll;
  }();
  return on;
}

// Whether a wire family's signature detail is its root, by opcode: a table,
// since familyTraits() walks the operation list and this runs on every call.
constexpr auto kRootedFamily = [] {
  std::array<bool, 256> rooted{};
  for (size_t code = 0; code < rooted.size(); ++code) {
    rooted[code] = familyTraits(static_cast<uint8_t>(code)).rooted;
  }
  return rooted;
}();

int64_t rootOf(const MessageSignature& sig) {
  return kRootedFamily[sig.opcode] ? static_cast<int64_t>(sig.detail) : -1;
}

uint8_t algorithmCode(Algorithm a) {
  return a == Algorithm::kAuto ? FlightRecorder::kUnknown : static_cast<uint8_t>(a);
}

// `error`, of the same type, with `note` appended to its message. Only the
// exact types of meshcomm/error.h are rebuilt; anything else (a type this
// file does not know) is returned as it is.
template <class... Types>
std::exception_ptr withNote(const std::exception_ptr& error, const std::string& note) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    std::exception_ptr rebuilt;
    ((typeid(e) == typeid(Types) ? (rebuilt = std::make_exception_ptr(Types(e.what() + note)), 0) : 0),
     ...);
    return rebuilt ? rebuilt : error;
  } catch (...) {
    return error;
  }
}

}  // namespace

TracedGroup::TracedGroup(const std::string& name, int rank, const std::vector<int>& worldRanks)
    : recorder_(FlightRecorder::instance()),
      logsCalls_(traceCalls()),
      traced_(recorder_ != nullptr || logsCalls_),
      name_(name),
      worldRank_(worldRanks.empty() ? -1 : worldRanks[static_cast<size_t>(rank)]) {
  if (!traced_) return;
  index_ = FlightRecorder::registerGroup(name, rank, worldRanks);
  DumpOnSignal::hold();
}

TracedGroup::~TracedGroup() {
  if (traced_) DumpOnSignal::release();
}

uint64_t OpTrace::enqueued(const TracedGroup& group, const char* op, const MessageSignature* sig) {
  FlightRecorder* recorder = FlightRecorder::instance();
  if (recorder == nullptr) return 0;
  FlightRecorder::Issue what;
  what.group = group.index();
  what.op = op;
  what.pointToPoint = sig == nullptr;
  if (sig != nullptr) {
    what.dtype = sig->dtype;
    what.count = sig->opCount;
    what.rootOrPeer = rootOf(*sig);
  }
  return recorder->issue(what, FlightRecorder::now(), false, 0);
}

OpTrace OpTrace::begin(TracedGroup& group, uint64_t issued, const char* op, uint64_t seq,
                       FlightRecorder::Issue what) {
  OpTrace t;
  t.group_ = &group;
  t.op_ = op;
  t.seq_ = seq;
  t.startTicks_ = FlightRecorder::now();
  if (FlightRecorder* recorder = group.recorder()) {
    if (issued != 0) {
      recorder->start(issued, seq, t.startTicks_);
      t.id_ = issued;
    } else {
      what.group = group.index();
      what.op = op;
      t.id_ = recorder->issue(what, t.startTicks_, true, seq);
    }
  }
  return t;
}

OpTrace OpTrace::startCollective(TracedGroup& group, uint64_t issued, const char* op,
                                 const MessageSignature& sig, uint64_t seq, Route route) {
  FlightRecorder::Issue what;
  what.dtype = sig.dtype;
  what.count = sig.opCount;
  what.rootOrPeer = rootOf(sig);
  OpTrace t = begin(group, issued, op, seq, what);
  t.bytes_ = sig.opCount * dtypeSize(static_cast<DType>(sig.dtype));
  t.transport_ = static_cast<uint8_t>(route);
  return t;
}

OpTrace OpTrace::pointToPoint(TracedGroup& group, uint64_t issued, const char* op,
                              uint64_t seq) {
  if (!group.traced()) return OpTrace();
  FlightRecorder::Issue what;
  what.pointToPoint = true;
  return begin(group, issued, op, seq, what);
}

void OpTrace::posted(const std::vector<RequestPtr>& requests, const Placement& placement,
                     bool hostDomain, int rank) {
  if (group_ == nullptr || requests.empty()) return;
  int64_t peer = requests.front()->peer;
  uint64_t count = 0;
  bool local = hostDomain && !placement.hostOf.empty();
  for (const auto& r : requests) {
    if (r->peer != peer) peer = -1;
    count += r->signature.opCount;
    bytes_ += r->bytes;
    if (local) {
      // A receive from any peer may be served by another host.
      local = r->peer != kAnyPeer && placement.hostOf[static_cast<size_t>(r->peer)] ==
              placement.hostOf[static_cast<size_t>(rank)];
    }
  }
  transport_ = static_cast<uint8_t>(local ? Route::kOnHost : Route::kFlat);
  if (FlightRecorder* recorder = FlightRecorder::instance(); recorder != nullptr && id_ != 0) {
    recorder->describePointToPoint(id_, requests.front()->signature.dtype, count, peer, transport_);
  }
}

std::exception_ptr OpTrace::failed(const std::exception_ptr& error, Algorithm algorithm) {
  if (group_ == nullptr) return error;
  const std::string message = errorMessageOf(error);
  finish(false, algorithm, message.c_str());
  FlightRecorder* recorder = FlightRecorder::instance();
  if (recorder == nullptr || !group_->firstFailure()) return error;
  std::string note;
  try {
    const std::string file = recorder->dump("", std::string(op_) + " #" + std::to_string(seq_) +
                                                    " on group " + group_->name() + " failed");
    const size_t slash = file.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : file.substr(0, slash);
    note = "\n  flight recorder written to " + file + "; `meshcomm-diagnose " + dir +
           "` shows what every rank was doing";
  } catch (const std::exception& e) {
    MESHCOMM_LOG(kError, e.what());
    return error;
  }
  return withNote<Timeout, PeerLost, Mismatch, Aborted, Interrupted, StoreError, Error>(error, note);
}

void OpTrace::finish(bool ok, Algorithm algorithm, const char* error) {
  const int64_t endTicks = FlightRecorder::now();
  if (id_ != 0) {
    group_->recorder()->finish(id_, ok ? OpState::kCompleted : OpState::kFailed,
                               algorithmCode(algorithm), transport_, endTicks, error);
  }
  if (group_->logsCalls()) {
    char us[32];
    std::snprintf(us, sizeof(us), "%.1f",
                  static_cast<double>(endTicks - startTicks_) * FlightRecorder::nanosecondsPerTick() / 1000.0);
    logTagged("coll", "rank=" + std::to_string(group_->worldRank()) + " group=" + group_->name() +
                          " seq=" + std::to_string(seq_) + " op=" + op_ +
                          " bytes=" + std::to_string(bytes_) + " algorithm=" +
                          (algorithm == Algorithm::kAuto ? "-" : algorithmName(algorithm)) +
                          " transport=" +
                          FlightRecorder::transportName(transport_) +
                          " us=" + us + (ok ? " state=completed" : " state=failed"));
  }
}

}  // namespace meshcomm

#include "runtime/flight_recorder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "collectives/tuning.h"
#include "common/env.h"
#include "common/socket.h"
#include "meshcomm/error.h"
#include "meshcomm/types.h"
#include "runtime/dump_folders.h"
#include "transport/placement.h"

namespace meshcomm {

// Every field is an atomic so that a dump may read a slot while its
// operation writes it; the version says whether what it read is whole.
// Relaxed atomics compile to plain loads and stores here.
struct FlightRecorder::Slot {
  std::atomic<uint64_t> version{0};  // odd while a writer holds the slot
  std::atomic<uint64_t> id{0};       // 0: never written
  std::atomic<uint64_t> seq{0};
  std::atomic<uint64_t> count{0};
  std::atomic<int64_t> rootOrPeer{-1};
  std::atomic<int64_t> enqueuedTicks{0};
  std::atomic<int64_t> startedTicks{0};
  std::atomic<int64_t> finishedTicks{0};
  std::atomic<const char*> op{""};
  std::atomic<uint32_t> group{0};
  std::atomic<uint8_t> dtype{0};
  std::atomic<uint8_t> state{0};
  std::atomic<uint8_t> algorithm{kUnknown};
  std::atomic<uint8_t> transport{kUnknown};
  std::atomic<bool> pointToPoint{false};
};

struct FlightRecorder::Snapshot {
  uint64_t id, seq, count;
  int64_t rootOrPeer, enqueuedTicks, startedTicks, finishedTicks;
  const char* op;
  uint32_t group;
  uint8_t dtype, state, algorithm, transport;
  bool pointToPoint;
};

namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

struct GroupEntry {
  std::string name;
  int rank;
  std::vector<int> worldRanks;
};

// Who this process is; set once it joins a job.
struct Job {
  Mutex mu;
  int worldRank GUARDED_BY(mu) = -1;
  int worldSize GUARDED_BY(mu) = -1;
  bool claimed GUARDED_BY(mu) = false;  // by a World still alive
  std::string key GUARDED_BY(mu);
  std::vector<GroupEntry> groups GUARDED_BY(mu);
};
Job& job() {
  static Job* j = new Job;  // used until the process ends
  return *j;
}

const char* stateName(uint8_t s) {
  switch (static_cast<OpState>(s)) {
    case OpState::kEnqueued: return "enqueued";
    case OpState::kStarted: return "started";
    case OpState::kCompleted: return "completed";
    case OpState::kFailed: return "failed";
  }
  return "unknown";
}

void appendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// Epoch seconds with microseconds, from a monotonic time.
void appendTime(std::string& out, int64_t monotonicNs, int64_t wallMinusMonotonicNs) {
  if (monotonicNs == 0) {
    out += "null";
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6f",
                static_cast<double>(monotonicNs + wallMinusMonotonicNs) * 1e-9);
  out += buf;
}

void makeDirectories(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST) {
      throw Error("cannot write the flight recorder: mkdir " + prefix + ": " + std::strerror(errno));
    }
  }
}

bool isDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity)
    : capacity_(capacity),
      ringMask_(std::bit_ceil(capacity) - 1),
      slots_(std::make_unique<Slot[]>(ringMask_ + 1)) {}

FlightRecorder* FlightRecorder::instance() {
  static FlightRecorder* const recorder = []() -> FlightRecorder* {
    const int64_t n = envIntOr("MESHCOMM_FLIGHT_RECORDER", kDefaultCapacity);
    // A million records take about 100 MB; more is surely a typo.
    constexpr int64_t kMost = 1000000;
    if (n < 0 || n > kMost) {
      throw InvalidArgument("MESHCOMM_FLIGHT_RECORDER=" + std::to_string(n) +
                            ": give the number of operations to keep, 0 to " + std::to_string(kMost) +
                            " (0 turns the recorder off)");
    }
    return n == 0 ? nullptr : new FlightRecorder(static_cast<size_t>(n));
  }();
  return recorder;
}

const char* FlightRecorder::transportName(uint8_t route) {
  switch (static_cast<Route>(route)) {
    case Route::kOnHost: return "shm";
    case Route::kFlat: return "tcp";
    case Route::kHierarchical: return "hierarchical";
  }
  return "-";
}

namespace {

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The time-stamp counter is a clock only where the kernel found it
// constant and synchronised across CPUs, i.e. chose it as its clock source.
struct TickBase {
  bool tsc = false;
  int64_t ticks = 0;  // the counter and steady_clock at the same moment
  int64_t ns = 0;
};
const TickBase& tickBase() {
  static const TickBase base = [] {
    TickBase b;
#if defined(__x86_64__)
    if (FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r")) {
      char name[16] = {0};
      b.tsc = std::fgets(name, sizeof(name), f) != nullptr && std::strncmp(name, "tsc", 3) == 0 &&
              (name[3] == '\n' || name[3] == 0);
      std::fclose(f);
    }
    if (b.tsc) {
      b.ticks = static_cast<int64_t>(__rdtsc());
      b.ns = steadyNs();
    }
#endif
    return b;
  }();
  return base;
}

}  // namespace

int64_t FlightRecorder::firstNow() {
  clock_.store(tickBase().tsc ? 1 : -1, std::memory_order_relaxed);
  return now();
}

int64_t FlightRecorder::steadyNanoseconds() { return steadyNs(); }

double FlightRecorder::nanosecondsPerTick() {
  const TickBase& b = tickBase();
  if (!b.tsc) return 1.0;
  const int64_t ticks = now() - b.ticks;
  // Early in the process's life the measurement is rough, and so are the
  // few durations converted with it.
  return ticks > 0 ? static_cast<double>(steadyNs() - b.ns) / static_cast<double>(ticks) : 1.0;
}

int64_t FlightRecorder::toNanoseconds(int64_t ticks, double nsPerTick) {
  const TickBase& b = tickBase();
  if (!b.tsc) return ticks;
  return b.ns + static_cast<int64_t>(static_cast<double>(ticks - b.ticks) * nsPerTick);
}

bool FlightRecorder::claimJob(int worldRank, int worldSize, const std::string& jobKey) {
  Job& j = job();
  MutexLock lock(j.mu);
  if (j.claimed) return false;
  j.claimed = true;
  j.worldRank = worldRank;
  j.worldSize = worldSize;
  // A part of a path: anything but letters, digits, '-' and '_' becomes '_'.
  j.key = jobKey;
  for (char& c : j.key) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return true;
}

void FlightRecorder::releaseJob() {
  Job& j = job();
  MutexLock lock(j.mu);
  j.claimed = false;
}

int FlightRecorder::jobRank() {
  Job& j = job();
  MutexLock lock(j.mu);
  return j.worldRank;
}

uint32_t FlightRecorder::registerGroup(const std::string& name, int rank,
                                       const std::vector<int>& worldRanks) {
  Job& j = job();
  MutexLock lock(j.mu);
  j.groups.push_back(GroupEntry{name, rank, worldRanks});
  return static_cast<uint32_t>(j.groups.size() - 1);
}

FlightRecorder::Slot& FlightRecorder::slotOf(uint64_t id) const { return slots_[id & ringMask_]; }

uint64_t FlightRecorder::lock(Slot& slot) {
  uint64_t v = slot.version.load(kRelaxed);
  for (;;) {
    // Another writer holds the slot only when the ring wrapped around onto
    // an operation still being written: rare, and brief.
    if ((v & 1) == 0 &&
        slot.version.compare_exchange_weak(v, v + 1, std::memory_order_acquire, kRelaxed)) {
      return v + 1;
    }
    if ((v & 1) != 0) {
      std::this_thread::yield();
      v = slot.version.load(kRelaxed);
    }
  }
}

void FlightRecorder::unlock(Slot& slot, uint64_t version) {
  slot.version.store(version + 1, std::memory_order_release);
}

uint64_t FlightRecorder::issue(const Issue& what, int64_t nowTicks, bool started, uint64_t seq) {
  const uint64_t id = nextId_.fetch_add(1, kRelaxed);
  Slot& s = slotOf(id);
  const uint64_t v = lock(s);
  s.id.store(id, kRelaxed);
  s.seq.store(started ? seq : 0, kRelaxed);
  s.count.store(what.count, kRelaxed);
  s.rootOrPeer.store(what.rootOrPeer, kRelaxed);
  s.enqueuedTicks.store(nowTicks, kRelaxed);
  s.startedTicks.store(started ? nowTicks : 0, kRelaxed);
  s.finishedTicks.store(0, kRelaxed);
  s.op.store(what.op, kRelaxed);
  s.group.store(what.group, kRelaxed);
  s.dtype.store(what.dtype, kRelaxed);
  s.state.store(static_cast<uint8_t>(started ? OpState::kStarted : OpState::kEnqueued), kRelaxed);
  s.algorithm.store(kUnknown, kRelaxed);
  s.transport.store(kUnknown, kRelaxed);
  s.pointToPoint.store(what.pointToPoint, kRelaxed);
  unlock(s, v);
  return id;
}

void FlightRecorder::start(uint64_t id, uint64_t seq, int64_t nowTicks) {
  Slot& s = slotOf(id);
  const uint64_t v = lock(s);
  if (s.id.load(kRelaxed) == id) {  // else the ring has moved past it
    s.seq.store(seq, kRelaxed);
    s.startedTicks.store(nowTicks, kRelaxed);
    s.state.store(static_cast<uint8_t>(OpState::kStarted), kRelaxed);
  }
  unlock(s, v);
}

void FlightRecorder::describePointToPoint(uint64_t id, uint8_t dtype, uint64_t count,
                                          int64_t peer, uint8_t transport) {
  Slot& s = slotOf(id);
  const uint64_t v = lock(s);
  if (s.id.load(kRelaxed) == id) {
    s.dtype.store(dtype, kRelaxed);
    s.count.store(count, kRelaxed);
    s.rootOrPeer.store(peer, kRelaxed);
    s.transport.store(transport, kRelaxed);
  }
  unlock(s, v);
}

void FlightRecorder::finish(uint64_t id, OpState state, uint8_t algorithm, uint8_t transport,
                            int64_t nowTicks, const char* error) {
  if (error != nullptr) [[unlikely]] keepError(id, error);
  Slot& s = slotOf(id);
  const uint64_t v = lock(s);
  if (s.id.load(kRelaxed) == id) {
    s.finishedTicks.store(nowTicks, kRelaxed);
    s.state.store(static_cast<uint8_t>(state), kRelaxed);
    if (algorithm != kUnknown) s.algorithm.store(algorithm, kRelaxed);
    if (transport != kUnknown) s.transport.store(transport, kRelaxed);
  }
  unlock(s, v);
}

void FlightRecorder::keepError(uint64_t id, const char* error) {
  MutexLock lock(errorsMu_);
  errors_[id] = error;
  // Only the messages of records still in the ring are kept.
  while (!errors_.empty() && errors_.begin()->first + capacity_ <= id) errors_.erase(errors_.begin());
}

bool FlightRecorder::read(const Slot& s, Snapshot& out) const {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint64_t v1 = s.version.load(std::memory_order_acquire);
    if ((v1 & 1) != 0) {
      std::this_thread::yield();
      continue;
    }
    out.id = s.id.load(kRelaxed);
    out.seq = s.seq.load(kRelaxed);
    out.count = s.count.load(kRelaxed);
    out.rootOrPeer = s.rootOrPeer.load(kRelaxed);
    out.enqueuedTicks = s.enqueuedTicks.load(kRelaxed);
    out.startedTicks = s.startedTicks.load(kRelaxed);
    out.finishedTicks = s.finishedTicks.load(kRelaxed);
    out.op = s.op.load(kRelaxed);
    out.group = s.group.load(kRelaxed);
    out.dtype = s.dtype.load(kRelaxed);
    out.state = s.state.load(kRelaxed);
    out.algorithm = s.algorithm.load(kRelaxed);
    out.transport = s.transport.load(kRelaxed);
    out.pointToPoint = s.pointToPoint.load(kRelaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.version.load(kRelaxed) == v1) return out.id != 0;
  }
  return false;  // written continuously for the whole time: leave it out
}

std::string FlightRecorder::defaultDirectory() {
  if (auto dir = envString("MESHCOMM_DUMP_DIR"); dir && !dir->empty()) return *dir;
  Job& j = job();
  MutexLock lock(j.mu);
  std::string key = j.key.empty() ? "pid" + std::to_string(getpid()) : j.key;
  std::string root = DumpFolders::root();
  if (root.back() != '/') root += '/';
  return root + DumpFolders::kFolderPrefix + key;
}

std::string FlightRecorder::fileName() {
  Job& j = job();
  MutexLock lock(j.mu);
  if (j.worldRank < 0) return "pid_" + std::to_string(getpid()) + ".jsonl";
  return "rank_" + std::to_string(j.worldRank) + ".jsonl";
}

std::string FlightRecorder::dump(const std::string& path, const std::string& reason) {
  std::string file = path;
  if (file.empty()) file = defaultDirectory();
  // Only a folder meshcomm chose gets the mark that lets old ones be pruned.
  const auto explicitDir = envString("MESHCOMM_DUMP_DIR");
  const bool defaultLocation = path.empty() && !(explicitDir && !explicitDir->empty());
  if (file.empty() || file.back() == '/' || isDirectory(file) || path.empty()) {
    if (!file.empty() && file.back() != '/') file += '/';
    file += fileName();
  }
  const size_t slash = file.rfind('/');
  const std::string dir = slash != std::string::npos && slash > 0 ? file.substr(0, slash) : "";
  DumpFolders::Hold hold;
  if (!dir.empty()) {
    makeDirectories(dir);
    // Held from before the file is written until it is in place, so no
    // pruning removes the folder meanwhile.
    hold = DumpFolders::enter(dir, defaultLocation);
  }

  MutexLock dumping(dumpMu_);
  const double nsPerTick = nanosecondsPerTick();
  const int64_t wallMinusMonotonic =
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count() -
      steadyNs();
  // The ring may hold a few more than the last capacity_ records (its size
  // is a power of two); those are left out.
  const uint64_t latest = nextId_.load(kRelaxed) - 1;
  std::vector<Snapshot> records;
  records.reserve(capacity_);
  for (size_t i = 0; i <= ringMask_; ++i) {
    Snapshot snap;
    if (read(slots_[i], snap) && snap.id + capacity_ > latest) records.push_back(snap);
  }
  std::sort(records.begin(), records.end(),
            [](const Snapshot& a, const Snapshot& b) { return a.id < b.id; });
  std::map<uint64_t, std::string> errors;
  {
    MutexLock lock(errorsMu_);
    errors = errors_;
  }

  std::string out;
  out.reserve(256 + records.size() * 320);
  std::vector<std::string> groupNames;
  {
    Job& j = job();
    MutexLock lock(j.mu);
    out += "{\"format\":\"meshcomm-flight-recorder\",\"version\":1,\"rank\":";
    out += std::to_string(j.worldRank);
    out += ",\"world_size\":" + std::to_string(j.worldSize);
    out += ",\"pid\":" + std::to_string(getpid()) + ",\"host\":";
    appendJsonString(out, hostName());
    out += ",\"job\":";
    appendJsonString(out, j.key);
    out += ",\"reason\":";
    appendJsonString(out, reason);
    out += ",\"dumped_at\":";
    appendTime(out, steadyNs(), wallMinusMonotonic);
    out += ",\"capacity\":" + std::to_string(capacity_);
    out += ",\"recorded\":" + std::to_string(nextId_.load(kRelaxed) - 1);
    out += ",\"groups\":[";
    for (size_t g = 0; g < j.groups.size(); ++g) {
      const GroupEntry& e = j.groups[g];
      groupNames.push_back(e.name);
      out += g == 0 ? "{\"id\":" : ",{\"id\":";
      out += std::to_string(g) + ",\"name\":";
      appendJsonString(out, e.name);
      out += ",\"rank\":" + std::to_string(e.rank) + ",\"world_ranks\":[";
      for (size_t i = 0; i < e.worldRanks.size(); ++i) {
        if (i > 0) out += ',';
        out += std::to_string(e.worldRanks[i]);
      }
      out += "]}";
    }
    out += "]}\n";
  }
  for (const Snapshot& r : records) {
    out += "{\"id\":" + std::to_string(r.id) + ",\"group_id\":" + std::to_string(r.group) +
           ",\"group\":";
    appendJsonString(out, r.group < groupNames.size() ? groupNames[r.group] : "?");
    out += r.pointToPoint ? ",\"kind\":\"p2p\"" : ",\"kind\":\"collective\"";
    out += ",\"seq\":";
    out += r.state == static_cast<uint8_t>(OpState::kEnqueued) ? "null" : std::to_string(r.seq);
    out += ",\"op\":";
    appendJsonString(out, r.op);
    const auto dtype = static_cast<DType>(r.dtype);
    out += ",\"dtype\":";
    appendJsonString(out, dtypeName(dtype));
    out += ",\"count\":" + std::to_string(r.count);
    out += ",\"bytes\":" + std::to_string(r.count * dtypeSize(dtype));
    if (r.rootOrPeer >= 0) {
      out += r.pointToPoint ? ",\"peer\":" : ",\"root\":";
      out += std::to_string(r.rootOrPeer);
    }
    out += ",\"algorithm\":";
    if (r.algorithm == kUnknown) {
      out += "null";
    } else {
      appendJsonString(out, algorithmName(static_cast<Algorithm>(r.algorithm)));
    }
    out += ",\"transport\":";
    if (r.transport == kUnknown) {
      out += "null";
    } else {
      appendJsonString(out, transportName(r.transport));
    }
    out += ",\"state\":";
    appendJsonString(out, stateName(r.state));
    out += ",\"enqueued_at\":";
    appendTime(out, r.enqueuedTicks == 0 ? 0 : toNanoseconds(r.enqueuedTicks, nsPerTick), wallMinusMonotonic);
    out += ",\"started_at\":";
    appendTime(out, r.startedTicks == 0 ? 0 : toNanoseconds(r.startedTicks, nsPerTick), wallMinusMonotonic);
    out += ",\"finished_at\":";
    appendTime(out, r.finishedTicks == 0 ? 0 : toNanoseconds(r.finishedTicks, nsPerTick), wallMinusMonotonic);
    if (auto it = errors.find(r.id); it != errors.end()) {
      out += ",\"error\":";
      appendJsonString(out, it->second);
    }
    out += "}\n";
  }

  // Written beside the target and renamed over it, so a reader never sees
  // half a dump (a later dump replaces an earlier one whole).
  const std::string temp = file + ".tmp" + std::to_string(getpid());
  FILE* f = std::fopen(temp.c_str(), "w");
  if (f == nullptr) {
    throw Error("cannot write the flight recorder to " + file + ": " + std::strerror(errno) +
                "; set MESHCOMM_DUMP_DIR to a writable directory");
  }
  const bool written = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  const int savedErrno = errno;
  if (std::fclose(f) != 0 || !written || std::rename(temp.c_str(), file.c_str()) != 0) {
    const int e = written ? errno : savedErrno;
    std::remove(temp.c_str());
    throw Error("cannot write the flight recorder to " + file + ": " + std::strerror(e));
  }
  if (hold.marked()) {
    hold = DumpFolders::Hold();
    DumpFolders::pruneAfterDump(dir);
  }
  return file;
}

}  // namespace meshcomm

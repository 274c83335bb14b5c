#include "runtime/dump_folders.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/deadline.h"
#include "common/env.h"
#include "common/fd.h"
#include "common/logging.h"
#include "common/socket.h"
#include "meshcomm/error.h"

namespace meshcomm {
namespace {

// How long enter() retries while a removal holds the marker; removing a
// folder's few files takes milliseconds.
constexpr auto kEnterFor = std::chrono::milliseconds(1000);
constexpr auto kEnterRetry = std::chrono::milliseconds(2);
// Entries of one folder looked at, at most: a folder of meshcomm's holds one
// file per rank and a marker; anything bigger is not one of them.
constexpr size_t kMostEntries = 1 << 16;

// The most of a dump read to find its header's pid and host.
constexpr size_t kHeaderBytes = 4096;

bool allDigits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A name meshcomm gives a folder: the prefix and a job key (letters, digits,
// '-' and '_', as FlightRecorder::claimJob makes it).
bool isFolderName(std::string_view name) {
  constexpr std::string_view prefix = DumpFolders::kFolderPrefix;
  if (!startsWith(name, prefix) || name.size() == prefix.size()) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

// A file meshcomm writes in a dump folder: rank_<R>.jsonl, pid_<P>.jsonl,
// either with .tmp<pid> (a dump being written, or left by a process killed
// while writing), the marker, or the marker's temporary.
bool isOwnFile(std::string_view name) {
  constexpr std::string_view marker = DumpFolders::kMarkerName;
  if (name == marker) return true;
  if (startsWith(name, marker)) return startsWith(name.substr(marker.size()), ".tmp") &&
                                       allDigits(name.substr(marker.size() + 4));
  std::string_view rest;
  if (startsWith(name, "rank_")) {
    rest = name.substr(5);
  } else if (startsWith(name, "pid_")) {
    rest = name.substr(4);
  } else {
    return false;
  }
  const size_t dot = rest.find(".jsonl");
  if (dot == std::string_view::npos || !allDigits(rest.substr(0, dot))) return false;
  rest = rest.substr(dot + 6);
  return rest.empty() || (startsWith(rest, ".tmp") && allDigits(rest.substr(4)));
}

// The names in the directory `fd` (at most kMostEntries; false when it
// cannot be read). The listing starts from the beginning whatever was read
// of `fd` before: a dup shares the file offset, which readdir moves.
bool listNames(int fd, std::vector<std::string>& names) {
  const int dupFd = ::dup(fd);
  if (dupFd < 0) return false;
  DIR* d = ::fdopendir(dupFd);
  if (d == nullptr) {
    ::close(dupFd);
    return false;
  }
  ::rewinddir(d);
  bool whole = true;
  while (dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    if (names.size() >= kMostEntries) {
      whole = false;
      break;
    }
    names.emplace_back(n);
  }
  ::closedir(d);
  return whole;
}

std::string baseName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string parentOf(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

// Whether the open marker `fd` is a marker of meshcomm's, of this user.
bool markerContentIsOurs(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) return false;
  constexpr std::string_view start = DumpFolders::kMarkerStart;
  char buf[sizeof(DumpFolders::kMarkerStart)] = {0};
  const ssize_t n = ::pread(fd, buf, start.size(), 0);
  return n == static_cast<ssize_t>(start.size()) && std::string_view(buf, start.size()) == start;
}

// The folder `name` of the directory `rootFd`, opened without following a
// symbolic link, when it is a directory of this user's; else an invalid Fd.
Fd openOwnFolder(int rootFd, const std::string& name) {
  struct stat st {};
  if (::fstatat(rootFd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
      st.st_uid != ::geteuid()) {
    return Fd();
  }
  return Fd(::openat(rootFd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

Fd openMarker(int folderFd) {
  return Fd(::openat(folderFd, DumpFolders::kMarkerName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
}

// Whether `marker` (open) is still the file the folder holds under the
// marker's name: a removal unlinks it, so a lock taken on an unlinked one
// protects nothing.
bool stillLinked(int folderFd, int markerFd) {
  struct stat open {}, named {};
  return ::fstat(markerFd, &open) == 0 &&
         ::fstatat(folderFd, DumpFolders::kMarkerName, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
         open.st_ino == named.st_ino && open.st_dev == named.st_dev;
}

// Writes the marker into the folder unless it has one. Written whole under a
// temporary name and linked into place, so nobody reads half a marker and
// of several ranks making it at once exactly one succeeds.
void addMarker(int folderFd) {
  struct stat st {};
  if (::fstatat(folderFd, DumpFolders::kMarkerName, &st, AT_SYMLINK_NOFOLLOW) == 0) return;
  const std::string temp = std::string(DumpFolders::kMarkerName) + ".tmp" + std::to_string(::getpid());
  Fd f(::openat(folderFd, temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!f) return;
  const std::string content = std::string(DumpFolders::kMarkerStart) +
                              ",\"version\":1,\"created_by\":\"meshcomm\",\"pid\":" +
                              std::to_string(::getpid()) + ",\"created_at\":" +
                              std::to_string(static_cast<long long>(std::time(nullptr))) + "}\n";
  const bool written = ::write(f.get(), content.data(), content.size()) ==
                       static_cast<ssize_t>(content.size());
  f.reset();
  if (written) ::linkat(folderFd, temp.c_str(), folderFd, DumpFolders::kMarkerName, 0);
  ::unlinkat(folderFd, temp.c_str(), 0);
}

// The value of `"key":` in a one-line JSON header: a number, or a string
// without escapes (pid and host, as FlightRecorder::dump writes them).
std::string headerField(std::string_view header, std::string_view key) {
  std::string pattern(1, '"');
  pattern.append(key);
  pattern.append("\":");
  const size_t at = header.find(pattern);
  if (at == std::string_view::npos) return "";
  std::string_view rest = header.substr(at + pattern.size());
  if (!rest.empty() && rest.front() == '"') {
    rest.remove_prefix(1);
    const size_t end = rest.find('"');
    return end == std::string_view::npos ? "" : std::string(rest.substr(0, end));
  }
  size_t end = 0;
  while (end < rest.size() && std::isdigit(static_cast<unsigned char>(rest[end]))) ++end;
  return std::string(rest.substr(0, end));
}

// When the process `pid` of this host started, in seconds since the epoch;
// -1 when no such process runs (or it is a zombie: it writes nothing more).
int64_t processStart(long pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
  Fd f(::open(path, O_RDONLY | O_CLOEXEC));
  if (!f) return -1;
  char buf[1024];
  const ssize_t n = ::read(f.get(), buf, sizeof(buf) - 1);
  if (n <= 0) return -1;
  const std::string_view stat(buf, static_cast<size_t>(n));
  // After the command name in parentheses: state (field 3) ... starttime (22).
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return -1;
  std::vector<std::string_view> fields;
  size_t pos = close + 2;
  while (pos < stat.size() && fields.size() < 20) {
    size_t end = stat.find(' ', pos);
    if (end == std::string_view::npos) end = stat.size();
    fields.push_back(stat.substr(pos, end - pos));
    pos = end + 1;
  }
  if (fields.size() < 20 || fields[0] == "Z" || fields[0] == "X") return -1;
  static const int64_t bootTime = [] {
    Fd s(::open("/proc/stat", O_RDONLY | O_CLOEXEC));
    std::string text(1 << 16, '\0');
    const ssize_t m = s ? ::read(s.get(), text.data(), text.size()) : -1;
    if (m <= 0) return int64_t{0};
    text.resize(static_cast<size_t>(m));
    const size_t at = text.find("\nbtime ");
    return at == std::string::npos ? int64_t{0} : static_cast<int64_t>(std::atoll(text.c_str() + at + 7));
  }();
  const long ticks = ::sysconf(_SC_CLK_TCK);
  return bootTime + std::atoll(std::string(fields[19]).c_str()) / (ticks > 0 ? ticks : 100);
}

// Whether the dump `name` in `folderFd` was written by a process of this
// host that still runs: the same pid, started no later than the dump.
bool writerRuns(int folderFd, const std::string& name) {
  Fd f(::openat(folderFd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!f) return false;
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) return false;
  char buf[kHeaderBytes];
  const ssize_t n = ::pread(f.get(), buf, sizeof(buf), 0);
  if (n <= 0) return false;
  std::string_view header(buf, static_cast<size_t>(n));
  header = header.substr(0, header.find('\n'));
  static const std::string thisHost = hostName();
  const std::string pid = headerField(header, "pid");
  if (pid.empty() || headerField(header, "host") != thisHost) return false;
  const int64_t started = processStart(std::atol(pid.c_str()));
  // One second of slack: both times are rounded to seconds.
  return started >= 0 && started <= static_cast<int64_t>(st.st_mtim.tv_sec) + 1;
}

struct Candidate {
  std::string name;
  // Seconds: the newest change of a file in it (the marker included). Not the
  // folder's own time, which a removal of its files in another process
  // makes "now": then a folder half-way out would count as the newest, and
  // a concurrent pruner of the same root would remove a newer one instead.
  int64_t writtenAt = 0;
  int64_t bytes = 0;
  bool writerRuns = false;  // a process that dumped here still runs
};

// What `folderFd` holds, when it is a marked folder holding only meshcomm's
// files; false otherwise (then it is never touched).
bool survey(int folderFd, Candidate& out) {
  Fd marker = openMarker(folderFd);
  if (!marker || !markerContentIsOurs(marker.get())) return false;
  out.writtenAt = 0;
  out.bytes = 0;
  out.writerRuns = false;
  std::vector<std::string> names;
  if (!listNames(folderFd, names)) return false;
  for (const std::string& name : names) {
    if (!isOwnFile(name)) return false;
    struct stat f {};
    if (::fstatat(folderFd, name.c_str(), &f, AT_SYMLINK_NOFOLLOW) != 0) continue;  // just removed
    if (!S_ISREG(f.st_mode)) return false;
    out.bytes += f.st_size;
    out.writtenAt = std::max<int64_t>(out.writtenAt, f.st_mtim.tv_sec);
    if (!out.writerRuns && name != DumpFolders::kMarkerName && name.find(".tmp") == std::string::npos) {
      out.writerRuns = writerRuns(folderFd, name);
    }
  }
  return true;
}

// Removes the folder `name` of `rootFd` if nobody holds its marker and it
// still holds only meshcomm's files. Returns whether it is gone.
bool removeFolder(int rootFd, const std::string& name) {
  Fd folder = openOwnFolder(rootFd, name);
  if (!folder) return false;
  Fd marker = openMarker(folder.get());
  if (!marker || ::flock(marker.get(), LOCK_EX | LOCK_NB) != 0) return false;  // in use
  if (!stillLinked(folder.get(), marker.get()) || !markerContentIsOurs(marker.get())) return false;
  // Another removal may have replaced the folder under the same name.
  struct stat open {}, named {};
  if (::fstat(folder.get(), &open) != 0 ||
      ::fstatat(rootFd, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
      open.st_ino != named.st_ino || open.st_dev != named.st_dev) {
    return false;
  }
  // Looked at again under the lock: only meshcomm's files, or nothing goes.
  Candidate again;
  std::vector<std::string> files;
  if (!survey(folder.get(), again) || again.writerRuns || !listNames(folder.get(), files)) {
    return false;
  }
  // The dumps first and the marker last: a folder left half-removed (a
  // file that appeared meanwhile) still carries the marker until the end.
  for (const std::string& f : files) {
    if (f != DumpFolders::kMarkerName && isOwnFile(f)) ::unlinkat(folder.get(), f.c_str(), 0);
  }
  ::unlinkat(folder.get(), DumpFolders::kMarkerName, 0);
  return ::unlinkat(rootFd, name.c_str(), AT_REMOVEDIR) == 0;
}

int64_t nonNegative(const char* name, int64_t fallback) {
  const int64_t v = envIntOr(name, fallback);
  if (v < 0) {
    throw InvalidArgument(std::string(name) + "=" + std::to_string(v) +
                          ": give a number, 0 or more (0: no limit)");
  }
  return v;
}

}  // namespace

DumpFolders::Policy DumpFolders::policyFromEnvironment() {
  Policy p;
  p.keepFolders = nonNegative("MESHCOMM_DUMP_RETAIN_JOBS", kDefaultKeepFolders);
  const int64_t mb = nonNegative("MESHCOMM_DUMP_RETAIN_MB", kDefaultKeepMegabytes);
  p.keepBytes = mb > (INT64_MAX >> 20) ? 0 : mb << 20;
  return p;
}

std::string DumpFolders::root() {
  if (auto r = envString("MESHCOMM_DUMP_ROOT"); r && !r->empty()) return *r;
  return "/tmp";
}

bool DumpFolders::isMarked(const std::string& dir) {
  if (!isFolderName(baseName(dir))) return false;
  Fd parent(::open(parentOf(dir).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent) return false;
  Fd folder = openOwnFolder(parent.get(), baseName(dir));
  if (!folder) return false;
  Fd marker = openMarker(folder.get());
  return marker && markerContentIsOurs(marker.get());
}

DumpFolders::Hold DumpFolders::enter(const std::string& dir, bool defaultLocation) {
  Hold hold;
  const std::string name = baseName(dir);
  if (!isFolderName(name)) return hold;
  const Deadline until = Deadline::after(kEnterFor);
  for (;;) {
    Fd parent(::open(parentOf(dir).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    Fd folder = parent ? openOwnFolder(parent.get(), name) : Fd();
    if (!folder && defaultLocation && parent) {
      // Removed meanwhile (by a removal this call waited for): make it again.
      ::mkdirat(parent.get(), name.c_str(), 0777);
      folder = openOwnFolder(parent.get(), name);
    }
    if (!folder) return hold;
    if (defaultLocation) addMarker(folder.get());
    Fd marker = openMarker(folder.get());
    if (!marker || !markerContentIsOurs(marker.get())) return hold;
    hold.marked_ = true;
    if (::flock(marker.get(), LOCK_SH | LOCK_NB) == 0) {
      if (stillLinked(folder.get(), marker.get())) {
        hold.fd_ = std::move(marker);
        return hold;
      }
    } else if (errno != EWOULDBLOCK) {
      return hold;  // a file system without flock: marked, but unprotected
    }
    if (until.expired()) {
      MESHCOMM_LOG(kWarn, "flight recorder: " << dir << " is being removed by another process; "
                                              "writing the dump without holding it");
      return hold;
    }
    std::this_thread::sleep_for(kEnterRetry);
  }
}

std::vector<std::string> DumpFolders::prune(const std::string& rootDir, const std::string& current,
                                            const Policy& policy) {
  std::vector<std::string> removed;
  if (policy.keepFolders == 0 && policy.keepBytes == 0) return removed;
  Fd rootFd(::open(rootDir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!rootFd) return removed;
  // A root with more entries than kMostEntries is pruned among those read.
  std::vector<std::string> names;
  listNames(rootFd.get(), names);
  names.erase(std::remove_if(names.begin(), names.end(),
                             [](const std::string& n) { return !isFolderName(n); }),
              names.end());
  std::vector<Candidate> candidates;
  int64_t keptBytes = 0;
  int64_t keptFolders = 0;
  for (const std::string& name : names) {
    Fd folder = openOwnFolder(rootFd.get(), name);
    Candidate c;
    c.name = name;
    if (!folder || !survey(folder.get(), c)) continue;  // not ours: never counted, never touched
    if (name == current) {
      keptBytes += c.bytes;
      ++keptFolders;
      continue;
    }
    candidates.push_back(std::move(c));
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.writtenAt != b.writtenAt ? a.writtenAt > b.writtenAt : a.name > b.name;
  });
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (const Candidate& c : candidates) {
    const bool fits = (policy.keepFolders == 0 || keptFolders < policy.keepFolders) &&
                      (policy.keepBytes == 0 || keptBytes + c.bytes <= policy.keepBytes);
    const bool quiet = now - c.writtenAt >= policy.quietPeriod.count();
    if (!fits && quiet && removeFolder(rootFd.get(), c.name)) {
      removed.push_back(rootDir + (rootDir.back() == '/' ? "" : "/") + c.name);
      continue;
    }
    // Kept (within the limits, recent, or in use): it takes its place.
    ++keptFolders;
    keptBytes += c.bytes;
  }
  return removed;
}

void DumpFolders::pruneAfterDump(const std::string& dir) {
  try {
    const std::string rootDir = root();
    struct stat a {}, b {};
    // Only among meshcomm's default folders, whatever spelling the paths have.
    if (::stat(parentOf(dir).c_str(), &a) != 0 || ::stat(rootDir.c_str(), &b) != 0 ||
        a.st_ino != b.st_ino || a.st_dev != b.st_dev || !isMarked(dir)) {
      return;
    }
    for (const std::string& gone : prune(rootDir, baseName(dir), policyFromEnvironment())) {
      MESHCOMM_LOG(kInfo, "flight recorder: removed " << gone << ", an old dump folder beyond "
                                                         "MESHCOMM_DUMP_RETAIN_JOBS/_MB");
    }
  } catch (const std::exception& e) {
    // A malformed setting must not cost the dump that was just written.
    MESHCOMM_LOG(kError, "flight recorder: old dump folders not pruned: " << e.what());
  }
}

}  // namespace meshcomm

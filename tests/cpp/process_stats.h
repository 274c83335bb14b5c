// What a process holds, read from /proc: open descriptors, threads,
// resident memory and CPU time, for tests that check nothing leaks and
// that an idle server stays idle.
//
// Thread-safety: plain functions; the counts are snapshots.
#pragma once

#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>

namespace meshcomm::test {

// Entries of a /proc directory; for /proc/self/fd, without the descriptor
// this call opens to read it.
inline int countDirEntries(const char* path) {
  DIR* d = ::opendir(path);
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - (std::strcmp(path, "/proc/self/fd") == 0 ? 1 : 0);  // opendir's own fd
}
// Open descriptors and threads of this process.
inline int openFdCount() { return countDirEntries("/proc/self/fd"); }

// "fd -> target" for every open descriptor, for failure messages.
inline std::string fdListing() {
  std::string out;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return out;
  const int own = ::dirfd(d);
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.' || std::atoi(e->d_name) == own) continue;
    char target[256] = {0};
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    ssize_t n = ::readlink(path.c_str(), target, sizeof(target) - 1);
    out += std::string(e->d_name) + "->" + (n > 0 ? std::string(target, static_cast<size_t>(n)) : "?") + " ";
  }
  ::closedir(d);
  return out;
}
inline int threadCount() { return countDirEntries("/proc/self/task"); }

// Polls count() until it is at most `limit` or `bound` passes; returns the
// last value. Threads and server-side sockets disappear asynchronously.
inline int settleTo(const std::function<int()>& count, int limit,
                    std::chrono::milliseconds bound) {
  auto until = std::chrono::steady_clock::now() + bound;
  int v = count();
  while (v > limit && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    v = count();
  }
  return v;
}

// Open descriptors of another process (its connections among them).
inline int openFdCountOf(pid_t pid) {
  return countDirEntries(("/proc/" + std::to_string(pid) + "/fd").c_str());
}

// Resident memory of a process in KiB.
inline int64_t residentKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

// CPU time (user + system, in clock ticks) a process has used.
inline int64_t cpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');  // the command name may contain spaces
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string f;
  int64_t utime = 0, stime = 0;
  // Fields after the name start at 3 (state); utime and stime are 14, 15.
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoll(f);
    if (i == 15) stime = std::stoll(f);
  }
  return utime + stime;
}

}  // namespace meshcomm::test

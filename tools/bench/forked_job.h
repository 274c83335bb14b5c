// A job whose ranks are children forked by one process, which supervises
// them: meshcomm-bench when no launcher starts it, and the peer benchmarks
// under bench/peers that start their own ranks. Header-only, with no
// meshcomm dependency, so a peer benchmark built against another library
// includes it as it is.
//
// Thread-safety: call from the process's only thread, before any other
// thread exists (a fork copies only the calling thread).
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

namespace meshcomm::bench {

// Exit codes shared by the parent and every rank.
inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitRuntime = 3;

namespace detail {

inline volatile sig_atomic_t gStopSignal = 0;

inline void onStopSignal(int sig) { gStopSignal = sig; }

}  // namespace detail

// Ends every rank not yet reaped: SIGTERM, a second to exit, then SIGKILL.
inline void killRanks(const std::vector<pid_t>& pids, const std::vector<bool>& reaped) {
  using Clock = std::chrono::steady_clock;
  for (size_t i = 0; i < pids.size(); ++i) {
    if (!reaped[i]) ::kill(pids[i], SIGTERM);
  }
  auto until = Clock::now() + std::chrono::seconds(1);
  for (size_t i = 0; i < pids.size(); ++i) {
    if (reaped[i]) continue;
    int status;
    while (::waitpid(pids[i], &status, WNOHANG) == 0 && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::kill(pids[i], SIGKILL);
    ::waitpid(pids[i], &status, 0);
  }
}

// Forks one child per rank; child `rank` exits with rankMain(rank), or with
// kExitRuntime when that throws (said on stderr after `prog`). A child
// never outlives this process. Returns the children's pids, or nullopt when
// a fork failed (the children already started are then ended).
inline std::optional<std::vector<pid_t>> forkRanks(const char* prog, int nranks,
                                                   const std::function<int(int rank)>& rankMain) {
  const pid_t parent = ::getpid();
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < nranks; ++rank) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) _exit(kExitRuntime);
      int rc = kExitRuntime;
      try {
        rc = rankMain(rank);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: rank %d: %s\n", prog, rank, e.what());
      }
      std::fflush(nullptr);
      _exit(rc);  // skips destructors of state shared with the parent
    }
    if (pid < 0) {
      std::fprintf(stderr, "%s: fork: %s\n", prog, std::strerror(errno));
      killRanks(pids, std::vector<bool>(pids.size(), false));
      return std::nullopt;
    }
    pids.push_back(pid);
  }
  return pids;
}

// Waits for every rank; on the first failure, SIGINT, SIGTERM or the end of
// `limit`, ends the rest. Returns the job's exit code: kExitOk,
// kExitCheckFailed when a rank's check failed (the others go on), or
// kExitRuntime.
inline int superviseRanks(const char* prog, const std::vector<pid_t>& pids,
                          std::chrono::seconds limit) {
  using Clock = std::chrono::steady_clock;
  struct sigaction sa {};
  sa.sa_handler = detail::onStopSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  const auto deadline = Clock::now() + limit;
  std::vector<bool> reaped(pids.size(), false);
  size_t alive = pids.size();
  int result = kExitOk;
  while (alive > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      if (reaped[r]) continue;
      int status = 0;
      pid_t got = ::waitpid(pids[r], &status, WNOHANG);
      if (got != pids[r]) continue;
      reaped[r] = true;
      --alive;
      int code = kExitRuntime;
      if (WIFEXITED(status)) {
        code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        std::fprintf(stderr, "%s: rank %zu (pid %d) was killed by signal %d\n", prog, r,
                     static_cast<int>(pids[r]), WTERMSIG(status));
      }
      if (code == kExitCheckFailed) {
        result = std::max(result, code);
      } else if (code != kExitOk) {
        if (alive > 0) {
          std::fprintf(stderr, "%s: rank %zu failed (exit %d); stopping the others\n", prog, r,
                       code);
        }
        killRanks(pids, reaped);
        return kExitRuntime;
      }
    }
    if (alive == 0) break;
    if (detail::gStopSignal != 0 || Clock::now() >= deadline) {
      std::fprintf(stderr, "%s: %s; killing %zu rank(s)\n", prog,
                   detail::gStopSignal != 0 ? "interrupted" : "--time-limit exceeded", alive);
      killRanks(pids, reaped);
      return kExitRuntime;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return result;
}

}  // namespace meshcomm::bench

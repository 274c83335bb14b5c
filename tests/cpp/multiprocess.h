// Fork-based multi-process test helpers: fork N children that run a
// function of their rank, wait for them with a time bound, and kill (by pid)
// any child still running when the bound passes or the test fails.
//
// A child never returns into GoogleTest: the function's return value (or a
// reserved code when it throws) becomes its exit status through _exit(), so
// the child runs no test-framework teardown and no inherited atexit handler.
//
// Children should be forked before the parent starts threads where possible
// (a thread holding a lock at fork() leaves it locked in the child forever);
// PipeChannel lets the parent hand children a value it only knows later,
// such as the port of a server it starts after forking, or lets a child
// report one (the port of a server the child hosts) to the parent.
//
// Thread-safety: ChildGroup is used from one thread; PipeChannel's post()
// and receive() may be called from any process holding the channel.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace meshcomm::test {

// Exit codes a child reports; 0 is success. Chosen above the range shells
// and sanitizers use (1, 2, 126-128+) so a code here is never accidental.
inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 70;   // CHILD_CHECK failed
inline constexpr int kExitException = 71;     // the child function threw
inline constexpr int kExitWrongError = 72;    // an expected error did not occur
inline constexpr int kExitStartFailed = 73;   // PipeChannel gave no value

// A failed check inside a child: report where and why on stderr, then exit
// with kExitCheckFailed. (GoogleTest assertions do not work in a child: the
// parent would never see their failure.) The optional message is streamed
// and, as with MESHCOMM_CHECK, starts with a string literal.
#define CHILD_CHECK(cond, ...)                                                \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::ostringstream child_check_os_;                                     \
      child_check_os_ << "" __VA_ARGS__;                                      \
      std::fprintf(stderr, "[child pid %d] %s:%d: check failed: %s %s\n",     \
                   static_cast<int>(::getpid()), __FILE__, __LINE__, #cond,   \
                   child_check_os_.str().c_str());                            \
      std::fflush(stderr);                                                    \
      ::_exit(::meshcomm::test::kExitCheckFailed);                            \
    }                                                                         \
  } while (0)

// How one child ended.
struct ChildStatus {
  pid_t pid = -1;
  bool exited = false;    // exited normally with exitCode
  int exitCode = -1;
  bool signaled = false;  // killed by termSignal
  int termSignal = 0;
  bool timedOut = false;  // still running at the bound; the helper killed it
  // Still running a while after another child failed; the helper killed it
  // (waitAllStoppingAfterFailure).
  bool stoppedAfterFailure = false;

  bool ok() const { return exited && exitCode == kExitOk && !timedOut && !stoppedAfterFailure; }
  // Ended with one of the codes above that say the child's test failed.
  bool failedItsTest() const {
    return exited && (exitCode == kExitCheckFailed || exitCode == kExitException ||
                      exitCode == kExitWrongError || exitCode == kExitStartFailed);
  }
  std::string describe() const {
    std::ostringstream os;
    os << "pid " << pid << ": ";
    if (timedOut) os << "timed out (killed) ";
    if (stoppedAfterFailure) os << "stopped (killed) after another rank failed ";
    if (exited) os << "exited with code " << exitCode;
    if (signaled) os << "killed by signal " << termSignal << " (" << strsignal(termSignal) << ")";
    if (!exited && !signaled) os << "not reaped";
    return os.str();
  }
};

inline std::string describeAll(const std::vector<ChildStatus>& all) {
  std::string out;
  for (size_t i = 0; i < all.size(); ++i) {
    out += "rank " + std::to_string(i) + " " + all[i].describe() + "\n";
  }
  return out;
}

inline bool allOk(const std::vector<ChildStatus>& all) {
  for (const auto& s : all) {
    if (!s.ok()) return false;
  }
  return true;
}

// A bound a test puts on something slow, scaled by
// MESHCOMM_TEST_BOUND_SCALE: the sanitizer runs of test-long slow every
// process down several times.
inline std::chrono::milliseconds scaledBound(std::chrono::milliseconds bound) {
  if (const char* scale = std::getenv("MESHCOMM_TEST_BOUND_SCALE")) bound *= std::max(1, std::atoi(scale));
  return bound;
}

// Children forked at construction, each running fn(rank) for rank in
// [0, n). The destructor kills (SIGKILL, by pid) and reaps every child not
// yet reaped, so a failed test never leaves processes behind.
class ChildGroup {
 public:
  ChildGroup(int n, const std::function<int(int rank)>& fn) {
    // Flush before forking so buffered output is not written twice.
    std::fflush(stdout);
    std::fflush(stderr);
    for (int rank = 0; rank < n; ++rank) {
      pid_t pid = ::fork();
      if (pid < 0) {
        std::fprintf(stderr, "fork failed: %s\n", std::strerror(errno));
        break;  // children_ is shorter than n; callers check size()
      }
      if (pid == 0) runChild(fn, rank);
      children_.push_back(pid);
    }
    statuses_.resize(children_.size());
    for (size_t i = 0; i < children_.size(); ++i) statuses_[i].pid = children_[i];
  }

  ~ChildGroup() { killAll(SIGKILL); }

  ChildGroup(const ChildGroup&) = delete;
  ChildGroup& operator=(const ChildGroup&) = delete;

  size_t size() const { return children_.size(); }
  pid_t pid(int rank) const { return children_.at(static_cast<size_t>(rank)); }

  // Sends sig to one child if it has not been reaped yet.
  void signal(int rank, int sig) {
    size_t i = static_cast<size_t>(rank);
    if (!reaped(i)) ::kill(children_.at(i), sig);
  }

  // Waits for one child up to timeout; on timeout kills it and marks it.
  ChildStatus waitOne(int rank, std::chrono::milliseconds timeout) {
    size_t i = static_cast<size_t>(rank);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!reaped(i)) {
      if (tryReap(i)) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(children_[i], SIGKILL);
        reapBlocking(i);
        statuses_[i].timedOut = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return statuses_[i];
  }

  // Waits for every child up to one shared bound; kills stragglers. The
  // sanitizer runs of test-long slow everything down several times, so
  // MESHCOMM_TEST_BOUND_SCALE multiplies the bound there.
  std::vector<ChildStatus> waitAll(std::chrono::milliseconds timeout) {
    return waitAllWithin(timeout, std::nullopt);
  }

  // waitAll, except that once a child fails its test (failedItsTest: a
  // failed check, an escaped exception) the others get `grace` to end by
  // themselves and are then killed and marked stoppedAfterFailure. For
  // children that wait for each other (the ranks of a job), which would
  // otherwise wait for the failed one until the bound.
  std::vector<ChildStatus> waitAllStoppingAfterFailure(std::chrono::milliseconds timeout,
                                                       std::chrono::milliseconds grace) {
    return waitAllWithin(timeout, grace);
  }

  // Whether the child is still running (reaps it if it has ended).
  bool alive(int rank) {
    size_t i = static_cast<size_t>(rank);
    return !reaped(i) && !tryReap(i);
  }

  void killAll(int sig) {
    for (size_t i = 0; i < children_.size(); ++i) {
      if (reaped(i)) continue;
      ::kill(children_[i], sig);
      if (sig == SIGKILL) reapBlocking(i);
    }
  }

 private:
  std::vector<ChildStatus> waitAllWithin(std::chrono::milliseconds timeout,
                                         std::optional<std::chrono::milliseconds> graceAfterFailure) {
    timeout = scaledBound(timeout);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    bool failureSeen = false;
    bool deadlineIsGrace = false;  // the deadline became the end of a failure's grace
    for (;;) {
      bool pending = false;
      for (size_t i = 0; i < children_.size(); ++i) {
        if (!reaped(i) && !tryReap(i)) pending = true;
      }
      if (!pending) break;
      if (graceAfterFailure && !failureSeen) {
        for (const auto& s : statuses_) failureSeen = failureSeen || s.failedItsTest();
        if (failureSeen) {
          const auto stopAt = std::chrono::steady_clock::now() + *graceAfterFailure;
          if (stopAt < deadline) {
            deadline = stopAt;
            deadlineIsGrace = true;
          }
        }
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        for (size_t i = 0; i < children_.size(); ++i) {
          if (reaped(i)) continue;
          ::kill(children_[i], SIGKILL);
          reapBlocking(i);
          (deadlineIsGrace ? statuses_[i].stoppedAfterFailure : statuses_[i].timedOut) = true;
        }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return statuses_;
  }

  [[noreturn]] static void runChild(const std::function<int(int)>& fn, int rank) {
    int code = kExitException;
    try {
      code = fn(rank);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[child rank %d pid %d] uncaught exception: %s\n", rank,
                   static_cast<int>(::getpid()), e.what());
    } catch (...) {
      std::fprintf(stderr, "[child rank %d pid %d] uncaught non-std exception\n",
                   rank, static_cast<int>(::getpid()));
    }
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(code);
  }

  bool reaped(size_t i) const {
    return statuses_[i].exited || statuses_[i].signaled;
  }

  void record(size_t i, int status) {
    if (WIFEXITED(status)) {
      statuses_[i].exited = true;
      statuses_[i].exitCode = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      statuses_[i].signaled = true;
      statuses_[i].termSignal = WTERMSIG(status);
    }
  }

  bool tryReap(size_t i) {
    int status = 0;
    pid_t r = ::waitpid(children_[i], &status, WNOHANG);
    if (r == children_[i]) {
      record(i, status);
      return reaped(i);
    }
    if (r < 0 && errno == ECHILD) {
      // Reaped elsewhere; treat as an abnormal end rather than spin.
      statuses_[i].signaled = true;
      return true;
    }
    return false;
  }

  void reapBlocking(size_t i) {
    int status = 0;
    for (;;) {
      pid_t r = ::waitpid(children_[i], &status, 0);
      if (r == children_[i]) {
        record(i, status);
        if (reaped(i)) return;
        continue;  // stopped/continued notifications do not end the child
      }
      if (r < 0 && errno == EINTR) continue;
      statuses_[i].signaled = true;
      return;
    }
  }

  std::vector<pid_t> children_;
  std::vector<ChildStatus> statuses_;
};

// Forks n children running fn(rank), waits for all of them up to timeout,
// kills stragglers, and returns every child's status (index = rank).
inline std::vector<ChildStatus> runChildren(int n, const std::function<int(int)>& fn,
                                            std::chrono::milliseconds timeout) {
  ChildGroup group(n, fn);
  return group.waitAll(timeout);
}

// A pipe carrying 8-byte values between processes, created before forking.
// Usually the parent posts one value per child (a port, a "go" signal) and
// each child receives one with a deadline; a child may equally post a value
// for the parent. Writes of 8 bytes to a pipe are atomic, so concurrent
// readers each receive a whole value.
class PipeChannel {
 public:
  PipeChannel() {
    if (::pipe2(fds_, O_CLOEXEC) != 0) {
      fds_[0] = fds_[1] = -1;
      return;
    }
    // Several children poll one read end: all wake, one wins the value, and
    // the rest must go back to poll() rather than block in read().
    ::fcntl(fds_[0], F_SETFL, ::fcntl(fds_[0], F_GETFL) | O_NONBLOCK);
  }
  ~PipeChannel() {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  PipeChannel(const PipeChannel&) = delete;
  PipeChannel& operator=(const PipeChannel&) = delete;

  // Posts `copies` copies of value (one per receiver). Returns false on error.
  bool post(uint64_t value, int copies) {
    for (int i = 0; i < copies; ++i) {
      ssize_t n;
      do {
        n = ::write(fds_[1], &value, sizeof(value));
      } while (n < 0 && errno == EINTR);
      if (n != static_cast<ssize_t>(sizeof(value))) return false;
    }
    return true;
  }

  // Waits up to timeout for one value.
  std::optional<uint64_t> receive(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{fds_[0], POLLIN, 0};
      int rc = ::poll(&p, 1, static_cast<int>(left.count()));
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0) return std::nullopt;
      uint64_t value = 0;
      ssize_t n = ::read(fds_[0], &value, sizeof(value));
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n != static_cast<ssize_t>(sizeof(value))) return std::nullopt;
      return value;
    }
  }

  // In a child: like receive(), but exits with kExitStartFailed when no
  // value arrives, since a child without its start value has nothing to do.
  uint64_t receiveOrExit(std::chrono::milliseconds timeout) {
    auto v = receive(timeout);
    if (!v) {
      std::fprintf(stderr, "[child pid %d] no start value from the parent\n",
                   static_cast<int>(::getpid()));
      std::fflush(stderr);
      ::_exit(kExitStartFailed);
    }
    return *v;
  }

 private:
  int fds_[2] = {-1, -1};
};

}  // namespace meshcomm::test

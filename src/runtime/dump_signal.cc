#include "runtime/dump_signal.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "common/logging.h"
#include "common/mutex.h"
#include "runtime/flight_recorder.h"

namespace meshcomm {
namespace {

constexpr char kDump = 'd';
constexpr char kQuit = 'q';

// The pipe's write end, for the handler; -1 while nobody listens.
std::atomic<int> gWakeFd{-1};

void onSignal(int) {
  const int saved = errno;
  const int fd = gWakeFd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    // Non-blocking: with the pipe full a dump is already due.
    [[maybe_unused]] ssize_t n = ::write(fd, &kDump, 1);
  }
  errno = saved;
}

void dumpLoop(int readFd) {
  for (;;) {
    char buf[64];
    const ssize_t n = ::read(readFd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bool quit = false, dump = false;
    for (ssize_t i = 0; i < n; ++i) {
      quit = quit || buf[i] == kQuit;
      dump = dump || buf[i] == kDump;
    }
    if (dump) {
      try {
        const std::string file = FlightRecorder::instance()->dump("", "SIGUSR1");
        MESHCOMM_LOG(kWarn, "flight recorder written to " << file << " (SIGUSR1)");
      } catch (const std::exception& e) {
        MESHCOMM_LOG(kError, "SIGUSR1: " << e.what());
      }
    }
    if (quit) return;
  }
}

struct Listener {
  Mutex mu;
  int holders GUARDED_BY(mu) = 0;
  bool installed GUARDED_BY(mu) = false;
  struct sigaction previous GUARDED_BY(mu) {};
  int fds[2] GUARDED_BY(mu) = {-1, -1};
  std::thread thread GUARDED_BY(mu);
};
Listener& listener() {
  static Listener* l = new Listener;  // used until the process ends
  return *l;
}

}  // namespace

void DumpOnSignal::hold() {
  if (FlightRecorder::instance() == nullptr) return;
  Listener& l = listener();
  MutexLock lock(l.mu);
  if (l.holders++ > 0) return;
  struct sigaction current {};
  ::sigaction(SIGUSR1, nullptr, &current);
  if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) {
    MESHCOMM_LOG(kInfo, "SIGUSR1 has a handler of the program's; the flight recorder is "
                        "written on errors and on demand only");
    return;
  }
  if (::pipe2(l.fds, O_CLOEXEC) != 0) {
    MESHCOMM_LOG(kWarn, "no pipe for the flight recorder's SIGUSR1 handler: " << errno);
    l.fds[0] = l.fds[1] = -1;
    return;
  }
  ::fcntl(l.fds[1], F_SETFL, O_NONBLOCK);
  l.thread = std::thread(dumpLoop, l.fds[0]);
  gWakeFd.store(l.fds[1]);
  struct sigaction ours {};
  ours.sa_handler = onSignal;
  ours.sa_flags = SA_RESTART;
  sigemptyset(&ours.sa_mask);
  ::sigaction(SIGUSR1, &ours, &l.previous);
  l.installed = true;
}

void DumpOnSignal::release() {
  if (FlightRecorder::instance() == nullptr) return;
  Listener& l = listener();
  MutexLock lock(l.mu);
  if (--l.holders > 0 || !l.installed) return;
  // Unless the program has since put a handler of its own in place.
  struct sigaction current {};
  ::sigaction(SIGUSR1, nullptr, &current);
  if ((current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == onSignal) {
    ::sigaction(SIGUSR1, &l.previous, nullptr);
  }
  gWakeFd.store(-1);
  while (::write(l.fds[1], &kQuit, 1) < 0 && errno == EINTR) {
  }
  l.thread.join();
  ::close(l.fds[0]);
  ::close(l.fds[1]);
  l.fds[0] = l.fds[1] = -1;
  l.installed = false;
}

}  // namespace meshcomm

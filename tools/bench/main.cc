// meshcomm-bench: nccl-tests-style tables for meshcomm collectives.
//
// Two ways to run. Standalone, the process forks -n ranks and supervises
// them: rank 0 hosts a TCPStore on a free port and hands the port to the
// others through a pipe made before the fork, and the parent kills every
// rank (by pid) when one fails or the run outlasts --time-limit. Under a
// launcher (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set), each process is
// one rank and joins through env://; an alarm bounds it instead.
//
// Thread-safety: single-threaded apart from the library's own threads; the
// fork happens before the library starts any.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "forked_job.h"
#include "meshcomm/error.h"
#include "meshcomm/process_group.h"
#include "meshcomm/store.h"
#include "options.h"
#include "report.h"
#include "runner.h"

namespace meshcomm::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Counts ranks that have left their World, so the rank hosting the store
// keeps it up until no one needs it.
constexpr const char* kDoneKey = "meshcomm-bench/done";

void onAlarm(int) {
  static const char kMsg[] = "meshcomm-bench: --time-limit exceeded; exiting\n";
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  _exit(kExitRuntime);
}

RunDescription describe(const Options& o, int nranks, const std::string& launch) {
  RunDescription d;
  d.op = o.collective->name;
  d.nranks = nranks;
  d.dtype = dtypeName(o.dtype);
  if (o.collective->reduces()) d.reduceOp = reduceOpName(o.op);
  if (o.collective->rooted()) d.root = o.root;
  d.launch = launch;
  d.mode = waitModeName(o.mode);
  if (o.mode == WaitMode::kAsync) d.mode += " (window " + std::to_string(o.window) + ")";
  d.iters = o.iters > 0 ? std::to_string(o.iters) : "adaptive";
  d.warmup = o.warmup;
  d.buffers = o.buffers > 0 ? std::to_string(o.buffers) : "auto";
  return d;
}

// Waits until every rank has reached this point, through the store rather
// than the group: a rank that leaves its World closes its connections, and
// a peer still finishing the last collective would see that as a lost peer.
void storeBarrier(Store& store, int nranks) {
  constexpr const char* kArrived = "meshcomm-bench/finished";
  constexpr const char* kAll = "meshcomm-bench/finished/all";
  if (store.add(kArrived, 1) == nranks) store.set(kAll, std::string("1"));
  store.wait({kAll});
}

// Joins the job, runs the sweep, leaves. `openSync` gives a store every rank
// can reach, used to leave together; it is called after the job has formed.
// Returns the rank's exit code.
int runRank(const Options& o, const InitOptions& init, const std::string& launch,
            const std::function<std::shared_ptr<Store>()>& openSync) {
  auto world = World::init(init);
  auto group = world->worldGroup();
  std::unique_ptr<Reporter> reporter;
  if (world->rank() == 0) {
    reporter = std::make_unique<Reporter>(o.csv, stdout);
    reporter->begin(describe(o, world->size(), launch));
  }
  int rc = runSweep(o, *group, reporter.get());
  if (reporter) reporter->end();
  storeBarrier(*openSync(), world->size());
  group.reset();
  world.reset();
  return rc;
}

// ---- standalone: one forked child per rank ----

// Reads rank 0's store port from the pipe, bounded by `timeout`.
uint16_t receivePort(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  } while (ready < 0 && errno == EINTR);
  if (ready == 0) throw Timeout("rank 0 did not publish the store port in time");
  uint16_t port = 0;
  ssize_t n;
  do {
    n = ::read(fd, &port, sizeof port);
  } while (n < 0 && errno == EINTR);
  // Rank 0 writes one 2-byte record per reader, and pipe writes that small
  // are atomic, so a read returns a whole record or EOF.
  if (n != static_cast<ssize_t>(sizeof port)) {
    throw Error("rank 0 exited before publishing the store port");
  }
  return port;
}

int childMain(const Options& o, int rank, int nranks, int pipeRead, int pipeWrite) {
  std::shared_ptr<TCPStore> store;
  TCPStoreOptions so;
  so.host = "127.0.0.1";
  so.timeout = o.timeout;
  if (rank == 0) {
    ::close(pipeRead);
    so.port = 0;
    so.isServer = true;
    so.worldSize = nranks;
    so.waitForWorkers = false;  // the others learn the port only after this returns
    store = std::make_shared<TCPStore>(so);
    uint16_t port = store->port();
    for (int i = 1; i < nranks; ++i) {
      if (::write(pipeWrite, &port, sizeof port) != static_cast<ssize_t>(sizeof port)) {
        throw Error(std::string("cannot hand out the store port: ") + std::strerror(errno));
      }
    }
    ::close(pipeWrite);
  } else {
    ::close(pipeWrite);
    so.port = receivePort(pipeRead, o.timeout);
    ::close(pipeRead);
    store = std::make_shared<TCPStore>(so);
  }

  InitOptions init;
  init.store = store;
  init.rank = rank;
  init.worldSize = nranks;
  init.timeout = o.timeout;
  int rc = runRank(o, init, "fork, TCPStore on 127.0.0.1:" + std::to_string(store->port()),
                   [&store] { return store; });

  if (rank == 0) {
    auto until = Clock::now() + o.timeout;
    while (store->add(kDoneKey, 0) < nranks - 1 && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  } else {
    store->add(kDoneKey, 1);
  }
  return rc;
}

int runForked(const Options& o) {
  const int nranks = *o.nranks;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "meshcomm-bench: pipe: %s\n", std::strerror(errno));
    return kExitRuntime;
  }
  auto pids = forkRanks("meshcomm-bench", nranks, [&](int rank) {
    return childMain(o, rank, nranks, fds[0], fds[1]);
  });
  ::close(fds[0]);
  ::close(fds[1]);
  if (!pids) return kExitRuntime;
  return superviseRanks("meshcomm-bench", *pids, o.timeLimit);
}

// ---- under a launcher ----

int runLaunched(Options o) {
  const char* ws = std::getenv("WORLD_SIZE");
  char* end = nullptr;
  long worldSize = std::strtol(ws, &end, 10);
  if (end == ws || *end != '\0' || worldSize < 1) {
    std::fprintf(stderr, "meshcomm-bench: WORLD_SIZE='%s' is not a positive integer\n", ws);
    return kExitUsage;
  }
  if (o.nranks && *o.nranks != worldSize) {
    std::fprintf(stderr, "meshcomm-bench: -n %d disagrees with WORLD_SIZE=%ld from the launcher\n",
                 *o.nranks, worldSize);
    return kExitUsage;
  }
  if (auto err = checkRankCount(o, static_cast<int>(worldSize))) {
    std::fprintf(stderr, "meshcomm-bench: %s\n", err->c_str());
    return kExitUsage;
  }
  struct sigaction sa {};
  sa.sa_handler = onAlarm;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGALRM, &sa, nullptr);
  ::alarm(static_cast<unsigned>(o.timeLimit.count()));

  InitOptions init;
  init.initMethod = "env://";
  init.timeout = o.timeout;
  std::string launch = std::string("env:// (MASTER_ADDR ") + std::getenv("MASTER_ADDR") + ":" +
                       std::getenv("MASTER_PORT") + ")";
  try {
    // A second connection to the job's store, which rank 0's World hosts
    // until every rank has left.
    auto openSync = [&o]() -> std::shared_ptr<Store> {
      TCPStoreOptions so;
      so.host = std::getenv("MASTER_ADDR");
      so.port = static_cast<uint16_t>(std::atoi(std::getenv("MASTER_PORT")));
      so.timeout = o.timeout;
      return std::make_shared<TCPStore>(so);
    };
    return runRank(o, init, launch, openSync);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "meshcomm-bench: rank %s: %s\n", std::getenv("RANK"), e.what());
    return kExitRuntime;
  }
}

}  // namespace
}  // namespace meshcomm::bench

int main(int argc, char** argv) {
  using namespace meshcomm::bench;
  Options options;
  ParseResult parsed = parseOptions(argc, argv, options);
  if (!parsed.run) {
    std::fputs(parsed.message.c_str(), parsed.exitCode == kExitOk ? stdout : stderr);
    if (!parsed.message.empty() && parsed.message.back() != '\n') {
      std::fputc('\n', parsed.exitCode == kExitOk ? stdout : stderr);
    }
    return parsed.exitCode;
  }

  static const char* kLauncherVars[] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
  std::string missing;
  int present = 0;
  for (const char* v : kLauncherVars) {
    if (std::getenv(v) != nullptr) {
      ++present;
    } else {
      missing += std::string(missing.empty() ? "" : ", ") + v;
    }
  }
  if (present == 4) return runLaunched(options);
  if (present > 0) {
    std::fprintf(stderr,
                 "meshcomm-bench: a launcher environment needs RANK, WORLD_SIZE, MASTER_ADDR and "
                 "MASTER_PORT; %s missing (unset the others to fork ranks locally)\n",
                 missing.c_str());
    return kExitUsage;
  }
  if (!options.nranks) {
    std::fprintf(stderr, "meshcomm-bench: -n N is required when not under a launcher\n"
                         "Try 'meshcomm-bench --help'.\n");
    return kExitUsage;
  }
  return runForked(options);
}

// store_bench: operations per second of meshcomm's TCPStore for set, get and
// add, with small and large values, from 1 and from several concurrent
// client processes.
//
// Each measurement is one fresh setup: the parent forks the client processes
// first (while it has no threads), then starts the server, hands the port to
// the clients through a pipe, and releases them together through a "go" key
// once all have connected (and, for get, stored the keys they read). Every
// client then runs the operation until --duration-ms passes or it has done
// --max-ops, and reports its count and elapsed time over a second pipe. A
// row's ops/s is the clients' total count over the slowest client's time.
// bench/torch_store_bench.py runs the same protocol against
// torch.distributed.TCPStore; bench/compare_store.sh puts the two together.
//
// Bounded: clients are killed by pid when any fails or the results do not
// arrive within --duration-ms plus --timeout-ms.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "meshcomm/error.h"
#include "meshcomm/store.h"

namespace {

using Clock = std::chrono::steady_clock;
using meshcomm::Bytes;
using meshcomm::TCPStore;
using meshcomm::TCPStoreOptions;

constexpr int kExitUsage = 2;
constexpr int kExitRuntime = 3;

enum class Op { kSet, kGet, kAdd };
const char* opName(Op op) {
  static constexpr const char* kNames[] = {"set", "get", "add"};  // Op's order
  return kNames[static_cast<size_t>(op)];
}

struct Config {
  std::vector<Op> ops = {Op::kSet, Op::kGet, Op::kAdd};
  std::vector<uint64_t> sizes = {64, 1 << 20};
  std::vector<int> clients = {1, 4};
  int64_t durationMs = 2000;
  int64_t maxOps = 200000;
  int keys = 4;  // distinct keys each client cycles through
  int64_t timeoutMs = 30000;
  bool csv = false;
};

struct Measurement {
  Op op;
  uint64_t valueBytes;  // 0 for add, which has no value payload
  int clients;
};

struct Outcome {
  int64_t ops = 0;
  double seconds = 0;  // the slowest client's
  double opsPerSecond() const { return seconds > 0 ? static_cast<double>(ops) / seconds : 0; }
};

// One client's report; small enough that its pipe write is atomic.
struct Record {
  int32_t client = 0;
  int32_t ok = 0;
  int64_t ops = 0;
  double seconds = 0;
  char error[240] = {};
};
static_assert(sizeof(Record) < PIPE_BUF);

std::string key(int client, int64_t k) {
  return "sb/" + std::to_string(client) + "/" + std::to_string(k);
}

bool readFull(int fd, void* buf, size_t len, Clock::time_point deadline) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t n = ::read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

// ---- the client process ----

Record runClient(const Config& cfg, const Measurement& m, int id, int portFd) {
  Record rec;
  rec.client = id;
  uint16_t port = 0;
  auto timeout = std::chrono::milliseconds(cfg.timeoutMs);
  if (!readFull(portFd, &port, sizeof port, Clock::now() + timeout)) {
    throw meshcomm::Error("no store port from the parent");
  }
  TCPStoreOptions so;
  so.host = "127.0.0.1";
  so.port = port;
  so.timeout = timeout;
  TCPStore store(so);

  Bytes value(m.valueBytes, static_cast<uint8_t>('a' + id % 26));
  std::vector<std::string> keys;
  for (int k = 0; k < cfg.keys; ++k) keys.push_back(key(id, k));
  if (m.op == Op::kGet) {
    for (const auto& k : keys) store.set(k, value);
  }
  store.add("sb/ready", 1);
  store.get("sb/go");

  const auto start = Clock::now();
  const auto stop = start + std::chrono::milliseconds(cfg.durationMs);
  int64_t ops = 0;
  size_t k = 0;
  size_t checksum = 0;  // consumes get's result so nothing is elided
  while (ops < cfg.maxOps && Clock::now() < stop) {
    switch (m.op) {
      case Op::kSet: store.set(keys[k], value); break;
      case Op::kGet: checksum += store.get(keys[k]).size(); break;
      case Op::kAdd: store.add(keys[k], 1); break;
    }
    ++ops;
    if (++k == keys.size()) k = 0;
  }
  rec.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  rec.ops = ops;
  rec.ok = 1;
  if (m.op == Op::kGet && checksum != static_cast<size_t>(ops) * m.valueBytes) {
    rec.ok = 0;
    std::snprintf(rec.error, sizeof rec.error, "get returned values of the wrong size");
  }
  return rec;
}

// ---- the parent ----

void killAll(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) ::kill(p, SIGKILL);
  for (pid_t p : pids) {
    int st;
    ::waitpid(p, &st, 0);
  }
}

// Kills and reaps the clients on every exit path unless they were reaped.
struct Children {
  std::vector<pid_t> pids;
  bool reaped = false;
  ~Children() {
    if (!reaped) killAll(pids);
  }
};

Outcome measure(const Config& cfg, const Measurement& m) {
  int portPipe[2], resultPipe[2];
  if (::pipe2(portPipe, O_CLOEXEC) != 0 || ::pipe2(resultPipe, O_CLOEXEC) != 0) {
    throw meshcomm::Error(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  std::fflush(nullptr);
  Children children;
  std::vector<pid_t>& pids = children.pids;
  for (int id = 0; id < m.clients; ++id) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) _exit(kExitRuntime);
      ::close(portPipe[1]);
      ::close(resultPipe[0]);
      Record rec;
      rec.client = id;
      try {
        rec = runClient(cfg, m, id, portPipe[0]);
      } catch (const std::exception& e) {
        rec.ok = 0;
        std::snprintf(rec.error, sizeof rec.error, "%s", e.what());
      }
      [[maybe_unused]] ssize_t n = ::write(resultPipe[1], &rec, sizeof rec);
      _exit(rec.ok ? 0 : kExitRuntime);
    }
    if (pid < 0) {
      throw meshcomm::Error(std::string("fork: ") + std::strerror(errno));
    }
    pids.push_back(pid);
  }
  ::close(portPipe[0]);
  ::close(resultPipe[1]);

  Outcome out;
  std::string failure;
  {
    // The server lives only while this measurement runs, so the next fork
    // happens in a process without its thread.
    TCPStoreOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.isServer = true;
    so.waitForWorkers = false;
    so.timeout = std::chrono::milliseconds(cfg.timeoutMs);
    TCPStore server(so);
    uint16_t port = server.port();
    for (int i = 0; i < m.clients; ++i) {
      [[maybe_unused]] ssize_t n = ::write(portPipe[1], &port, sizeof port);
    }
    ::close(portPipe[1]);

    const auto readyBy = Clock::now() + std::chrono::milliseconds(cfg.timeoutMs);
    while (server.add("sb/ready", 0) < m.clients && Clock::now() < readyBy) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (server.add("sb/ready", 0) < m.clients) {
      failure = "clients did not connect in time";
    } else {
      server.set("sb/go", std::string("1"));
      const auto doneBy = Clock::now() + std::chrono::milliseconds(cfg.durationMs + cfg.timeoutMs);
      for (int i = 0; i < m.clients && failure.empty(); ++i) {
        Record rec;
        if (!readFull(resultPipe[0], &rec, sizeof rec, doneBy)) {
          failure = "a client did not report in time";
        } else if (!rec.ok) {
          failure = "client " + std::to_string(rec.client) + ": " + rec.error;
        } else {
          out.ops += rec.ops;
          out.seconds = std::max(out.seconds, rec.seconds);
        }
      }
    }
    ::close(resultPipe[0]);
  }
  if (!failure.empty()) {
    throw meshcomm::Error(std::string(opName(m.op)) + " " + std::to_string(m.valueBytes) + " B x" +
                          std::to_string(m.clients) + ": " + failure);
  }
  for (pid_t p : pids) {
    int st = 0;
    ::waitpid(p, &st, 0);
  }
  children.reaped = true;
  return out;
}

// ---- command line ----

std::optional<uint64_t> parseSize(std::string_view t) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end == t.data()) return std::nullopt;
  std::string_view suffix(end, static_cast<size_t>(t.data() + t.size() - end));
  int shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (!suffix.empty()) return std::nullopt;
  if (v == 0 || v > (uint64_t{1} << 30) >> shift) return std::nullopt;
  return v << shift;
}

std::optional<int64_t> parseInt(std::string_view t, int64_t lo, int64_t hi) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

std::vector<std::string_view> splitCommas(std::string_view t) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= t.size()) {
    size_t comma = t.find(',', start);
    if (comma == std::string_view::npos) comma = t.size();
    parts.push_back(t.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

constexpr const char* kHelp = R"(usage: store_bench [options]

Operations per second of meshcomm's TCPStore (server in this process, each
client a forked process with its own connection, all on 127.0.0.1).

  --ops LIST          set,get,add (default all three)
  --sizes LIST        value sizes for set and get (default 64,1M; K/M suffix)
  --clients LIST      concurrent client processes (default 1,4)
  --duration-ms MS    per measurement, each client stops after MS ... (2000)
  --max-ops N         ... or after N operations, whichever is first (200000)
  --keys K            distinct keys each client cycles through (default 4)
  --timeout-ms MS     connect/start/report deadline (default 30000)
  --csv               print op,value_bytes,clients,ops_per_s
  -h, --help          this text

add has no value payload: it runs once per client count with value_bytes 0.
ops_per_s = all clients' operations / the slowest client's elapsed time.
)";

int usage(const std::string& what) {
  std::fprintf(stderr, "store_bench: %s\nTry 'store_bench --help'.\n", what.c_str());
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (arg == "--csv") {
      cfg.csv = true;
      continue;
    }
    std::string_view name = arg, value;
    bool hasValue = false;
    if (auto eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      hasValue = true;
    }
    static const char* kValued[] = {"--ops", "--sizes", "--clients", "--duration-ms",
                                    "--max-ops", "--keys", "--timeout-ms"};
    if (std::find(std::begin(kValued), std::end(kValued), name) == std::end(kValued)) {
      return usage("unknown argument '" + std::string(arg) + "'");
    }
    if (!hasValue) {
      if (i + 1 >= argc) return usage(std::string(name) + " needs a value");
      value = argv[++i];
    }
    auto bad = [&] { return usage("bad value '" + std::string(value) + "' for " + std::string(name)); };
    if (name == "--ops") {
      cfg.ops.clear();
      for (auto p : splitCommas(value)) {
        if (p == "set") cfg.ops.push_back(Op::kSet);
        else if (p == "get") cfg.ops.push_back(Op::kGet);
        else if (p == "add") cfg.ops.push_back(Op::kAdd);
        else return bad();
      }
    } else if (name == "--sizes") {
      cfg.sizes.clear();
      for (auto p : splitCommas(value)) {
        auto s = parseSize(p);
        if (!s) return bad();
        cfg.sizes.push_back(*s);
      }
    } else if (name == "--clients") {
      cfg.clients.clear();
      for (auto p : splitCommas(value)) {
        auto c = parseInt(p, 1, 256);
        if (!c) return bad();
        cfg.clients.push_back(static_cast<int>(*c));
      }
    } else {
      auto v = parseInt(value, 1, name == "--keys" ? 4096 : 1'000'000'000);
      if (!v) return bad();
      if (name == "--duration-ms") cfg.durationMs = *v;
      else if (name == "--max-ops") cfg.maxOps = *v;
      else if (name == "--keys") cfg.keys = static_cast<int>(*v);
      else cfg.timeoutMs = *v;
    }
  }

  std::vector<Measurement> plan;
  for (Op op : cfg.ops) {
    std::vector<uint64_t> sizes = op == Op::kAdd ? std::vector<uint64_t>{0} : cfg.sizes;
    for (uint64_t s : sizes) {
      for (int c : cfg.clients) plan.push_back({op, s, c});
    }
  }

  if (cfg.csv) {
    std::printf("op,value_bytes,clients,ops_per_s\n");
  } else {
    std::printf("# meshcomm TCPStore: %lld ms or %lld ops per client per row, %d keys per client\n",
                static_cast<long long>(cfg.durationMs), static_cast<long long>(cfg.maxOps), cfg.keys);
    std::printf("%-4s %12s %8s %14s %12s %12s\n", "op", "value_bytes", "clients", "ops_per_s",
                "total_ops", "us_per_op");
  }
  std::fflush(stdout);
  for (const auto& m : plan) {
    Outcome o;
    try {
      o = measure(cfg, m);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "store_bench: %s\n", e.what());
      return kExitRuntime;
    }
    if (cfg.csv) {
      std::printf("%s,%llu,%d,%.1f\n", opName(m.op), static_cast<unsigned long long>(m.valueBytes),
                  m.clients, o.opsPerSecond());
    } else {
      // Latency as one client sees it: its share of the time per operation.
      double usPerOp = o.ops > 0 ? o.seconds * 1e6 * m.clients / static_cast<double>(o.ops) : 0;
      std::printf("%-4s %12llu %8d %14.0f %12lld %12.1f\n", opName(m.op),
                  static_cast<unsigned long long>(m.valueBytes), m.clients, o.opsPerSecond(),
                  static_cast<long long>(o.ops), usPerOp);
    }
    std::fflush(stdout);
  }
  return 0;
}

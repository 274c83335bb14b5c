#include "options.h"

#include <charconv>
#include <functional>
#include <limits>
#include <map>
#include <vector>

#include "meshcomm/error.h"

namespace meshcomm::bench {
namespace {

constexpr uint64_t kMaxSize = uint64_t{64} << 30;  // per-rank buffers beyond this are a typo
constexpr int kMaxRanks = 1024;

std::optional<int64_t> parseInt(std::string_view text) {
  int64_t v = 0;
  if (text.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::string usageError(const std::string& what) {
  return "meshcomm-bench: " + what + "\nTry 'meshcomm-bench --help'.";
}

}  // namespace

const char* waitModeName(WaitMode mode) {
  static constexpr const char* kNames[] = {"blocking", "sync", "async"};  // WaitMode's order
  return kNames[static_cast<size_t>(mode)];
}

std::optional<uint64_t> parseSize(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 18) return std::nullopt;
  uint64_t v = 0;
  std::from_chars(text.data(), text.data() + digits, v);
  std::string_view suffix = text.substr(digits);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.remove_suffix(1);
  int shift = 0;
  if (suffix.size() > 1) return std::nullopt;
  if (suffix.size() == 1) {
    switch (suffix[0]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: return std::nullopt;
    }
  }
  if (v > (kMaxSize >> shift)) return std::nullopt;
  return v << shift;
}

std::string formatSize(uint64_t bytes) {
  static const char* kUnits[] = {"", "K", "M", "G"};
  int u = 0;
  while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + kUnits[u];
}

std::string helpText() {
  std::string ops;
  // Each name, and in parentheses the operation it issues when that is
  // called otherwise (either name selects it); wrapped at 80 columns.
  size_t lineStart = 0;
  for (const auto& c : allCollectives()) {
    std::string item = c.name;
    if (item != operationName(c.operation)) item += std::string(" (") + operationName(c.operation) + ")";
    if (!ops.empty()) ops += ",";
    const size_t prefix = lineStart == 0 ? sizeof("OPERATION:") - 1 : 0;
    if (prefix + ops.size() - lineStart + 1 + item.size() + 1 > 80) {
      ops += "\n ";
      lineStart = ops.size();
    }
    ops += " " + item;
  }
  return R"(usage: meshcomm-bench OPERATION [options]

Measures one meshcomm collective over a range of message sizes and prints one
row per size (nccl-tests style).

OPERATION:)" + ops + R"(

Launch:
  Without a launcher, meshcomm-bench forks -n ranks on this host; rank 0 hosts
  the TCPStore on a free port. When RANK, WORLD_SIZE, MASTER_ADDR and
  MASTER_PORT are all set (meshrun, torchrun, ...), each process joins that job
  through env:// instead, and only rank 0 prints.

Options:
  -n, --nranks N        ranks to fork (1..1024; required without a launcher;
                        under a launcher it must equal WORLD_SIZE if given)
  -b, --minbytes SIZE   first message size (default 32M)
  -e, --maxbytes SIZE   last message size (default 32M)
  -f, --stepfactor F    multiply the size by F between rows (default 2)
  -i, --stepbytes SIZE  add SIZE between rows instead of multiplying
      --dtype NAME      bool, int8, uint8, int16, uint16, int32, uint32, int64,
                        uint64, float16, bfloat16, float32 (default), float64,
                        complex64, complex128
      --op NAME         sum (default), prod, min, max (reducing operations)
      --root R          root rank of broadcast, reduce, gather, scatter (0)
      --check           verify every size once against values computed locally
                        from deterministic data; exit code 1 if any is wrong
      --iters N         timed iterations per size (default: adaptive, about
                        0.25 s per size and at least 5)
      --warmup N        untimed iterations per size before timing (default 5)
      --buffers K       rotate among K buffer sets (default: enough to cover
                        64 MiB, at least 4, at most 256 MiB in total)
      --mode MODE       blocking (default: the call runs on the caller's
                        thread), sync (queue, then wait each), or async (keep
                        --window operations in flight)
      --window N        in-flight operations with --mode async (default 16)
      --csv             print CSV: op,nranks,bytes,count,dtype,time_us,
                        algbw_gbps,busbw_gbps,check (check: ok, fail or
                        skip); nothing else goes to stdout
      --timeout-ms T    deadline of every operation (default 60000)
      --time-limit S    deadline of the whole run in seconds (default 900);
                        ranks still running then are killed
  -h, --help            this text

SIZE takes K, M, G suffixes (powers of 1024, optional trailing B).

Sizes follow nccl-tests. For a size S, dtype size w, n ranks and count = S/w:
  all_reduce, broadcast, reduce (in place), sendrecv: every rank's buffer holds
    count elements; "count" = count; algbw = count*w / time.
  all_gather, gather: each rank contributes count/n elements into an output of
    (count/n)*n; reduce_scatter, scatter: the input holds (count/n)*n elements
    and each rank receives count/n; all_gather_uneven, reduce_scatter_uneven:
    as all_gather, reduce_scatter, through the uneven calls with every rank's
    split alike; all_to_all: input and output both hold
    (count/n)*n elements, count/n per peer. For these "count" = count/n and
    algbw = (count/n)*n*w / time.
  size(B) is the larger of the send and receive buffer in bytes.
  busbw = algbw * factor: 2(n-1)/n for all_reduce; (n-1)/n for all_gather,
    reduce_scatter (and their uneven forms), all_to_all, gather, scatter; 1 for broadcast, reduce and
    sendrecv (each rank sends to rank+1 and receives from rank-1).
  barrier prints a single row of size 0 and no bandwidth.
  time(us) is the largest, over ranks, of each rank's mean time per operation
  over the timed iterations, which start together after a barrier. The table
  also shows the iteration count; rows appear as each size finishes.

Exit codes: 0 ok, 1 a --check failed, 2 bad arguments, 3 a rank failed or the
run exceeded --time-limit.
)";
}

std::optional<std::string> checkRankCount(const Options& o, int nranks) {
  if (nranks < o.collective->minRanks) {
    return std::string(o.collective->name) + " needs at least " +
           std::to_string(o.collective->minRanks) + " ranks";
  }
  if (o.root >= nranks) {
    return "--root " + std::to_string(o.root) + " is not a rank of " + std::to_string(nranks);
  }
  return std::nullopt;
}

ParseResult parseOptions(int argc, char** argv, Options& o) {
  ParseResult bad;
  bad.exitCode = kExitUsage;
  auto fail = [&](const std::string& what) {
    bad.message = usageError(what);
    return bad;
  };

  // Options that take a value, keyed by every spelling.
  using Setter = std::function<std::optional<std::string>(std::string_view)>;
  auto sizeSetter = [](uint64_t& field) {
    return [&field](std::string_view v) -> std::optional<std::string> {
      auto s = parseSize(v);
      if (!s) return "expects a size like 8, 64K, 64M or 1G (at most 64G)";
      field = *s;
      return std::nullopt;
    };
  };
  auto intSetter = [](int64_t& field, int64_t lo, int64_t hi) {
    return [&field, lo, hi](std::string_view v) -> std::optional<std::string> {
      auto n = parseInt(v);
      if (!n || *n < lo || *n > hi) {
        return "expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
      }
      field = *n;
      return std::nullopt;
    };
  };
  // A name parsed by `parse`, which throws Error for an unknown one.
  auto nameSetter = [](auto& field, auto parse, const char* expects) {
    return [&field, parse, expects](std::string_view v) -> std::optional<std::string> {
      try {
        field = parse(v);
      } catch (const Error&) {
        return expects;
      }
      return std::nullopt;
    };
  };
  int64_t nranks = -1, root = 0, stepFactor = static_cast<int64_t>(o.stepFactor);
  int64_t timeoutMs = o.timeout.count(), timeLimit = o.timeLimit.count();
  std::map<std::string, Setter, std::less<>> valued = {
      {"nranks", intSetter(nranks, 1, kMaxRanks)},
      {"minbytes", sizeSetter(o.minBytes)},
      {"maxbytes", sizeSetter(o.maxBytes)},
      {"stepfactor", intSetter(stepFactor, 2, 1024)},
      {"stepbytes", sizeSetter(o.stepBytes)},
      {"dtype", nameSetter(o.dtype, &dtypeFromName,
                           "expects a dtype name such as float32 (see --help)")},
      {"op", nameSetter(o.op, &reduceOpFromName, "expects sum, prod, min or max")},
      {"root", intSetter(root, 0, kMaxRanks - 1)},
      {"iters", intSetter(o.iters, 1, 100000000)},
      {"warmup", intSetter(o.warmup, 0, 100000000)},
      {"buffers", intSetter(o.buffers, 1, 1 << 24)},
      {"window", intSetter(o.window, 1, 4096)},
      {"mode",
       [&](std::string_view v) -> std::optional<std::string> {
         if (v == "blocking") o.mode = WaitMode::kBlocking;
         else if (v == "sync") o.mode = WaitMode::kSync;
         else if (v == "async") o.mode = WaitMode::kAsync;
         else return "expects blocking, sync or async";
         return std::nullopt;
       }},
      {"timeout-ms", intSetter(timeoutMs, 1, 86400000)},
      {"time-limit", intSetter(timeLimit, 1, 86400)},
  };
  const std::map<char, std::string> shortNames = {
      {'n', "nranks"}, {'b', "minbytes"}, {'e', "maxbytes"}, {'f', "stepfactor"}, {'i', "stepbytes"},
  };
  bool sawStepFactor = false, sawStepBytes = false, sawRoot = false, sawOp = false;

  std::vector<std::string_view> positional;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      ParseResult help;
      help.exitCode = kExitOk;
      help.message = helpText();
      return help;
    }
    if (arg == "--check") { o.check = true; continue; }
    if (arg == "--csv") { o.csv = true; continue; }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    std::string name;
    std::optional<std::string_view> value;
    if (arg.substr(0, 2) == "--") {
      std::string_view body = arg.substr(2);
      auto eq = body.find('=');
      name = std::string(body.substr(0, eq));
      if (eq != std::string_view::npos) value = body.substr(eq + 1);
    } else {
      // -n 4 or -n4, as getopt accepts.
      auto it = shortNames.find(arg[1]);
      if (it == shortNames.end()) return fail("unknown option '" + std::string(arg) + "'");
      name = it->second;
      if (arg.size() > 2) value = arg.substr(2);
    }
    auto setter = valued.find(name);
    if (setter == valued.end()) return fail("unknown option '" + std::string(arg) + "'");
    if (!value) {
      if (i + 1 >= argc) return fail("option '" + std::string(arg) + "' needs a value");
      value = argv[++i];
    }
    if (auto err = setter->second(*value)) {
      return fail("option '" + std::string(arg) + "' " + *err + ", got '" + std::string(*value) + "'");
    }
    sawStepFactor |= name == "stepfactor";
    sawStepBytes |= name == "stepbytes";
    sawRoot |= name == "root";
    sawOp |= name == "op";
  }

  if (positional.empty()) return fail("no operation given");
  if (positional.size() > 1) {
    return fail("one operation at a time; unexpected '" + std::string(positional[1]) + "'");
  }
  o.collective = findCollective(positional[0]);
  if (o.collective == nullptr) return fail("unknown operation '" + std::string(positional[0]) + "'");
  if (nranks > 0) o.nranks = static_cast<int>(nranks);
  o.root = static_cast<int>(root);
  o.stepFactor = static_cast<uint64_t>(stepFactor);
  o.timeout = std::chrono::milliseconds(timeoutMs);
  o.timeLimit = std::chrono::seconds(timeLimit);

  if (sawStepFactor && sawStepBytes) return fail("give -f or -i, not both");
  if (sawStepBytes && o.stepBytes == 0) return fail("-i must be at least 1 byte");
  if (o.minBytes > o.maxBytes) {
    return fail("-b " + formatSize(o.minBytes) + " is larger than -e " + formatSize(o.maxBytes));
  }
  if (sawOp && !o.collective->reduces()) {
    return fail(std::string("--op does not apply to ") + o.collective->name);
  }
  if (sawRoot && !o.collective->rooted()) {
    return fail(std::string("--root does not apply to ") + o.collective->name);
  }
  if (o.collective->reduces() && !reduceOpSupports(o.op, o.dtype)) {
    return fail(std::string("--op ") + reduceOpName(o.op) + " is not defined for " +
                dtypeName(o.dtype));
  }
  if (o.nranks) {
    if (auto err = checkRankCount(o, *o.nranks)) return fail(*err);
  }
  ParseResult ok;
  ok.run = true;
  return ok;
}

}  // namespace meshcomm::bench

// meshcomm-bench's command line: the options, their defaults, the parser
// and the --help text.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "forked_job.h"  // the exit codes
#include "meshcomm/types.h"
#include "ops.h"

namespace meshcomm::bench {

// How the timed loop waits for each operation.
enum class WaitMode {
  kBlocking,  // OpOptions::blocking: the call runs on the calling thread
  kSync,      // queue on the group's executor, then wait for the Work
  kAsync,     // queue a window of operations, wait for the oldest
};
const char* waitModeName(WaitMode mode);

struct Options {
  const CollectiveInfo* collective = nullptr;
  std::optional<int> nranks;          // -n; required when not under a launcher
  uint64_t minBytes = 32ull << 20;    // -b
  uint64_t maxBytes = 32ull << 20;    // -e
  uint64_t stepFactor = 2;            // -f (used unless -i is given)
  uint64_t stepBytes = 0;             // -i: additive steps instead of -f
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  bool check = false;
  int64_t iters = 0;                  // 0: adaptive
  int64_t warmup = 5;
  int64_t buffers = 0;                // 0: automatic
  bool csv = false;
  WaitMode mode = WaitMode::kBlocking;
  int64_t window = 16;                // in-flight operations with --mode async
  std::chrono::milliseconds timeout{60000};  // per operation
  std::chrono::seconds timeLimit{900};       // the whole run
  double targetSeconds = 0.25;        // adaptive: timed seconds per size
};

// Outcome of parsing: run, or exit at once with `exitCode` after printing
// `message` (the help text to stdout for --help, an error to stderr).
struct ParseResult {
  bool run = false;
  int exitCode = kExitOk;
  std::string message;
};

ParseResult parseOptions(int argc, char** argv, Options& options);

// Checks what depends on the number of ranks (known only after parsing
// when a launcher sets it): the collective's minimum and --root. Returns
// the error message, or nullopt.
std::optional<std::string> checkRankCount(const Options& options, int nranks);

// "8", "64K", "64M", "1G", "512KB": binary multiples. nullopt when malformed.
std::optional<uint64_t> parseSize(std::string_view text);
// "65536" -> "64K": for messages.
std::string formatSize(uint64_t bytes);

std::string helpText();

}  // namespace meshcomm::bench

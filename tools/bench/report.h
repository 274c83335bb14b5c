// meshcomm-bench output: an aligned table with '#' comment lines around it
// (nccl-tests style), or CSV with exactly one header line.
//
// Thread-safety: one Reporter per process, used by one thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace meshcomm::bench {

enum class CheckState { kSkipped, kOk, kFailed };

struct RunDescription {
  std::string op;
  int nranks = 0;
  std::string dtype;
  std::string reduceOp;  // empty unless the collective reduces
  int root = -1;         // -1 unless the collective has a root
  std::string launch;    // "fork" or the launcher's description
  std::string mode;
  std::string iters;     // "adaptive" or a number
  int64_t warmup = 0;
  std::string buffers;   // "auto" or a number
};

struct Row {
  uint64_t bytes = 0;
  int64_t count = 0;
  double timeUs = 0;
  double algbwGBps = 0;
  double busbwGBps = 0;
  int64_t iters = 0;
  CheckState check = CheckState::kSkipped;
  int64_t wrong = 0;
};

class Reporter {
 public:
  Reporter(bool csv, FILE* out) : csv_(csv), out_(out) {}
  void begin(const RunDescription& run);
  void row(const Row& row);
  // Closing comment lines (table mode only).
  void end();
  // A comment line in table mode (nothing in CSV mode, which stays parseable).
  void note(const std::string& text);

 private:
  bool csv_;
  FILE* out_;
  RunDescription run_;
  double busbwSum_ = 0;
  int rows_ = 0;
  int failed_ = 0;
};

}  // namespace meshcomm::bench

#include "report.h"

namespace meshcomm::bench {
namespace {

// How a check's outcome is printed in the table and in the CSV, in the
// order of CheckState's values.
struct CheckNames {
  const char* text;
  const char* csv;
};
constexpr CheckNames kCheckNames[] = {{"-", "skip"}, {"ok", "ok"}, {"FAIL", "fail"}};

const char* checkText(CheckState s) { return kCheckNames[static_cast<size_t>(s)].text; }
const char* checkCsv(CheckState s) { return kCheckNames[static_cast<size_t>(s)].csv; }

}  // namespace

void Reporter::begin(const RunDescription& run) {
  run_ = run;
  if (csv_) {
    std::fprintf(out_, "op,nranks,bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,check\n");
    std::fflush(out_);
    return;
  }
  std::fprintf(out_, "# meshcomm-bench %s: nranks %d, dtype %s", run.op.c_str(), run.nranks,
               run.dtype.c_str());
  if (!run.reduceOp.empty()) std::fprintf(out_, ", op %s", run.reduceOp.c_str());
  if (run.root >= 0) std::fprintf(out_, ", root %d", run.root);
  std::fprintf(out_, "\n# launch %s, mode %s, iters %s, warmup %lld, buffers %s\n",
               run.launch.c_str(), run.mode.c_str(), run.iters.c_str(),
               static_cast<long long>(run.warmup), run.buffers.c_str());
  std::fprintf(out_, "#\n# %12s %12s %10s %12s %12s %12s %8s %6s\n", "size(B)", "count", "dtype",
               "time(us)", "algbw(GB/s)", "busbw(GB/s)", "iters", "check");
  std::fflush(out_);
}

void Reporter::row(const Row& r) {
  ++rows_;
  busbwSum_ += r.busbwGBps;
  if (r.check == CheckState::kFailed) ++failed_;
  if (csv_) {
    std::fprintf(out_, "%s,%d,%llu,%lld,%s,%.3f,%.4f,%.4f,%s\n", run_.op.c_str(), run_.nranks,
                 static_cast<unsigned long long>(r.bytes), static_cast<long long>(r.count),
                 run_.dtype.c_str(), r.timeUs, r.algbwGBps, r.busbwGBps, checkCsv(r.check));
  } else {
    std::fprintf(out_, "  %12llu %12lld %10s %12.2f %12.3f %12.3f %8lld %6s\n",
                 static_cast<unsigned long long>(r.bytes), static_cast<long long>(r.count),
                 run_.dtype.c_str(), r.timeUs, r.algbwGBps, r.busbwGBps,
                 static_cast<long long>(r.iters), checkText(r.check));
  }
  std::fflush(out_);
}

void Reporter::note(const std::string& text) {
  if (csv_) return;
  std::fprintf(out_, "# %s\n", text.c_str());
  std::fflush(out_);
}

void Reporter::end() {
  if (csv_) return;
  std::fprintf(out_, "#\n# Avg bus bandwidth    : %.3f GB/s\n",
               rows_ > 0 ? busbwSum_ / rows_ : 0.0);
  if (failed_ > 0) std::fprintf(out_, "# Check: %d size(s) FAILED\n", failed_);
  std::fflush(out_);
}

}  // namespace meshcomm::bench

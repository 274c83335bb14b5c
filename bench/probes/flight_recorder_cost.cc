// The flight recorder's cost per operation, alone: one record issued and
// finished with two clock reads, as the runtime does for a blocking
// collective, best of 50 trials of 100,000 (docs/benchmarks.md).
//
//   g++ -O3 -std=c++20 -Isrc -Iinclude bench/probes/flight_recorder_cost.cc \
//       build/libmeshcomm_internal.a -lpthread -lcrypto -o /tmp/flight_recorder_cost
//   /tmp/flight_recorder_cost
#include <chrono>
#include <cstdio>

#include "runtime/flight_recorder.h"

using namespace meshcomm;

int main() {
  FlightRecorder* recorder = FlightRecorder::instance();
  if (recorder == nullptr) {
    std::fprintf(stderr, "MESHCOMM_FLIGHT_RECORDER=0: nothing to measure\n");
    return 1;
  }
  FlightRecorder::Issue what;
  what.op = "all_reduce";
  what.count = 2;
  constexpr int kOps = 100000;
  double best = 1e9;
  for (int trial = 0; trial < 50; ++trial) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kOps; ++i) {
      const uint64_t id = recorder->issue(what, FlightRecorder::now(), true, static_cast<uint64_t>(i));
      recorder->finish(id, OpState::kCompleted, 1, 0, FlightRecorder::now(), nullptr);
    }
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kOps;
    if (ns < best) best = ns;
  }
  std::printf("flight recorder: %.1f ns per operation (best of 50 x %d)\n", best, kOps);
  return 0;
}

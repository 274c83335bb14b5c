// The flight recorder from C++: dumpFlightRecorder() while operations run
// on the same group (every dump whole, nothing torn), the ring keeping the
// last MESHCOMM_FLIGHT_RECORDER records, and no thread or descriptor
// (SIGUSR1's listener) outliving the World. Python's tests cover the dumps
// on failures, SIGUSR1 and the diagnosis (tests/python/test_flight_recorder.py).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "collective_harness.h"
#include "expect_world.h"
#include "meshcomm/flight_recorder.h"
#include "process_stats.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> linesOf(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

size_t countOf(const std::vector<std::string>& lines, const std::string& what) {
  size_t n = 0;
  for (const auto& l : lines) n += l.find(what) != std::string::npos ? 1 : 0;
  return n;
}

// Every line one JSON object and the records in id order: what a torn
// read of a slot being written would break.
bool whole(const std::vector<std::string>& lines, std::string& why) {
  if (lines.empty() || lines[0].find("\"format\":\"meshcomm-flight-recorder\"") == std::string::npos) {
    why = "no header";
    return false;
  }
  long long last = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.size() < 2 || l.front() != '{' || l.back() != '}' || l.rfind("{\"id\":", 0) != 0) {
      why = "line " + std::to_string(i + 1) + ": " + l;
      return false;
    }
    const long long id = std::stoll(l.substr(6));
    if (id <= last) {
      why = "ids out of order at line " + std::to_string(i + 1);
      return false;
    }
    last = id;
  }
  return true;
}

// A fresh folder for a test's dumps, removed with its contents when the
// test ends (in the parent: the ranks leave with _exit).
struct TempDir {
  static std::string make() {
    char name[] = "/tmp/meshcomm-recorder-test-XXXXXX";
    return ::mkdtemp(name);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  const std::string path = make();
};

// A call that returns once it is done.
OpOptions blockingCall() {
  OpOptions o;
  o.blocking = true;
  return o;
}

TEST(FlightRecorder, DumpsOnDemandWhileOperationsRunAndLeavesNothingBehind) {
  const TempDir dir;
  JobOptions o;
  o.bound = 90s;
  o.env = {{"MESHCOMM_DUMP_DIR", dir.path}};
  constexpr int kBlocking = 200, kAsync = 20, kDumps = 20;
  expectWorldOk(3, o, [&](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    std::vector<float> x(8, 1.0f);
    std::atomic<bool> torn{false};
    std::thread dumper([&] {
      for (int i = 0; i < kDumps; ++i) {
        const std::string file = dir.path + "/r" + std::to_string(e.rank) + "_" + std::to_string(i) + ".jsonl";
        CHILD_CHECK(dumpFlightRecorder(file) == file);
        std::string why;
        if (!whole(linesOf(file), why)) {
          std::fprintf(stderr, "torn dump %s: %s\n", file.c_str(), why.c_str());
          torn = true;
        }
      }
    });
    for (int i = 0; i < kBlocking; ++i) pg.allReduce(TensorRef{x.data(), 8, DType::kFloat32}, blockingCall())->wait();
    std::vector<float> y(8 * kAsync, 1.0f);
    std::vector<WorkPtr> works;
    for (int i = 0; i < kAsync; ++i) works.push_back(pg.allReduce(TensorRef{y.data() + 8 * i, 8, DType::kFloat32}));
    for (auto& w : works) w->wait();
    dumper.join();
    CHILD_CHECK(!torn);

    const std::string file = dumpFlightRecorder();
    CHILD_CHECK(file == dir.path + "/rank_" + std::to_string(e.rank) + ".jsonl", "" << file);
    auto lines = linesOf(file);
    std::string why;
    CHILD_CHECK(whole(lines, why), "" << why);
    CHILD_CHECK(lines[0].find("\"rank\":" + std::to_string(e.rank) + ",\"world_size\":3") !=
                    std::string::npos,
                "" << lines[0]);
    CHILD_CHECK(lines.size() == 1 + kBlocking + kAsync, "" << lines.size());
    CHILD_CHECK(countOf(lines, "\"op\":\"all_reduce\"") == kBlocking + kAsync);
    CHILD_CHECK(countOf(lines, "\"state\":\"completed\"") == kBlocking + kAsync);
    CHILD_CHECK(lines.back().find("\"seq\":" + std::to_string(kBlocking + kAsync - 1) + ",") !=
                    std::string::npos,
                "" << lines.back());

    // SIGUSR1's listener (a thread and a pipe) goes with the last group.
    e.world.reset();
    const int threads = settleTo(threadCount, e.threadsBeforeInit, 3s);
    CHILD_CHECK(threads == e.threadsBeforeInit, "" << threads << " threads, " << e.threadsBeforeInit << " before");
    const int fds = settleTo(openFdCount, e.fdsBeforeInit, 3s);
    // (Fewer on rank 0, whose store server closed the others' connections.)
    CHILD_CHECK(fds <= e.fdsBeforeInit, "" << fds << " fds, " << e.fdsBeforeInit << " before");
    return kExitOk;
  });
}

TEST(FlightRecorder, KeepsTheLastNRecords) {
  const TempDir dir;
  JobOptions o;
  o.bound = 60s;
  o.env = {{"MESHCOMM_FLIGHT_RECORDER", "50"}};
  expectWorldOk(2, o, [&](RankEnv& e) {
    std::vector<int32_t> x(4, 1);
    for (int i = 0; i < 120; ++i) e.pg().allReduce(TensorRef{x.data(), 4, DType::kInt32}, blockingCall())->wait();
    const std::string file = dumpFlightRecorder(dir.path);
    CHILD_CHECK(file == dir.path + "/rank_" + std::to_string(e.rank) + ".jsonl", "" << file);
    auto lines = linesOf(file);
    CHILD_CHECK(lines.size() == 51, "" << lines.size());
    CHILD_CHECK(lines[1].find("\"seq\":70,") != std::string::npos, "" << lines[1]);
    CHILD_CHECK(lines.back().find("\"seq\":119,") != std::string::npos, "" << lines.back());
    return kExitOk;
  });
}

// A process in two Worlds at once (torch.distributed makes one per group):
// the first names the process in dumps; the second's groups carry a label
// and the first's rank numbers. Once both are gone, the next World to join
// names the process.
TEST(FlightRecorder, TheFirstWorldNamesTheProcessWhileItLives) {
  const TempDir dir;
  JobOptions o;
  o.bound = 60s;
  expectWorldOk(3, o, [&](RankEnv& e) {
    std::vector<int32_t> x(4, 1);
    std::shared_ptr<World> second;
    if (e.rank > 0) {  // ranks 1 and 2 are ranks 0 and 1 of a second job
      InitOptions two;
      two.store = std::make_shared<PrefixStore>("second", e.store);
      two.rank = e.rank - 1;
      two.worldSize = 2;
      second = World::init(two);
      second->worldGroup()->allReduce(TensorRef{x.data(), 4, DType::kInt32}, blockingCall())->wait();
    }
    auto lines = linesOf(dumpFlightRecorder(dir.path));
    CHILD_CHECK(lines[0].find("\"rank\":" + std::to_string(e.rank) + ",\"world_size\":3") !=
                    std::string::npos,
                "" << lines[0]);
    CHILD_CHECK((lines[0].find("\"name\":\"world@ranks_1_2\",\"rank\":" +
                               std::to_string(e.rank - 1) + ",\"world_ranks\":[1,2]}") !=
                 std::string::npos) == (e.rank > 0),
                "" << lines[0]);
    CHILD_CHECK(countOf(lines, "\"op\":\"all_reduce\"") == (e.rank > 0 ? 1u : 0u));
    second.reset();
    e.world.reset();

    // A job of the same processes in the reverse order now names them.
    InitOptions reversed;
    reversed.store = std::make_shared<PrefixStore>("reversed", e.store);
    reversed.rank = 2 - e.rank;
    reversed.worldSize = 3;
    auto third = World::init(reversed);
    const std::string file = dumpFlightRecorder(dir.path);
    CHILD_CHECK(file == dir.path + "/rank_" + std::to_string(2 - e.rank) + ".jsonl", "" << file);
    CHILD_CHECK(linesOf(file)[0].find("\"rank\":" + std::to_string(2 - e.rank) + ",") !=
                    std::string::npos);
    return kExitOk;
  });
}

}  // namespace
}  // namespace meshcomm::test

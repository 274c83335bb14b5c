// Load: over a thousand concurrent TCPStore connections against one server,
// with exact accounting of every update.
//
// Four forked processes each hold 256 clients (connected before any work
// starts, so all 1,024 connections are open at once) and drive them from two
// threads each, which is what two cores can run without thrashing. Every
// counter must end at exactly the number of increments made, and every
// client must read back its own last write.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "process_stats.h"
#include "store_fixture.h"

namespace meshcomm {
namespace {

constexpr int kProcs = 4;
constexpr int kClientsPerProc = 256;
constexpr int kThreadsPerProc = 2;
constexpr int kClients = kProcs * kClientsPerProc;
constexpr int kRounds = 6;
constexpr int kShards = 32;

std::string valueOf(int client, int round) {
  std::string v = std::to_string(client);
  v += ':';
  v += std::to_string(round);
  return v;
}

// One child: connect kClientsPerProc clients, report, wait for "go", then
// run kRounds of updates through every client.
int runLoadChild(int rank, test::PipeChannel& portChannel) {
  auto port = static_cast<uint16_t>(portChannel.receiveOrExit(20s));
  std::vector<std::unique_ptr<TCPStore>> clients(kClientsPerProc);
  std::atomic<int> failures{0};
  auto guarded = [&](auto&& body) {
    try {
      body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[load child %d] %s\n", rank, e.what());
      ++failures;
    }
  };
  auto inSlices = [&](auto&& perClient) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreadsPerProc; ++t) {
      threads.emplace_back([&, t] {
        guarded([&] {
          for (int i = t; i < kClientsPerProc; i += kThreadsPerProc) perClient(i);
        });
      });
    }
    for (auto& th : threads) th.join();
  };

  inSlices([&](int i) {
    clients[static_cast<size_t>(i)] = std::make_unique<TCPStore>(clientOptions(port, 30s));
  });
  if (failures.load() != 0) return test::kExitException;
  TCPStore& first = *clients[0];
  first.add("load/connected", kClientsPerProc);
  first.wait({"load/go"}, 30s);

  std::atomic<int> wrongReads{0};
  for (int round = 0; round < kRounds; ++round) {
    inSlices([&](int i) {
      TCPStore& c = *clients[static_cast<size_t>(i)];
      const int g = rank * kClientsPerProc + i;
      c.add("load/total", 1);
      c.add(numbered("load/shard/", g % kShards), 1);
      c.add(numbered("load/client/", g), 1);
      c.set(numbered("load/val/", g), valueOf(g, round));
      if (c.getString(numbered("load/val/", g)) != valueOf(g, round)) ++wrongReads;
    });
  }
  CHILD_CHECK(wrongReads.load() == 0, "clients that read back a wrong value: " << wrongReads.load());
  if (failures.load() != 0) return test::kExitException;
  return test::kExitOk;
}

TEST(StoreLoad, OverAThousandConcurrentClientsLoseNothing) {
  // Each connection costs a descriptor on both ends; the server side (this
  // process) needs one per client plus a margin.
  constexpr rlim_t kNeeded = kClients + 128;
  rlimit lim{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < kNeeded) {
    GTEST_SKIP() << "RLIMIT_NOFILE hard limit is " << lim.rlim_max << ", but " << kNeeded
                 << " descriptors are needed for " << kClients
                 << " concurrent connections; raise it (ulimit -Hn) to run this test";
  }
  // Restores the soft limit however the test ends.
  struct RestoreSoftLimit {
    rlimit saved;
    ~RestoreSoftLimit() { ::setrlimit(RLIMIT_NOFILE, &saved); }
  } restore{lim};
  lim.rlim_cur = lim.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lim), 0);

  auto t0 = Clock::now();
  test::PipeChannel portChannel;
  // Forked before the server starts its thread; children inherit the limit.
  test::ChildGroup children(kProcs, [&portChannel](int rank) {
    return runLoadChild(rank, portChannel);
  });
  ASSERT_EQ(children.size(), static_cast<size_t>(kProcs));

  TCPStoreOptions opts;
  opts.isServer = true;
  opts.timeout = 30s;
  TCPStore server(opts);
  ASSERT_TRUE(portChannel.post(server.port(), kProcs));

  // Every client connected and none has started work yet.
  int64_t connected = 0;
  while (since(t0) < 40s) {
    connected = server.add("load/connected", 0);
    if (connected >= kClients || !children.alive(0) || !children.alive(kProcs - 1)) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(connected, kClients) << test::describeAll(children.waitAll(0ms));
  // This process holds the server's end of every connection right now.
  EXPECT_GE(test::openFdCount(), kClients) << "the connections were not all open at once";
  auto connectedAt = since(t0);

  server.set("load/go", "1");
  auto st = children.waitAll(50s);
  ASSERT_TRUE(test::allOk(st)) << test::describeAll(st);
  auto elapsed = since(t0);
  std::printf("[load] %d clients connected in %lld ms, all done in %lld ms\n", kClients,
              static_cast<long long>(connectedAt.count()),
              static_cast<long long>(elapsed.count()));
  EXPECT_LT(elapsed, 60s);

  EXPECT_EQ(server.getString("load/total"), std::to_string(kClients * kRounds));
  std::vector<std::string> shards, perClient, values;
  for (int s = 0; s < kShards; ++s) shards.push_back(numbered("load/shard/", s));
  for (int g = 0; g < kClients; ++g) {
    perClient.push_back(numbered("load/client/", g));
    values.push_back(numbered("load/val/", g));
  }
  auto shardValues = server.multiGet(shards);
  for (size_t s = 0; s < shards.size(); ++s) {
    EXPECT_EQ(std::string(shardValues[s].begin(), shardValues[s].end()),
              std::to_string(kClients / kShards * kRounds))
        << shards[s];
  }
  auto counts = server.multiGet(perClient);
  auto lasts = server.multiGet(values);
  int wrongCounts = 0, wrongValues = 0;
  for (int g = 0; g < kClients; ++g) {
    auto i = static_cast<size_t>(g);
    if (std::string(counts[i].begin(), counts[i].end()) != std::to_string(kRounds)) ++wrongCounts;
    if (std::string(lasts[i].begin(), lasts[i].end()) != valueOf(g, kRounds - 1)) ++wrongValues;
  }
  EXPECT_EQ(wrongCounts, 0);
  EXPECT_EQ(wrongValues, 0);
  // connected, go, total, the shards, and two keys per client: nothing
  // extra, nothing missing.
  EXPECT_EQ(server.numKeys(), 3 + kShards + 2 * kClients);
}

}  // namespace
}  // namespace meshcomm

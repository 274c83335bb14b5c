// The transport factory (transport/group_transport.h): for a placement, the
// route it computes and the links it composes, and messages over a routed
// transport whose peers sit behind different links. The members are
// threads of this process, each with its own store connection, so every
// set-up step runs for real (segments in /dev/shm, TCP listeners, the
// store's keys); MESHCOMM_HOST_ID-style host identities spread them over
// emulated hosts.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "meshcomm/error.h"
#include "meshcomm/store.h"
#include "scoped_env.h"
#include "transport/group_transport.h"
#include "transport/routed_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace meshcomm {
namespace {

using namespace std::chrono_literals;

constexpr MessageSignature kSig{10, 0, 0, 4, 0};

// One member's view after set-up.
struct Member {
  GroupTransport links;
  std::shared_ptr<Store> store;  // keeps the member's connection open
};

// The members, in group-rank order, and the store they rendezvoused
// through, which connections made later still read addresses from.
struct Group {
  std::shared_ptr<TCPStore> server;
  std::vector<Member> members;
  Member& operator[](size_t rank) { return members[rank]; }
};

// Sets up a group whose member i lives on host hostIds[i], every member on
// its own thread, and returns the members in group-rank order. A failure on
// any thread is rethrown here.
Group setUpGroup(const std::vector<std::string>& hostIds, const std::string& name) {
  TCPStoreOptions so;
  so.isServer = true;
  so.timeout = 20s;
  auto server = std::make_shared<TCPStore>(so);
  const int n = static_cast<int>(hostIds.size());
  std::vector<int> worldRanks(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) worldRanks[static_cast<size_t>(i)] = i;

  std::vector<std::future<Member>> futures;
  for (int rank = 0; rank < n; ++rank) {
    futures.push_back(std::async(std::launch::async, [&, rank] {
      TCPStoreOptions co;
      co.port = server->port();
      co.timeout = 20s;
      auto store = std::make_shared<TCPStore>(co);
      auto job = std::make_shared<PrefixStore>("job", store);
      LinkSetup setup;
      setup.groupName = name;
      setup.groupRank = rank;
      setup.worldRanks = worldRanks;
      setup.placement = Placement::fromHostIds(hostIds);
      setup.groupStore = std::make_shared<PrefixStore>("group/" + name, job);
      setup.monitor = std::make_shared<PeerMonitor>(job, name, "group/" + name + "/abort", worldRanks);
      setup.timeout = 20s;
      setup.advertiseHost = "127.0.0.1";
      setup.spin = 0us;  // threads of one process share the cores
      return Member{createGroupTransport(setup), store};
    }));
  }
  Group group{server, {}};
  for (auto& f : futures) group.members.push_back(f.get());
  return group;
}

OpContext context(const char* op) {
  OpContext ctx;
  ctx.group = "test";
  ctx.op = op;
  ctx.deadline = Deadline::after(20s);
  return ctx;
}

TEST(GroupTransport, OneHostUsesSharedMemoryAndEveryLink) {
  ScopedEnv shm("MESHCOMM_SHM", std::nullopt);
  auto group = setUpGroup({"a", "a", "a"}, "one_host");
  for (const Member& m : group.members) {
    EXPECT_EQ(m.links.route, Route::kOnHost);
    ASSERT_NE(m.links.hostDomain, nullptr);
    EXPECT_EQ(m.links.hostDomain->localSize(), 3);
    // TCP is set up too (it reaches every rank), shared memory is preferred.
    EXPECT_NE(dynamic_cast<RoutedTransport*>(m.links.transport.get()), nullptr);
  }
}

TEST(GroupTransport, OneRankPerHostIsPlainTcp) {
  auto group = setUpGroup({"a", "b", "c"}, "spread");
  for (const Member& m : group.members) {
    EXPECT_EQ(m.links.route, Route::kFlat);
    EXPECT_EQ(m.links.hostDomain, nullptr);
    EXPECT_NE(dynamic_cast<TcpTransport*>(m.links.transport.get()), nullptr);
  }
}

TEST(GroupTransport, SharedMemoryOffMeansTcpOnEveryRank) {
  ScopedEnv shm("MESHCOMM_SHM", "0");
  auto group = setUpGroup({"a", "a", "b", "b"}, "shm_off");
  for (const Member& m : group.members) {
    EXPECT_EQ(m.links.route, Route::kFlat);
    EXPECT_EQ(m.links.hostDomain, nullptr);
    EXPECT_NE(dynamic_cast<TcpTransport*>(m.links.transport.get()), nullptr);
  }
}

// Hosts {0, 1} and {2}: rank 0 reaches rank 1 through shared memory and
// rank 2 through TCP; one wait covers requests over both links.
TEST(GroupTransport, HierarchicalPlacementRoutesEachPeerOverItsLink) {
  ScopedEnv shm("MESHCOMM_SHM", std::nullopt);
  auto group = setUpGroup({"a", "a", "b"}, "two_hosts");
  EXPECT_EQ(group[0].links.route, Route::kHierarchical);
  EXPECT_EQ(group[2].links.route, Route::kHierarchical);
  ASSERT_NE(group[0].links.hostDomain, nullptr);
  EXPECT_EQ(group[2].links.hostDomain, nullptr);  // alone on its host
  EXPECT_NE(dynamic_cast<RoutedTransport*>(group[0].links.transport.get()), nullptr);

  constexpr size_t kBytes = 1 << 20;  // several ring and socket buffers long
  std::vector<uint8_t> toLocal(kBytes), toRemote(kBytes), fromLocal(kBytes), fromRemote(kBytes);
  for (size_t i = 0; i < kBytes; ++i) {
    toLocal[i] = static_cast<uint8_t>(i * 7 + 1);
    toRemote[i] = static_cast<uint8_t>(i * 13 + 5);
  }
  std::vector<uint8_t> gotLocal(kBytes), gotRemote(kBytes);
  auto peer = [&](int rank, std::vector<uint8_t>& received, const std::vector<uint8_t>& reply) {
    Transport& t = *group[static_cast<size_t>(rank)].links.transport;
    RequestPtr rs[2] = {t.postRecv(0, 1, kSig, received.data(), kBytes),
                        t.postSend(0, 2, kSig, reply.data(), kBytes)};
    t.wait(rs, context("peer"));
  };
  auto one = std::async(std::launch::async, peer, 1, std::ref(gotLocal), std::cref(toLocal));
  auto two = std::async(std::launch::async, peer, 2, std::ref(gotRemote), std::cref(toRemote));
  Transport& zero = *group[0].links.transport;
  RequestPtr rs[4] = {zero.postSend(1, 1, kSig, toLocal.data(), kBytes),
                      zero.postSend(2, 1, kSig, toRemote.data(), kBytes),
                      zero.postRecv(1, 2, kSig, fromLocal.data(), kBytes),
                      zero.postRecv(2, 2, kSig, fromRemote.data(), kBytes)};
  zero.wait(rs, context("mixed"));
  one.get();
  two.get();
  EXPECT_EQ(gotLocal, toLocal);
  EXPECT_EQ(gotRemote, toRemote);
  EXPECT_EQ(fromLocal, toLocal);
  EXPECT_EQ(fromRemote, toRemote);
}

// A wait for requests of one link also drives the others' pending work.
// Rank 0 sends 16 MiB (far more than the sockets hold) over TCP to rank 2
// and waits only for a message from rank 1 in shared memory, which rank 1
// sends once rank 2 has received the 16 MiB and told it so over TCP: a
// wait that drove the shared-memory link alone would never finish.
TEST(GroupTransport, WaitOnOneLinkDrivesTheOthers) {
  ScopedEnv shm("MESHCOMM_SHM", std::nullopt);
  auto group = setUpGroup({"a", "a", "b"}, "wait_drives_all");
  constexpr size_t kBig = size_t{16} << 20;
  std::vector<uint8_t> big(kBig), bigIn(kBig);
  for (size_t i = 0; i < kBig; ++i) big[i] = static_cast<uint8_t>(i * 31 + 3);
  uint8_t token = 7, tokenIn = 0, done = 9, doneIn = 0;
  auto two = std::async(std::launch::async, [&] {
    Transport& t = *group[2].links.transport;
    RequestPtr in = t.postRecv(0, 1, kSig, bigIn.data(), kBig);
    t.wait(std::span<const RequestPtr>(&in, 1), context("receive the 16 MiB"));
    RequestPtr out = t.postSend(1, 2, kSig, &token, 1);
    t.wait(std::span<const RequestPtr>(&out, 1), context("tell rank 1"));
  });
  auto one = std::async(std::launch::async, [&] {
    Transport& t = *group[1].links.transport;
    RequestPtr in = t.postRecv(2, 2, kSig, &tokenIn, 1);
    t.wait(std::span<const RequestPtr>(&in, 1), context("hear from rank 2"));
    RequestPtr out = t.postSend(0, 3, kSig, &done, 1);
    t.wait(std::span<const RequestPtr>(&out, 1), context("tell rank 0"));
  });
  Transport& zero = *group[0].links.transport;
  RequestPtr send = zero.postSend(2, 1, kSig, big.data(), kBig);
  RequestPtr local = zero.postRecv(1, 3, kSig, &doneIn, 1);
  zero.wait(std::span<const RequestPtr>(&local, 1), context("wait for rank 1 alone"));
  zero.wait(std::span<const RequestPtr>(&send, 1), context("finish the send"));
  two.get();
  one.get();
  EXPECT_EQ(doneIn, done);
  EXPECT_EQ(tokenIn, token);
  EXPECT_TRUE(bigIn == big);
}

// An error on one link breaks the whole routed transport: later posts to a
// peer behind the other link fail with the same error.
TEST(GroupTransport, AbortBreaksEveryLink) {
  ScopedEnv shm("MESHCOMM_SHM", std::nullopt);
  auto group = setUpGroup({"a", "a", "b"}, "abort");
  Transport& zero = *group[0].links.transport;
  zero.abort(std::make_exception_ptr(Mismatch("a deliberate mismatch")));
  uint8_t byte = 0;
  EXPECT_THROW(zero.postSend(2, 1, kSig, &byte, 1), Mismatch);
  EXPECT_THROW(zero.postSend(1, 1, kSig, &byte, 1), Mismatch);
  // The host's other rank learns of it through the segment's abort line.
  EXPECT_THROW(group[1].links.hostDomain->throwIfAborted(), Mismatch);
}

}  // namespace
}  // namespace meshcomm

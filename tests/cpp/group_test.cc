// Process groups over subsets of the world: creation by only the members,
// names (<prefix>_<n>_<sha1 of "_".join(sorted ranks)>), rank translation,
// a group that excludes rank 0, two disjoint groups working at the same
// time, overlapping groups driven from two threads of one rank, the
// 8-rank case where only ranks 0 and 4 create and use a group, and the
// errors of group creation. Every result is checked bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "collective_harness.h"
#include "expect_world.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

// sha1 of "1_2_3", "0_4", "0_1_2_3", "1_2" (computed with sha1sum).
constexpr char kSha123[] = "c8ed273de4ad4be38421b0a215bb46c730b7ad90";
constexpr char kSha04[] = "99d2fa1eca94c10752e76b1ac7e9bdbfd0044045";
constexpr char kSha0123[] = "79b6da6f09ca489d6c51917fe6d51102ba404551";

test::JobOptions quick() {
  test::JobOptions o;
  o.bound = 60s;
  o.timeout = 30s;
  return o;
}

// An allReduce on g of `salt`'s data (each member contributes as its group
// rank), checked against the reference.
void checkAllReduce(ProcessGroup& g, DType d, ReduceOp op, int64_t n, uint64_t salt) {
  Buffer b(d, n);
  test::fillInput(d, test::domainOf(op), salt, g.rank(), 0, static_cast<size_t>(n), b.data());
  OpOptions o;
  o.op = op;
  g.allReduce(b.ref(), o)->wait();
  Buffer want(d, n);
  test::fillReduced(d, op, salt, test::ranksUpTo(g.size()), 0, static_cast<size_t>(n), want.data());
  std::string diff = test::firstDifference(d, b.data(), want.data(), static_cast<size_t>(n));
  CHILD_CHECK(diff.empty(), "allReduce on " << g.name() << " (" << dtypeName(d) << " " << reduceOpName(op)
                                            << " n=" << n << "): " << diff);
}

void checkBroadcast(ProcessGroup& g, int root, int64_t n, uint64_t salt) {
  Buffer b(DType::kUInt32, n);
  if (g.rank() == root) test::fillInput(DType::kUInt32, Domain::kRaw, salt, root, 0, static_cast<size_t>(n), b.data());
  OpOptions o;
  o.root = root;
  g.broadcast(b.ref(), o)->wait();
  Buffer want(DType::kUInt32, n);
  test::fillInput(DType::kUInt32, Domain::kRaw, salt, root, 0, static_cast<size_t>(n), want.data());
  CHILD_CHECK(test::firstDifference(DType::kUInt32, b.data(), want.data(), static_cast<size_t>(n)).empty(),
              "broadcast on " << g.name() << " from group rank " << root);
}

void checkAllGather(ProcessGroup& g, int64_t m, uint64_t salt) {
  Buffer in(DType::kInt16, m), out(DType::kInt16, m * g.size());
  test::fillInput(DType::kInt16, Domain::kRaw, salt, g.rank(), 0, static_cast<size_t>(m), in.data());
  g.allGatherIntoTensor(out.ref(), in.ref())->wait();
  for (int r = 0; r < g.size(); ++r) {
    Buffer want(DType::kInt16, m);
    test::fillInput(DType::kInt16, Domain::kRaw, salt, r, 0, static_cast<size_t>(m), want.data());
    CHILD_CHECK(test::firstDifference(DType::kInt16, out.data() + r * m * 2, want.data(), static_cast<size_t>(m)).empty(),
                "allGather on " << g.name() << " block " << r);
  }
}

// A front may name the world group its own way (the Python API keeps
// MindSpore's names): the name, and aliases it answers to as well.
TEST(GroupNames, WorldGroupNameAndAliasesAsInitGivesThem) {
  test::JobOptions o = quick();
  o.worldGroupName = "main";
  o.worldGroupAliases = {"everyone", "all"};
  test::expectWorldOk(2, o, [](RankEnv& e) {
    World& w = *e.world;
    CHILD_CHECK(w.worldGroupName() == "main" && w.worldGroup()->name() == "main");
    for (const char* name : {"main", "everyone", "all"}) {
      CHILD_CHECK(w.findGroup(name) == w.worldGroup(), "" << name);
      CHILD_CHECK(test::catchError([&] { w.destroyGroup(name); }) == test::Caught::kInvalidArgument,
                  "" << name);
    }
    CHILD_CHECK(w.findGroup("world") == nullptr);
    checkAllReduce(*w.findGroup("everyone"), DType::kInt32, ReduceOp::kSum, 64, 41);
    return test::kExitOk;
  });
}

// Ranks {1, 2, 3} of 4: rank 0 is not a member and may not create it.
TEST(GroupSubset, ExcludingRankZeroNamesRanksAndCollectives) {
  test::expectWorldOk(4, quick(), [](RankEnv& e) {
    World& w = *e.world;
    const std::string name = std::string("group_3_") + kSha123;
    CHILD_CHECK(World::groupName("group", {3, 1, 2}) == name, "" << World::groupName("group", {3, 1, 2}));
    CHILD_CHECK(World::groupName("group", {0, 1, 2, 3}) == std::string("group_4_") + kSha0123);
    CHILD_CHECK(w.worldGroupName() == "world");
    CHILD_CHECK(w.findGroup("world") == w.worldGroup());
    CHILD_CHECK(w.worldGroup()->name() == "world");
    CHILD_CHECK(w.findGroup("everyone") == nullptr);  // no alias unless asked for
    if (e.rank == 0) {
      test::Caught c = test::catchError([&] { w.newGroup({1, 2, 3}); });
      CHILD_CHECK(c == test::Caught::kInvalidArgument, "a non-member created a group: " << test::caughtName(c));
      CHILD_CHECK(w.findGroup(name) == nullptr);
    } else {
      auto g = w.newGroup({3, 1, 2});  // any order; the group is over the sorted ranks
      CHILD_CHECK(g->name() == name, "" << g->name());
      CHILD_CHECK(g->size() == 3 && g->rank() == e.rank - 1);
      CHILD_CHECK((g->worldRanks() == std::vector<int>{1, 2, 3}));
      for (int i = 0; i < 3; ++i) CHILD_CHECK(g->toWorldRank(i) == i + 1);
      CHILD_CHECK(g->toGroupRank(0) == -1 && g->toGroupRank(1) == 0 && g->toGroupRank(3) == 2);
      CHILD_CHECK(test::catchError([&] { g->toWorldRank(3); }) == test::Caught::kInvalidArgument);
      CHILD_CHECK(test::catchError([&] { g->toWorldRank(-1); }) == test::Caught::kInvalidArgument);
      CHILD_CHECK(g->timeout() == e.pg().timeout());
      CHILD_CHECK(w.newGroup({1, 2, 3}) == g, "the same ranks must give the same group");
      CHILD_CHECK(w.findGroup(name) == g);
      auto names = w.groupNames();
      CHILD_CHECK(std::find(names.begin(), names.end(), name) != names.end());

      for (DType d : {DType::kFloat32, DType::kInt64, DType::kBFloat16}) {
        for (ReduceOp op : test::kAllOps) checkAllReduce(*g, d, op, 1001, 20 + static_cast<uint64_t>(op));
      }
      checkAllReduce(*g, DType::kFloat64, ReduceOp::kSum, 300001, 30);
      checkBroadcast(*g, 2, 5000, 31);  // group rank 2 = world rank 3
      checkAllGather(*g, 777, 32);
      // Point to point in group ranks: group rank 0 (world 1) -> group rank 2 (world 3).
      if (g->rank() == 0) {
        Buffer out(DType::kUInt8, 4096);
        test::fillInput(DType::kUInt8, Domain::kRaw, 33, 0, 0, 4096, out.data());
        g->send(out.ref(), 2)->wait();
      } else if (g->rank() == 2) {
        Buffer in(DType::kUInt8, 4096), want(DType::kUInt8, 4096);
        g->recv(in.ref(), 0)->wait();
        test::fillInput(DType::kUInt8, Domain::kRaw, 33, 0, 0, 4096, want.data());
        CHILD_CHECK(test::firstDifference(DType::kUInt8, in.data(), want.data(), 4096).empty());
      }
      // Gather to group rank 1 (world rank 2).
      Buffer in(DType::kInt32, 10), out(DType::kInt32, 30);
      test::fillInput(DType::kInt32, Domain::kRaw, 34, g->rank(), 0, 10, in.data());
      OpOptions o;
      o.root = 1;
      g->gatherIntoTensor(g->rank() == 1 ? out.ref() : TensorRef{}, in.ref(), o)->wait();
      if (g->rank() == 1) {
        for (int r = 0; r < 3; ++r) {
          Buffer want(DType::kInt32, 10);
          test::fillInput(DType::kInt32, Domain::kRaw, 34, r, 0, 10, want.data());
          CHILD_CHECK(test::firstDifference(DType::kInt32, out.data() + r * 40, want.data(), 10).empty());
        }
      }
      // A prefix of the caller's names the group.
      if (e.rank <= 2) {
        auto h = w.newGroup({1, 2}, {.namePrefix = "tp"});
        CHILD_CHECK(h->name().rfind("tp_2_", 0) == 0 && h->name() == World::groupName("tp", {1, 2}), "" << h->name());
        checkAllReduce(*h, DType::kInt8, ReduceOp::kMax, 99, 35);
      }
      w.destroyGroup(name);
      CHILD_CHECK(w.findGroup(name) == nullptr);
    }
    // The world still works, rank 0 included.
    checkAllReduce(e.pg(), DType::kInt32, ReduceOp::kSum, 4099, 40);
    return test::kExitOk;
  });
}

// The reference's example: on 8 ranks only ranks 0 and 4 create the group
// {0, 4} and use it; the others never call newGroup.
TEST(GroupPair, OnlyRanksZeroAndFourCreateAndUseTheirGroup) {
  test::expectWorldOk(8, quick(), [](RankEnv& e) {
    World& w = *e.world;
    if (e.rank == 0 || e.rank == 4) {
      auto g = w.newGroup({4, 0});
      CHILD_CHECK(g->name() == std::string("group_2_") + kSha04, "" << g->name());
      CHILD_CHECK(g->rank() == (e.rank == 0 ? 0 : 1) && g->size() == 2);
      CHILD_CHECK(g->toWorldRank(1) == 4 && g->toGroupRank(4) == 1 && g->toGroupRank(2) == -1);
      for (ReduceOp op : test::kAllOps) checkAllReduce(*g, DType::kFloat16, op, 2049, 50 + static_cast<uint64_t>(op));
      checkAllReduce(*g, DType::kUInt64, ReduceOp::kProd, 1 << 18, 55);
      checkBroadcast(*g, 1, 100000, 56);
      checkAllGather(*g, 12345, 57);
      g->barrier()->wait();
      // Point to point in both directions at once.
      Buffer out(DType::kFloat64, 50000), in(DType::kFloat64, 50000), want(DType::kFloat64, 50000);
      test::fillInput(DType::kFloat64, Domain::kRaw, 58, g->rank(), 0, 50000, out.data());
      WorkPtr s = g->send(out.ref(), 1 - g->rank());
      WorkPtr r = g->recv(in.ref(), 1 - g->rank());
      r->wait();
      s->wait();
      test::fillInput(DType::kFloat64, Domain::kRaw, 58, 1 - g->rank(), 0, 50000, want.data());
      CHILD_CHECK(test::firstDifference(DType::kFloat64, in.data(), want.data(), 50000).empty());
    } else {
      CHILD_CHECK(w.findGroup(World::groupName("group", {0, 4})) == nullptr);
    }
    test::storeBarrier(*e.store, "pair-done", 8);
    checkAllReduce(e.pg(), DType::kFloat32, ReduceOp::kMax, 333, 59);
    return test::kExitOk;
  });
}

// Evens and odds of 6 ranks, each group running its own series of
// collectives at the same time; a message crossing groups would corrupt
// a result.
TEST(GroupDisjoint, TwoGroupsWorkAtTheSameTime) {
  test::expectWorldOk(6, quick(), [](RankEnv& e) {
    const bool even = e.rank % 2 == 0;
    auto g = e.world->newGroup(even ? std::vector<int>{0, 2, 4} : std::vector<int>{1, 3, 5});
    CHILD_CHECK(g->rank() == e.rank / 2 && g->size() == 3);
    const uint64_t base = even ? 1000 : 2000;
    for (int k = 0; k < 12; ++k) {
      const DType d = test::kAllDTypes[static_cast<size_t>(k) % 13];
      const ReduceOp op = test::kAllOps[static_cast<size_t>(k) % 4];
      checkAllReduce(*g, d, op, k % 3 == 0 ? 100003 : 513, base + static_cast<uint64_t>(k));
      checkBroadcast(*g, k % 3, 2000 + k, base + 100 + static_cast<uint64_t>(k));
      checkAllGather(*g, 1000 + k, base + 200 + static_cast<uint64_t>(k));
    }
    checkAllReduce(e.pg(), DType::kInt16, ReduceOp::kSum, 1000, 60);
    return test::kExitOk;
  });
}

// A = {0, 1, 2} and B = {1, 2, 3}: ranks 1 and 2 belong to both and drive
// them from two threads at once, while rank 0 uses only A and rank 3 only B.
TEST(GroupOverlap, SharedRanksDriveTwoGroupsFromTwoThreads) {
  test::expectWorldOk(4, quick(), [](RankEnv& e) {
    World& w = *e.world;
    std::shared_ptr<ProcessGroup> a, b;
    if (e.rank <= 2) a = w.newGroup({0, 1, 2});
    if (e.rank >= 1) b = w.newGroup({1, 2, 3}, {.timeout = 20s});
    if (b) CHILD_CHECK(b->timeout() == 20s);
    auto loop = [](ProcessGroup* g, uint64_t base) {
      for (int k = 0; k < 15; ++k) {
        checkAllReduce(*g, DType::kInt32, ReduceOp::kSum, k % 5 == 0 ? 80001 : 257, base + static_cast<uint64_t>(k));
        checkBroadcast(*g, k % 3, 999, base + 50 + static_cast<uint64_t>(k));
      }
    };
    std::thread ta, tb;
    if (a) ta = std::thread(loop, a.get(), 3000);
    if (b) tb = std::thread(loop, b.get(), 4000);
    if (ta.joinable()) ta.join();
    if (tb.joinable()) tb.join();
    checkAllReduce(e.pg(), DType::kUInt8, ReduceOp::kMin, 100, 61);
    return test::kExitOk;
  });
}

// Bad rank lists are refused at once; a member that never arrives makes
// the others time out at the group's deadline, naming it.
TEST(GroupErrors, BadRankListsAndAMissingMember) {
  test::expectWorldOk(3, quick(), [](RankEnv& e) {
    World& w = *e.world;
    auto invalid = [&](const std::function<void()>& f, const char* what) {
      test::Caught c = test::catchError(f);
      CHILD_CHECK(c == test::Caught::kInvalidArgument, "" << what << ": " << test::caughtName(c));
    };
    invalid([&] { w.newGroup({}); }, "empty");
    invalid([&] { w.newGroup({0, 1, 2, 2}); }, "duplicates");
    invalid([&] { w.newGroup({0, 1, 2, 3}); }, "out of range");
    invalid([&] { w.newGroup({-1, 0, 1, 2}); }, "negative");
    invalid([&] { w.newGroup({0, 1, 2}, {.namePrefix = ""}); }, "an empty name prefix");
    invalid([&] { w.destroyGroup(w.worldGroupName()); }, "destroying the world group");
    invalid([&] { w.destroyGroup("group_9_nope"); }, "destroying an unknown group");
    if (e.rank <= 1) {
      std::string what;
      const uint64_t t0 = test::monoNowNs();
      test::Caught c = test::catchError([&] { w.newGroup({0, 1, 2}, {.timeout = 800ms}); }, &what);
      const double ms = test::msBetween(t0, test::monoNowNs());
      CHILD_CHECK(c == test::Caught::kTimeout, "" << test::caughtName(c) << " " << what);
      CHILD_CHECK(ms >= 700 && ms < 5000, "timed out after " << ms << " ms (deadline 800 ms)");
      CHILD_CHECK(what.find("world rank(s) 2 ") != std::string::npos, "the missing rank is not named: " << what);
    }
    test::storeBarrier(*e.store, "created", 3);
    // Failing to create a group leaves the world usable.
    checkAllReduce(e.pg(), DType::kFloat32, ReduceOp::kSum, 64, 62);
    return test::kExitOk;
  });
}

// A slot too small to give every local rank its regions is refused when
// the group is created, on every rank and with the variable named, not
// discovered inside a collective.
TEST(GroupErrors, SharedMemorySlotTooSmallForTheLocalRanks) {
  constexpr int kRanks = 33;  // 4096 bytes hold 128 for 32 ranks
  test::JobOptions o = quick();
  o.bound = 120s;
  test::expectWorldOk(kRanks, o, [](RankEnv& e) {
    ::setenv("MESHCOMM_SHM_SLOT_BYTES", "4096", 1);
    std::string what;
    test::Caught c = test::catchError([&] { e.world->newGroup(test::ranksUpTo(kRanks)); }, &what);
    CHILD_CHECK(c == test::Caught::kInvalidArgument, "" << test::caughtName(c) << " " << what);
    CHILD_CHECK(what.find("MESHCOMM_SHM_SLOT_BYTES=4096 is too small for 33 ranks") != std::string::npos,
                "unclear message: " << what);
    return test::kExitOk;
  });
}

}  // namespace
}  // namespace meshcomm::test

// TCPStore across forked processes: clients in children, servers that die,
// wait-for-workers, and liveness registrations.

#include "store_fixture.h"

namespace meshcomm {
namespace {

// Its own suite name: fixtures are per translation unit.
class TCPStoreProcessTest : public TCPStoreTest {};

// ---------------------------------------------------------------------------
// Across processes.

// The fork helper the tests below rely on: exit codes, exceptions, signals,
// and a straggler killed at the time bound.
TEST(MultiProcessHelper, ReportsExitCodesSignalsAndKillsStragglers) {
  auto t0 = Clock::now();
  auto st = test::runChildren(
      4,
      [](int rank) -> int {
        switch (rank) {
          case 0: return test::kExitOk;
          case 1: return 5;
          case 2: throw std::runtime_error("thrown in a child");
          default: ::pause(); return test::kExitOk;  // never ends on its own
        }
      },
      300ms);
  ASSERT_EQ(st.size(), 4u);
  EXPECT_TRUE(st[0].ok()) << st[0].describe();
  EXPECT_TRUE(st[1].exited && st[1].exitCode == 5) << st[1].describe();
  EXPECT_TRUE(st[2].exited && st[2].exitCode == test::kExitException) << st[2].describe();
  EXPECT_TRUE(st[3].timedOut && st[3].signaled && st[3].termSignal == SIGKILL)
      << st[3].describe();
  EXPECT_FALSE(test::allOk(st));
  EXPECT_LT(since(t0), 5s);
  for (const auto& s : st) EXPECT_NE(::kill(s.pid, 0), 0) << "pid " << s.pid << " survived";
}

TEST_F(TCPStoreProcessTest, ProcessesForkedWithARunningServerAppendToOneKey) {
  TCPStore server(serverOptions());
  const uint16_t port = server.port();
  constexpr int kProcs = 4, kAppends = 50;
  auto st = test::runChildren(
      kProcs,
      [port](int rank) {
        TCPStore c(clientOptions(port));
        for (int i = 0; i < kAppends; ++i) c.append("log", b(std::to_string(rank)));
        return test::kExitOk;
      },
      20s);
  ASSERT_TRUE(test::allOk(st)) << test::describeAll(st);
  std::string log = server.getString("log");
  ASSERT_EQ(log.size(), static_cast<size_t>(kProcs * kAppends));
  for (int r = 0; r < kProcs; ++r) {
    EXPECT_EQ(std::count(log.begin(), log.end(), static_cast<char>('0' + r)), kAppends);
  }
}

// Three forked clients of the server on `port`: each connects (once `go`
// has a post for it, when given), checks in ("arrived" + 1, "worker/<rank>"
// = rank * 10) and stays connected until the server sets "done".
ChildGroup checkingInClients(uint16_t port, PipeChannel* go = nullptr) {
  return ChildGroup(3, [port, go](int rank) {
    if (go != nullptr) go->receiveOrExit(10s);  // the server is about to start
    TCPStore c(clientOptions(port, 10s));
    c.add("arrived", 1);
    c.set("worker/" + std::to_string(rank), std::to_string(rank * 10));
    c.wait({"done"}, 10s);
    return test::kExitOk;
  });
}

// The server's side: every client of checkingInClients() checked in; then
// they are let go and must all end well.
void expectCheckedIn(TCPStore& server, ChildGroup& children) {
  server.wait({"worker/0", "worker/1", "worker/2"}, 10s);
  EXPECT_EQ(server.getString("arrived"), "3");
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(server.getString("worker/" + std::to_string(r)), std::to_string(r * 10));
  }
  server.set("done", "1");
  expectChildrenOk(children, 15s);
}

TEST_F(TCPStoreProcessTest, ForkedClientsStartedBeforeTheServer) {
  uint16_t port = unusedPort();
  ASSERT_NE(port, 0);
  ChildGroup children = checkingInClients(port);
  ASSERT_EQ(children.size(), 3u);
  std::this_thread::sleep_for(300ms);
  TCPStore server(serverAwaiting(port, 4));
  expectCheckedIn(server, children);
}

TEST_F(TCPStoreProcessTest, WaitForWorkersSucceedsWithThreeForkedClients) {
  uint16_t port = unusedPort();
  ASSERT_NE(port, 0);
  PipeChannel go;
  ChildGroup children = checkingInClients(port, &go);
  auto opts = serverAwaiting(port, 4);
  ASSERT_TRUE(go.post(1, 3));
  auto t0 = Clock::now();
  TCPStore server(opts);
  EXPECT_LT(since(t0), 10s);
  expectCheckedIn(server, children);
}

TEST_F(TCPStoreProcessTest, WaitForWorkersTimeoutSaysHowManyArrived) {
  uint16_t port = unusedPort();
  ASSERT_NE(port, 0);
  PipeChannel go;
  ChildGroup child(1, [port, &go](int) {
    go.receiveOrExit(10s);
    TCPStore c(clientOptions(port, 10s));
    // The server gives up and goes away; this client must see that as a
    // StoreError, not wait out its timeout.
    try {
      c.get("never-set");
    } catch (const StoreError&) {
      return test::kExitOk;
    }
    return test::kExitWrongError;
  });
  auto opts = serverAwaiting(port, 4, 1500ms);
  ASSERT_TRUE(go.post(1, 1));
  auto t0 = Clock::now();
  std::string msg = thrown<Timeout>([&] { TCPStore server(opts); });
  auto elapsed = since(t0);
  EXPECT_CONTAINS(msg, "only 1 of 3");
  EXPECT_GE(elapsed, 1400ms);
  EXPECT_LT(elapsed, 5s);
  expectChildrenOk(child, 10s);
}

TEST_F(TCPStoreProcessTest, ServerOwnClientIsNotAWorker) {
  auto opts = serverOptions(400ms);
  opts.worldSize = 2;
  std::string msg = thrown<Timeout>([&] { TCPStore server(opts); });
  EXPECT_CONTAINS(msg, "only 0 of 1");
  // Without waitForWorkers the constructor does not wait (or it would
  // throw the same Timeout: no worker ever comes).
  opts.waitForWorkers = false;
  TCPStore server(opts);
  EXPECT_EQ(server.add("up", 1), 1);
}

TEST_F(TCPStoreProcessTest, GetBlocksUntilAnotherProcessSetsTheKey) {
  PipeChannel portChannel;
  ChildGroup child(1, [&portChannel](int) {
    auto port = static_cast<uint16_t>(portChannel.receiveOrExit(10s));
    TCPStore c(clientOptions(port, 10s));
    std::this_thread::sleep_for(300ms);
    c.set("late", "from the child");
    std::this_thread::sleep_for(100ms);
    c.multiSet({"m1", "m2"}, {b("x"), b("y")});
    return test::kExitOk;
  });
  TCPStore server(serverOptions());
  ASSERT_TRUE(portChannel.post(server.port(), 1));
  auto t0 = Clock::now();
  EXPECT_EQ(server.getString("late"), "from the child");
  EXPECT_GE(since(t0), 200ms);  // it really waited for the child
  auto got = server.multiGet({"m1", "m2"});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(str(got[0]) + str(got[1]), "xy");
  expectChildrenOk(child, 10s);
}

TEST_F(TCPStoreProcessTest, CountersFromManyProcessesAreExact) {
  constexpr int kProcs = 4, kAdds = 300;
  PipeChannel portChannel;
  ChildGroup children(kProcs, [&portChannel](int rank) {
    auto port = static_cast<uint16_t>(portChannel.receiveOrExit(10s));
    TCPStore c(clientOptions(port, 10s));
    int64_t last = 0;
    for (int i = 0; i < kAdds; ++i) {
      int64_t v = c.add("shared", 1);
      CHILD_CHECK(v > last, "add results must increase: " << v << " after " << last);
      last = v;
      c.add("own/" + std::to_string(rank), 2);
    }
    return test::kExitOk;
  });
  TCPStore server(serverOptions());
  ASSERT_TRUE(portChannel.post(server.port(), kProcs));
  auto st = children.waitAll(30s);
  ASSERT_TRUE(test::allOk(st)) << test::describeAll(st);
  EXPECT_EQ(server.getString("shared"), std::to_string(kProcs * kAdds));
  for (int r = 0; r < kProcs; ++r) {
    EXPECT_EQ(server.getString("own/" + std::to_string(r)), std::to_string(2 * kAdds));
  }
}

TEST_F(TCPStoreProcessTest, CompareSetElectsExactlyOneProcess) {
  constexpr int kProcs = 4;
  PipeChannel portChannel;
  ChildGroup children(kProcs, [&portChannel](int rank) {
    auto port = static_cast<uint16_t>(portChannel.receiveOrExit(10s));
    TCPStore c(clientOptions(port, 10s));
    std::string me = "rank" + std::to_string(rank);
    c.add("ready", 1);
    c.wait({"start"}, 10s);
    Bytes now = c.compareSet("leader", {}, b(me));
    if (str(now) == me) c.set("won/" + std::to_string(rank), "1");
    c.add("voted", 1);
    return test::kExitOk;
  });
  TCPStore server(serverOptions());
  ASSERT_TRUE(portChannel.post(server.port(), kProcs));
  // Start everyone together so the compare-sets really race.
  for (auto t0 = Clock::now(); server.add("ready", 0) < kProcs && since(t0) < 10s;) {
    std::this_thread::sleep_for(5ms);
  }
  server.set("start", "1");
  auto st = children.waitAll(15s);
  ASSERT_TRUE(test::allOk(st)) << test::describeAll(st);
  EXPECT_EQ(server.getString("voted"), std::to_string(kProcs));
  int winners = 0;
  std::string winner;
  for (int r = 0; r < kProcs; ++r) {
    if (server.check({"won/" + std::to_string(r)})) {
      ++winners;
      winner = "rank" + std::to_string(r);
    }
  }
  EXPECT_EQ(winners, 1);
  EXPECT_EQ(server.getString("leader"), winner);
}

// The server runs in a child that the test SIGKILLs.
TEST_F(TCPStoreProcessTest, ClientGetsStoreErrorAfterTheServerDied) {
  PipeChannel portChannel;
  ChildGroup serverProc(1, [&portChannel](int) {
    TCPStore server(serverOptions(30s));
    portChannel.post(server.port(), 1);
    server.get("never");  // keeps the process alive until it is killed
    return test::kExitOk;
  });
  auto port = portChannel.receive(10s);
  ASSERT_TRUE(port.has_value());
  TCPStore client(clientOptions(static_cast<uint16_t>(*port), 30s));
  TCPStore parked(clientOptions(static_cast<uint16_t>(*port), 30s));
  client.set("k", "v");
  ASSERT_EQ(client.getString("k"), "v");

  std::atomic<bool> parkedFailed{false};
  ScopedThreads waiter;
  waiter.spawn([&] {
    try {
      parked.get("never-set");
    } catch (const StoreError&) {
      parkedFailed = true;
    }
  });
  std::this_thread::sleep_for(100ms);
  auto t0 = Clock::now();
  serverProc.signal(0, SIGKILL);
  auto st = serverProc.waitOne(0, 10s);
  EXPECT_TRUE(st.signaled && st.termSignal == SIGKILL) << st.describe();
  waiter.join();
  EXPECT_TRUE(parkedFailed.load()) << "a parked get must fail when the server dies";
  EXPECT_LT(since(t0), 5s);

  t0 = Clock::now();
  thrown<StoreError>([&] { client.set("k", "again"); });
  // Once broken, every later call fails fast as well.
  thrown<StoreError>([&] { client.getString("k"); });
  thrown<StoreError>([&] { client.add("n", 1); });
  EXPECT_LT(since(t0), 2s);
}

TEST_F(TCPStoreProcessTest, ClientGetsStoreErrorWhenAnInProcessServerIsDestroyed) {
  auto server = std::make_unique<TCPStore>(serverOptions());
  TCPStore client(clientOptions(server->port(), 30s));
  client.set("k", "v");
  server.reset();
  auto t0 = Clock::now();
  thrown<StoreError>([&] { client.getString("k"); });
  EXPECT_LT(since(t0), 2s);
}

TEST_F(TCPStoreProcessTest, AppendOnDisconnectFiresWhenTheConnectionCloses) {
  TCPStore server(serverOptions());
  auto client = std::make_unique<TCPStore>(clientOptions(server.port()));
  client->appendOnDisconnect("dead", b("first;"));
  client->appendOnDisconnect("dead", b("r1;"));  // replaces the registration
  EXPECT_FALSE(server.check({"dead"}));           // nothing until it closes
  client.reset();
  EXPECT_EQ(server.getString("dead"), "r1;");      // get waits for the close

  auto second = std::make_unique<TCPStore>(clientOptions(server.port()));
  second->appendOnDisconnect("dead", b("r2;"));
  second.reset();
  server.wait({"dead"});
  for (auto t0 = Clock::now(); server.getString("dead") != "r1;r2;" && since(t0) < 5s;) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(server.getString("dead"), "r1;r2;");
}

TEST_F(TCPStoreProcessTest, ClearOnDisconnectCancelsTheRegistration) {
  TCPStore server(serverOptions());
  auto client = std::make_unique<TCPStore>(clientOptions(server.port()));
  client->appendOnDisconnect("dead", b("x"));
  client->clearOnDisconnect();
  client->set("marker", "1");
  client.reset();
  // The close is processed in order after the marker; give it time to run.
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(server.check({"dead"}));
  EXPECT_THROW(server.appendOnDisconnect("", b("x")), InvalidArgument);
  EXPECT_THROW(server.appendOnDisconnect("k", Bytes(store::kMaxOnCloseValueBytes + 1)),
               InvalidArgument);
}

TEST_F(TCPStoreProcessTest, AppendOnDisconnectFiresWhenAProcessIsKilled) {
  PipeChannel portChannel;
  ChildGroup child(1, [&portChannel](int) {
    auto port = static_cast<uint16_t>(portChannel.receiveOrExit(10s));
    TCPStore c(clientOptions(port));
    c.appendOnDisconnect("lost", b("rank7;"));
    c.set("registered", "1");
    c.get("never-set");  // parked until the parent kills this process
    return test::kExitOk;
  });
  TCPStore server(serverOptions());
  ASSERT_TRUE(portChannel.post(server.port(), 1));
  server.wait({"registered"}, 10s);
  EXPECT_FALSE(server.check({"lost"}));
  child.signal(0, SIGKILL);
  auto t0 = Clock::now();
  EXPECT_EQ(server.getString("lost"), "rank7;");
  EXPECT_LT(since(t0), 5s);
  auto st = child.waitAll(10s);
  EXPECT_TRUE(st[0].signaled && st[0].termSignal == SIGKILL) << st[0].describe();
}

}  // namespace
}  // namespace meshcomm

// TCPStore and PrefixStore: every method, blocking and timeouts, with the
// server and its clients in one process (threads). Authentication and
// limits are in store_auth_limits_test.cc, forked-process cases in
// store_multiprocess_test.cc, and raw-socket checks of the server's request
// handling in store_wire_test.cc and store_fuzz_test.cc.
//
// Every wait is bounded: store timeouts are seconds, children are waited for
// with a bound and killed by pid when it passes.
#include <poll.h>

#include "store_fixture.h"

namespace meshcomm {
namespace {

// ---------------------------------------------------------------------------
// Single process: every method.

TEST_F(TCPStoreTest, SetAndGetRoundTrip) {
  TCPStore server(serverOptions());
  TCPStore client(clientOptions(server.port()));
  client.set("text", "hello");
  EXPECT_EQ(server.getString("text"), "hello");

  Bytes binary(256);
  for (int i = 0; i < 256; ++i) binary[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  client.set("binary", binary);
  EXPECT_EQ(client.get("binary"), binary);

  client.set("empty", Bytes{});
  EXPECT_TRUE(client.get("empty").empty());
  client.set("", "empty key");
  EXPECT_EQ(client.getString(""), "empty key");

  Bytes big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 131 + 7);
  server.set("big", big);
  EXPECT_EQ(client.get("big"), big);

  client.set("text", "replaced");
  EXPECT_EQ(client.getString("text"), "replaced");
}

TEST_F(TCPStoreTest, AddCreatesAndAccumulates) {
  TCPStore store(serverOptions());
  EXPECT_EQ(store.add("c", 5), 5);
  EXPECT_EQ(store.add("c", -7), -2);
  EXPECT_EQ(store.add("c", 0), -2);
  // Counters are stored as decimal text, readable with get().
  EXPECT_EQ(store.getString("c"), "-2");
  store.set("preset", "41");
  EXPECT_EQ(store.add("preset", 1), 42);
  store.set("negative", "-10");
  EXPECT_EQ(store.add("negative", 3), -7);
}

TEST_F(TCPStoreTest, AddOnNonNumericValueThrowsStoreError) {
  TCPStore store(serverOptions());
  for (const std::string v : {"abc", "12abc", "", " 7", "1.5", "99999999999999999999"}) {
    SCOPED_TRACE("value '" + v + "'");
    store.set("bad", v);
    std::string msg = thrown<StoreError>([&] { store.add("bad", 1); });
    EXPECT_CONTAINS(msg, "'bad'");
    EXPECT_CONTAINS(msg, "not an integer");
    EXPECT_EQ(store.getString("bad"), v);  // unchanged
  }
  // A refused add leaves the connection in step.
  EXPECT_EQ(store.add("good", 2), 2);
}

TEST_F(TCPStoreTest, AddOverflowThrowsStoreErrorAndKeepsTheValue) {
  TCPStore store(serverOptions());
  EXPECT_EQ(store.add("max", INT64_MAX), INT64_MAX);
  std::string msg = thrown<StoreError>([&] { store.add("max", 1); });
  EXPECT_CONTAINS(msg, "overflow");
  EXPECT_EQ(store.getString("max"), std::to_string(INT64_MAX));
  EXPECT_EQ(store.add("max", -1), INT64_MAX - 1);

  EXPECT_EQ(store.add("min", INT64_MIN), INT64_MIN);
  thrown<StoreError>([&] { store.add("min", -1); });
  EXPECT_EQ(store.getString("min"), std::to_string(INT64_MIN));
  EXPECT_EQ(store.add("min", INT64_MAX), -1);
}

TEST_F(TCPStoreTest, DeleteKey) {
  TCPStore store(serverOptions());
  store.set("k", "v");
  EXPECT_EQ(store.numKeys(), 1);
  EXPECT_TRUE(store.deleteKey("k"));
  EXPECT_FALSE(store.deleteKey("k"));
  EXPECT_FALSE(store.deleteKey("never-set"));
  EXPECT_EQ(store.numKeys(), 0);
  EXPECT_FALSE(store.check({"k"}));
  store.setTimeout(50ms);
  thrown<Timeout>([&] { store.get("k"); });
}

TEST_F(TCPStoreTest, CompareSetAllCases) {
  TCPStore store(serverOptions());
  // Absent key, empty expected: sets desired.
  EXPECT_EQ(str(store.compareSet("k", {}, b("first"))), "first");
  EXPECT_EQ(store.getString("k"), "first");
  // Present key, matching expected: swaps.
  EXPECT_EQ(str(store.compareSet("k", b("first"), b("second"))), "second");
  EXPECT_EQ(store.getString("k"), "second");
  // Present key, mismatching expected: returns the current value, unchanged.
  EXPECT_EQ(str(store.compareSet("k", b("first"), b("third"))), "second");
  EXPECT_EQ(store.getString("k"), "second");
  // Present key, empty expected: a mismatch too (the key exists).
  EXPECT_EQ(str(store.compareSet("k", {}, b("fourth"))), "second");
  // Absent key, non-empty expected: returns expected, does not create.
  EXPECT_EQ(str(store.compareSet("absent", b("x"), b("y"))), "x");
  EXPECT_FALSE(store.check({"absent"}));
  // A present key holding the empty value matches an empty expected.
  store.set("emptyval", Bytes{});
  EXPECT_EQ(str(store.compareSet("emptyval", {}, b("filled"))), "filled");
}

TEST_F(TCPStoreTest, CheckAndNumKeys) {
  TCPStore server(serverOptions());
  TCPStore client(clientOptions(server.port()));
  EXPECT_EQ(client.numKeys(), 0);
  EXPECT_TRUE(client.check({}));
  EXPECT_FALSE(client.check({"a"}));
  client.set("a", "1");
  client.set("b", "2");
  client.add("c", 1);
  EXPECT_EQ(server.numKeys(), 3);
  EXPECT_TRUE(client.check({"a"}));
  EXPECT_TRUE(client.check({"a", "b", "c"}));
  EXPECT_FALSE(client.check({"a", "b", "missing"}));
  client.set("a", "again");  // overwriting does not add a key
  EXPECT_EQ(client.numKeys(), 3);
}

TEST_F(TCPStoreTest, Append) {
  TCPStore store(serverOptions());
  store.append("log", b("one"));
  store.append("log", b(",two"));
  store.append("log", Bytes{0, 255});
  Bytes expected = b("one,two");
  expected.push_back(0);
  expected.push_back(255);
  EXPECT_EQ(store.get("log"), expected);
  EXPECT_EQ(store.numKeys(), 1);
}

TEST_F(TCPStoreTest, AppendWakesAWaitingGet) {
  TCPStore server(serverOptions());
  TCPStore waiter(clientOptions(server.port()));
  ScopedThreads t;
  t.spawn([&] { EXPECT_EQ(waiter.getString("appended"), "x"); });
  std::this_thread::sleep_for(50ms);
  server.append("appended", b("x"));
  t.join();
}

TEST_F(TCPStoreTest, MultiSetAndMultiGet) {
  TCPStore server(serverOptions());
  TCPStore client(clientOptions(server.port()));
  client.multiSet({"m1", "m2", "m3"}, {b("a"), Bytes{}, b("ccc")});
  auto got = server.multiGet({"m3", "m1", "m2", "m1"});
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(str(got[0]), "ccc");
  EXPECT_EQ(str(got[1]), "a");
  EXPECT_TRUE(got[2].empty());
  EXPECT_EQ(str(got[3]), "a");
  EXPECT_EQ(client.numKeys(), 3);
  client.multiSet({"m1"}, {b("new")});
  EXPECT_EQ(client.getString("m1"), "new");
  EXPECT_TRUE(client.multiGet({}).empty());
  client.multiSet({}, {});
  EXPECT_EQ(client.numKeys(), 3);
  thrown<InvalidArgument>([&] { client.multiSet({"x", "y"}, {b("1")}); });
  EXPECT_FALSE(client.check({"x"}));
}

TEST_F(TCPStoreTest, MultiGetWaitsForEveryKey) {
  TCPStore server(serverOptions());
  TCPStore client(clientOptions(server.port()));
  server.set("first", "1");
  ScopedThreads setter;
  setter.spawn([&] {
    std::this_thread::sleep_for(100ms);
    server.set("second", "2");
  });
  auto t0 = Clock::now();
  auto got = client.multiGet({"first", "second"});
  auto waited = since(t0);
  setter.join();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(str(got[1]), "2");
  EXPECT_GE(waited, 50ms);
}

TEST_F(TCPStoreTest, WaitReturnsOnceEveryKeyExists) {
  TCPStore server(serverOptions());
  TCPStore client(clientOptions(server.port()));
  client.wait({});  // nothing to wait for
  server.set("a", "1");
  client.wait({"a"}, 1s);
  ScopedThreads setter;
  setter.spawn([&] {
    std::this_thread::sleep_for(50ms);
    server.set("b", "2");
    std::this_thread::sleep_for(50ms);
    server.add("c", 1);
  });
  auto t0 = Clock::now();
  client.wait({"a", "b", "c"}, 10s);
  EXPECT_GE(since(t0), 80ms);
  setter.join();
  EXPECT_TRUE(client.check({"a", "b", "c"}));
}

TEST_F(TCPStoreTest, GetTimeoutNamesTheKeyAndIsQuick) {
  TCPStore server(serverOptions());
  TCPStore client(clientOptions(server.port(), 300ms));
  auto t0 = Clock::now();
  std::string msg = thrown<Timeout>([&] { client.get("no/such/key"); });
  auto elapsed = since(t0);
  EXPECT_CONTAINS(msg, "'no/such/key'");
  EXPECT_CONTAINS(msg, "get");
  EXPECT_GE(elapsed, 250ms);
  EXPECT_LT(elapsed, 3s);
  // The server answered the timeout itself, so the connection is in step.
  client.set("after", "ok");
  EXPECT_EQ(client.getString("after"), "ok");

  // A zero timeout does not wait at all.
  client.setTimeout(0ms);
  EXPECT_EQ(client.timeout(), 0ms);
  t0 = Clock::now();
  thrown<Timeout>([&] { client.get("still/missing"); });
  EXPECT_LT(since(t0), 1s);
  EXPECT_EQ(client.getString("after"), "ok");  // present keys need no wait
}

TEST_F(TCPStoreTest, WaitTimeoutNamesOnlyTheMissingKeys) {
  TCPStore store(serverOptions());
  store.set("present", "1");
  auto t0 = Clock::now();
  std::string msg = thrown<Timeout>([&] { store.wait({"gone1", "present", "gone2"}, 200ms); });
  auto elapsed = since(t0);
  EXPECT_CONTAINS(msg, "'gone1'");
  EXPECT_CONTAINS(msg, "'gone2'");
  EXPECT_EQ(msg.find("'present'"), std::string::npos) << msg;
  EXPECT_GE(elapsed, 150ms);
  EXPECT_LT(elapsed, 3s);

  store.setTimeout(200ms);
  msg = thrown<Timeout>([&] { store.multiGet({"present", "gone3"}); });
  EXPECT_CONTAINS(msg, "'gone3'");
}

TEST_F(TCPStoreTest, ParkedRequestDoesNotBlockOtherClients) {
  TCPStore server(serverOptions());
  TCPStore parked(clientOptions(server.port()));
  TCPStore busy(clientOptions(server.port()));
  std::atomic<bool> done{false};
  ScopedThreads t;
  t.spawn([&] {
    EXPECT_EQ(parked.getString("later"), "now");
    done = true;
  });
  std::this_thread::sleep_for(50ms);  // let the get park
  for (int i = 0; i < 200; ++i) EXPECT_EQ(busy.add("n", 1), i + 1);
  EXPECT_FALSE(done.load());
  busy.set("later", "now");
  t.join();
  EXPECT_TRUE(done.load());
}

TEST_F(TCPStoreTest, ManyWaitersOnOneKeyAllWake) {
  TCPStore server(serverOptions());
  constexpr int kWaiters = 8;
  std::vector<std::unique_ptr<TCPStore>> clients;
  for (int i = 0; i < kWaiters; ++i) {
    clients.push_back(std::make_unique<TCPStore>(clientOptions(server.port())));
  }
  std::atomic<int> woke{0};
  ScopedThreads threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.spawn([&, i] {
      if (clients[static_cast<size_t>(i)]->getString("go") == "value") ++woke;
    });
  }
  std::this_thread::sleep_for(50ms);
  server.set("go", "value");
  threads.join();
  EXPECT_EQ(woke.load(), kWaiters);
}

TEST_F(TCPStoreTest, OneStoreSharedByManyThreads) {
  TCPStore server(serverOptions());
  TCPStore shared(clientOptions(server.port()));
  constexpr int kThreads = 4, kAdds = 250;
  ScopedThreads threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.spawn([&, t] {
      for (int i = 0; i < kAdds; ++i) {
        shared.add("total", 1);
        shared.set(numbered("t", t), std::to_string(i));
      }
    });
  }
  threads.join();
  EXPECT_EQ(server.getString("total"), std::to_string(kThreads * kAdds));
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(server.getString(numbered("t", t)), std::to_string(kAdds - 1));
  }
}

TEST_F(TCPStoreTest, PortZeroPicksAFreePort) {
  TCPStore a(serverOptions());
  TCPStore b2(serverOptions());
  EXPECT_NE(a.port(), 0);
  EXPECT_NE(b2.port(), 0);
  EXPECT_NE(a.port(), b2.port());
  EXPECT_TRUE(a.isServer());
  a.set("only-in-a", "1");
  TCPStore client(clientOptions(b2.port()));
  EXPECT_FALSE(client.isServer());
  EXPECT_EQ(client.host(), "127.0.0.1");
  EXPECT_EQ(client.port(), b2.port());
  EXPECT_FALSE(client.check({"only-in-a"}));
}

TEST_F(TCPStoreTest, ExplicitPortIsUsed) {
  uint16_t port = unusedPort();
  ASSERT_NE(port, 0);
  auto opts = serverOptions();
  opts.port = port;
  TCPStore server(opts);
  EXPECT_EQ(server.port(), port);
  TCPStore client(clientOptions(port));
  client.set("k", "v");
  EXPECT_EQ(server.getString("k"), "v");
  // A second server cannot take the same port.
  EXPECT_THROW(TCPStore{opts}, Error);
}

TEST_F(TCPStoreTest, ServerOnEveryInterfaceIsReachableByName) {
  for (const std::string host : {"0.0.0.0", ""}) {
    SCOPED_TRACE("bind host '" + host + "'");
    auto opts = serverOptions();
    opts.host = host;
    TCPStore server(opts);  // its own client connects through loopback
    server.set("k", "v");
    auto copts = clientOptions(server.port());
    copts.host = "localhost";
    TCPStore client(copts);
    EXPECT_EQ(client.getString("k"), "v");
  }
}

TEST_F(TCPStoreTest, BadOptionsAreInvalidArgument) {
  auto opts = serverOptions();
  opts.worldSize = 0;
  EXPECT_THROW(TCPStore{opts}, InvalidArgument);
  opts = serverOptions();
  opts.timeout = -1ms;
  EXPECT_THROW(TCPStore{opts}, InvalidArgument);
  TCPStore store(serverOptions());
  EXPECT_THROW(store.setTimeout(-5ms), InvalidArgument);
  EXPECT_EQ(store.timeout(), 10s);
}

TEST_F(TCPStoreTest, HugeTimeoutMeansNoDeadlineRatherThanOverflow) {
  TCPStore server(serverOptions());
  TCPStore client(clientOptions(server.port()));
  client.setTimeout(std::chrono::milliseconds::max());
  client.set("k", "v");
  EXPECT_EQ(client.getString("k"), "v");
  EXPECT_EQ(client.add("n", 3), 3);
  client.wait({"k"});
  EXPECT_EQ(client.multiGet({"k"}).size(), 1u);
  auto opts = clientOptions(server.port(), std::chrono::hours(24 * 365 * 1000));
  TCPStore longTimeout(opts);
  EXPECT_EQ(longTimeout.getString("k"), "v");
}

// Something listens on the port but is not this job's store: it takes the
// connection and drops it before answering the hello. The client says so,
// naming the address, rather than only that the connection was lost.
TEST_F(TCPStoreTest, AListenerThatDropsTheHelloIsNamedAsPossiblyNotTheStore) {
  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(listener.get(), 4), 0);
  socklen_t len = sizeof(a);
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len);
  const uint16_t port = ntohs(a.sin_port);
  ScopedThreads threads;
  threads.spawn([&] {
    // Accept one client within the test's bound and close it unanswered.
    pollfd p{listener.get(), POLLIN, 0};
    if (::poll(&p, 1, 5000) == 1) Fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  });
  std::string msg = thrown<StoreError>([&] { TCPStore c(clientOptions(port, 5s)); });
  EXPECT_CONTAINS(msg, "127.0.0.1:" + std::to_string(port));
  EXPECT_CONTAINS(msg, "before answering the handshake");
  EXPECT_CONTAINS(msg, "MASTER_PORT");
}

TEST_F(TCPStoreTest, ConnectTimesOutWhenNoServer) {
  uint16_t port = unusedPort();
  ASSERT_NE(port, 0);
  auto t0 = Clock::now();
  std::string msg = thrown<Timeout>([&] { TCPStore c(clientOptions(port, 500ms)); });
  auto elapsed = since(t0);
  EXPECT_CONTAINS(msg, "127.0.0.1:" + std::to_string(port));
  EXPECT_GE(elapsed, 300ms);  // it retried rather than giving up at once
  EXPECT_LT(elapsed, 3s);
}

TEST_F(TCPStoreTest, ClientsStartedBeforeTheServerConnectByRetrying) {
  uint16_t port = unusedPort();
  ASSERT_NE(port, 0);
  constexpr int kClients = 3;
  std::atomic<int> ok{0};
  ScopedThreads threads;
  for (int i = 0; i < kClients; ++i) {
    threads.spawn([&, i] {
      try {
        TCPStore c(clientOptions(port, 10s));
        c.set("thread/" + std::to_string(i), "up");
        c.wait({"release"}, 10s);
        ++ok;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "client " << i << ": " << e.what();
      }
    });
  }
  std::this_thread::sleep_for(300ms);
  TCPStore server(serverAwaiting(port, kClients + 1));  // returns once all three clients are in
  server.wait({"thread/0", "thread/1", "thread/2"}, 10s);
  server.set("release", "1");
  threads.join();
  EXPECT_EQ(ok.load(), kClients);
}

// ---------------------------------------------------------------------------
// PrefixStore.

TEST_F(TCPStoreTest, PrefixStoreNamespacesEveryMethod) {
  auto base = std::make_shared<TCPStore>(serverOptions());
  PrefixStore g1("group1", base);
  PrefixStore g2("group2", base);
  EXPECT_EQ(g1.base(), base);

  g1.set("k", "one");
  g2.set("k", "two");
  EXPECT_EQ(g1.getString("k"), "one");
  EXPECT_EQ(g2.getString("k"), "two");
  EXPECT_EQ(base->getString("group1/k"), "one");
  EXPECT_FALSE(base->check({"k"}));

  EXPECT_EQ(g1.add("n", 2), 2);
  EXPECT_EQ(g2.add("n", 5), 5);
  EXPECT_EQ(base->getString("group1/n"), "2");

  EXPECT_EQ(str(g1.compareSet("cas", {}, b("x"))), "x");
  EXPECT_EQ(str(g2.compareSet("cas", b("x"), b("y"))), "x");  // absent in g2
  EXPECT_FALSE(g2.check({"cas"}));

  g1.append("log", b("a"));
  g1.append("log", b("b"));
  EXPECT_EQ(base->getString("group1/log"), "ab");

  g1.multiSet({"m1", "m2"}, {b("1"), b("2")});
  auto got = g1.multiGet({"m2", "m1"});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(str(got[0]) + str(got[1]), "21");
  EXPECT_TRUE(base->check({"group1/m1", "group1/m2"}));
  EXPECT_TRUE(g1.check({"k", "n", "m1"}));
  EXPECT_FALSE(g2.check({"m1"}));

  g1.wait({"k", "m1"}, 1s);
  g1.setTimeout(200ms);
  EXPECT_EQ(base->timeout(), 200ms);
  EXPECT_EQ(g2.timeout(), 200ms);
  std::string msg = thrown<Timeout>([&] { g2.wait({"m1"}); });
  EXPECT_CONTAINS(msg, "'group2/m1'");

  // numKeys counts the whole base store.
  EXPECT_EQ(g1.numKeys(), base->numKeys());
  int64_t before = base->numKeys();
  EXPECT_TRUE(g1.deleteKey("k"));
  EXPECT_FALSE(g1.deleteKey("k"));
  EXPECT_EQ(g2.getString("k"), "two");
  EXPECT_EQ(base->numKeys(), before - 1);
}

TEST_F(TCPStoreTest, NestedPrefixStoresAndNullBase) {
  auto base = std::make_shared<TCPStore>(serverOptions());
  auto outer = std::make_shared<PrefixStore>("outer", base);
  PrefixStore inner("inner", outer);
  inner.set("k", "v");
  EXPECT_EQ(base->getString("outer/inner/k"), "v");
  EXPECT_EQ(outer->getString("inner/k"), "v");
  EXPECT_THROW(PrefixStore("p", nullptr), InvalidArgument);
}

TEST_F(TCPStoreTest, PrefixStoreWaitsAcrossClients) {
  auto server = std::make_shared<TCPStore>(serverOptions());
  auto client = std::make_shared<TCPStore>(clientOptions(server->port()));
  PrefixStore viaServer("job", server);
  PrefixStore viaClient("job", client);
  ScopedThreads setter;
  setter.spawn([&] {
    std::this_thread::sleep_for(50ms);
    viaServer.set("ready", "yes");
  });
  EXPECT_EQ(viaClient.getString("ready"), "yes");
  setter.join();
}

}  // namespace
}  // namespace meshcomm

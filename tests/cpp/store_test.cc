// TCPStore and PrefixStore: every method, blocking and timeouts, worker
// rendezvous, authentication, limits, and failure of the server, with the
// server and its clients in one process (threads) and across forked
// processes. Raw-socket checks of the server's request handling are in
// store_fuzz_test.cc.
//
// Every wait is bounded: store timeouts are seconds, children are waited for
// with a bound and killed by pid when it passes.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/fd.h"
#include "meshcomm/error.h"
#include "meshcomm/store.h"
#include "multiprocess.h"
#include "store/protocol.h"

namespace meshcomm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::ChildGroup;
using test::PipeChannel;

#define EXPECT_CONTAINS(haystack, needle)                                   \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)          \
      << "'" << (haystack) << "' does not contain '" << (needle) << "'"

Bytes b(const std::string& s) { return Bytes(s.begin(), s.end()); }
std::string str(const Bytes& v) { return std::string(v.begin(), v.end()); }

// prefix + n, built with append: GCC 12 warns falsely (-Wrestrict) about
// some inlined "literal" + std::string concatenations.
std::string numbered(const char* prefix, int n) {
  std::string k(prefix);
  k += std::to_string(n);
  return k;
}

std::chrono::milliseconds since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
}

TCPStoreOptions serverOptions(std::chrono::milliseconds timeout = 10s) {
  TCPStoreOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.isServer = true;
  o.timeout = timeout;
  return o;
}

TCPStoreOptions clientOptions(uint16_t port, std::chrono::milliseconds timeout = 10s) {
  TCPStoreOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.isServer = false;
  o.timeout = timeout;
  return o;
}

// A port nothing listens on right now (bound, read back, closed). Another
// process could take it before the test does, which is unlikely enough.
uint16_t unusedPort() {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return 0;
  socklen_t len = sizeof(a);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// Threads joined when the scope ends, so a failed assertion or an
// exception in the test body never destroys a joinable std::thread (which
// would abort the whole test binary). Every thread body is bounded by a
// store timeout, so the join is bounded too.
class ScopedThreads {
 public:
  ~ScopedThreads() { join(); }
  template <class F>
  void spawn(F&& f) {
    threads_.emplace_back(std::forward<F>(f));
  }
  void join() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  std::vector<std::thread> threads_;
};

// Runs f and returns the message of the E it throws; fails the test when
// nothing is thrown (any other exception type escapes and fails it too).
template <class E, class F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception, but the call returned";
  return "";
}

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Tests that expect no authentication must not pick up a token from the
// environment the suite runs in.
class TCPStoreTest : public ::testing::Test {
 protected:
  ScopedEnv noToken_{"MESHCOMM_AUTH_TOKEN", std::nullopt};
};

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
  auto opts = serverOptions();
  opts.port = port;
  opts.worldSize = kClients + 1;
  TCPStore server(opts);  // returns once all three clients are in
  server.wait({"thread/0", "thread/1", "thread/2"}, 10s);
  server.set("release", "1");
  threads.join();
  EXPECT_EQ(ok.load(), kClients);
}

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

TEST_F(TCPStoreTest, ProcessesForkedWithARunningServerAppendToOneKey) {
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

TEST_F(TCPStoreTest, ForkedClientsStartedBeforeTheServer) {
  uint16_t port = unusedPort();
  ASSERT_NE(port, 0);
  ChildGroup children(3, [port](int rank) {
    TCPStore c(clientOptions(port, 10s));
    c.add("arrived", 1);
    c.set("child/" + std::to_string(rank), std::to_string(rank * 10));
    c.wait({"done"}, 10s);
    return test::kExitOk;
  });
  ASSERT_EQ(children.size(), 3u);
  std::this_thread::sleep_for(300ms);
  auto opts = serverOptions();
  opts.port = port;
  opts.worldSize = 4;
  TCPStore server(opts);
  server.wait({"child/0", "child/1", "child/2"}, 10s);
  EXPECT_EQ(server.getString("arrived"), "3");
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(server.getString("child/" + std::to_string(r)), std::to_string(r * 10));
  }
  server.set("done", "1");
  auto st = children.waitAll(15s);
  EXPECT_TRUE(test::allOk(st)) << test::describeAll(st);
}

TEST_F(TCPStoreTest, WaitForWorkersSucceedsWithThreeForkedClients) {
  uint16_t port = unusedPort();
  ASSERT_NE(port, 0);
  PipeChannel go;
  ChildGroup children(3, [port, &go](int rank) {
    go.receiveOrExit(10s);  // the server is about to start
    TCPStore c(clientOptions(port, 10s));
    c.set("worker/" + std::to_string(rank), "here");
    c.wait({"done"}, 10s);
    return test::kExitOk;
  });
  auto opts = serverOptions();
  opts.port = port;
  opts.worldSize = 4;
  ASSERT_TRUE(go.post(1, 3));
  auto t0 = Clock::now();
  TCPStore server(opts);
  EXPECT_LT(since(t0), 10s);
  server.wait({"worker/0", "worker/1", "worker/2"}, 10s);
  server.set("done", "1");
  auto st = children.waitAll(15s);
  EXPECT_TRUE(test::allOk(st)) << test::describeAll(st);
}

TEST_F(TCPStoreTest, WaitForWorkersTimeoutSaysHowManyArrived) {
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
  auto opts = serverOptions(1500ms);
  opts.port = port;
  opts.worldSize = 4;
  ASSERT_TRUE(go.post(1, 1));
  auto t0 = Clock::now();
  std::string msg = thrown<Timeout>([&] { TCPStore server(opts); });
  auto elapsed = since(t0);
  EXPECT_CONTAINS(msg, "only 1 of 3");
  EXPECT_GE(elapsed, 1400ms);
  EXPECT_LT(elapsed, 5s);
  auto st = child.waitAll(10s);
  EXPECT_TRUE(test::allOk(st)) << test::describeAll(st);
}

TEST_F(TCPStoreTest, ServerOwnClientIsNotAWorker) {
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

TEST_F(TCPStoreTest, GetBlocksUntilAnotherProcessSetsTheKey) {
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
  auto st = child.waitAll(10s);
  EXPECT_TRUE(test::allOk(st)) << test::describeAll(st);
}

TEST_F(TCPStoreTest, CountersFromManyProcessesAreExact) {
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

TEST_F(TCPStoreTest, CompareSetElectsExactlyOneProcess) {
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
TEST_F(TCPStoreTest, ClientGetsStoreErrorAfterTheServerDied) {
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

TEST_F(TCPStoreTest, ClientGetsStoreErrorWhenAnInProcessServerIsDestroyed) {
  auto server = std::make_unique<TCPStore>(serverOptions());
  TCPStore client(clientOptions(server->port(), 30s));
  client.set("k", "v");
  server.reset();
  auto t0 = Clock::now();
  thrown<StoreError>([&] { client.getString("k"); });
  EXPECT_LT(since(t0), 2s);
}

TEST_F(TCPStoreTest, AppendOnDisconnectFiresWhenTheConnectionCloses) {
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

TEST_F(TCPStoreTest, ClearOnDisconnectCancelsTheRegistration) {
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

TEST_F(TCPStoreTest, AppendOnDisconnectFiresWhenAProcessIsKilled) {
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

// ---------------------------------------------------------------------------
// Authentication.

TEST_F(TCPStoreTest, AuthTokenOptionIsAccepted) {
  auto opts = serverOptions();
  opts.authToken = "s3cret";
  TCPStore server(opts);
  auto copts = clientOptions(server.port());
  copts.authToken = "s3cret";
  TCPStore client(copts);
  client.set("k", "v");
  EXPECT_EQ(server.getString("k"), "v");
}

TEST_F(TCPStoreTest, AuthTokenFromTheEnvironmentIsAccepted) {
  ScopedEnv token("MESHCOMM_AUTH_TOKEN", "from-env");
  TCPStore server(serverOptions());
  TCPStore client(clientOptions(server.port()));
  client.set("k", "v");
  EXPECT_EQ(server.getString("k"), "v");
  // The server really requires it: an explicit wrong token (which takes
  // precedence over the environment) is refused.
  auto wrong = clientOptions(server.port());
  wrong.authToken = "other";
  thrown<StoreError>([&] { TCPStore c(wrong); });
}

TEST_F(TCPStoreTest, AuthTokenFromTheEnvironmentInAForkedClient) {
  auto opts = serverOptions();
  opts.authToken = "forked-token";
  PipeChannel portChannel;
  ChildGroup child(1, [&portChannel](int) {
    auto port = static_cast<uint16_t>(portChannel.receiveOrExit(10s));
    ::setenv("MESHCOMM_AUTH_TOKEN", "forked-token", 1);
    TCPStore c(clientOptions(port));
    c.set("child", "authenticated");
    return test::kExitOk;
  });
  TCPStore server(opts);
  ASSERT_TRUE(portChannel.post(server.port(), 1));
  EXPECT_EQ(server.getString("child"), "authenticated");
  auto st = child.waitAll(10s);
  EXPECT_TRUE(test::allOk(st)) << test::describeAll(st);
}

TEST_F(TCPStoreTest, WrongTokenIsRefusedWithStoreError) {
  auto opts = serverOptions();
  opts.authToken = "right";
  TCPStore server(opts);
  auto copts = clientOptions(server.port());
  copts.authToken = "wrong";
  auto t0 = Clock::now();
  std::string msg = thrown<StoreError>([&] { TCPStore c(copts); });
  EXPECT_LT(since(t0), 3s);
  EXPECT_CONTAINS(msg, "authentication failed");
  // The server keeps serving clients with the right token.
  copts.authToken = "right";
  TCPStore good(copts);
  good.set("still", "works");
  EXPECT_EQ(server.getString("still"), "works");
}

TEST_F(TCPStoreTest, MissingTokenIsRefusedWithStoreErrorNamingTheVariable) {
  auto opts = serverOptions();
  opts.authToken = "right";
  TCPStore server(opts);
  std::string msg = thrown<StoreError>([&] { TCPStore c(clientOptions(server.port())); });
  EXPECT_CONTAINS(msg, "MESHCOMM_AUTH_TOKEN");
  EXPECT_CONTAINS(msg, "requires authentication");
}

TEST_F(TCPStoreTest, RefusedClientsDoNotCountAsWorkers) {
  uint16_t port = unusedPort();
  ASSERT_NE(port, 0);
  ScopedThreads intruder;
  intruder.spawn([port] {
    auto copts = clientOptions(port, 5s);
    copts.authToken = "guess";
    try {
      TCPStore c(copts);
      ADD_FAILURE() << "a client with the wrong token was accepted";
    } catch (const StoreError&) {
      // refused, as it should be
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected a refusal, got: " << e.what();
    }
  });
  auto opts = serverOptions(1s);
  opts.port = port;
  opts.worldSize = 2;
  opts.authToken = "right";
  std::string msg = thrown<Timeout>([&] { TCPStore server(opts); });
  intruder.join();
  EXPECT_CONTAINS(msg, "only 0 of 1");
}

// ---------------------------------------------------------------------------
// Limits.

TEST_F(TCPStoreTest, OversizedRequestsAreRejectedClientSide) {
  StoreLimits small;
  small.maxKeyBytes = 16;
  small.maxValueBytes = 64;
  small.maxKeysPerRequest = 4;
  TCPStore server(serverOptions());
  auto copts = clientOptions(server.port());
  copts.limits = small;
  TCPStore client(copts);
  const std::string longKey(17, 'k'), okKey(16, 'k');
  const Bytes bigValue(65, 'v'), okValue(64, 'v');
  const std::vector<std::string> fiveKeys = {"a", "b", "c", "d", "e"};

  EXPECT_CONTAINS(thrown<InvalidArgument>([&] { client.set(longKey, okValue); }),
                  "key of 17 bytes exceeds the limit of 16");
  EXPECT_CONTAINS(thrown<InvalidArgument>([&] { client.set(okKey, bigValue); }),
                  "value of 65 bytes exceeds the limit of 64");
  thrown<InvalidArgument>([&] { client.get(longKey); });
  thrown<InvalidArgument>([&] { client.add(longKey, 1); });
  thrown<InvalidArgument>([&] { client.deleteKey(longKey); });
  thrown<InvalidArgument>([&] { client.compareSet(longKey, {}, okValue); });
  thrown<InvalidArgument>([&] { client.compareSet(okKey, bigValue, okValue); });
  thrown<InvalidArgument>([&] { client.compareSet(okKey, {}, bigValue); });
  thrown<InvalidArgument>([&] { client.append(okKey, bigValue); });
  thrown<InvalidArgument>([&] { client.append(longKey, okValue); });
  EXPECT_CONTAINS(thrown<InvalidArgument>([&] { client.wait(fiveKeys, 1s); }),
                  "at most 4 keys");
  thrown<InvalidArgument>([&] { client.wait({okKey, longKey}, 1s); });
  thrown<InvalidArgument>([&] { client.check(fiveKeys); });
  thrown<InvalidArgument>([&] { client.multiGet(fiveKeys); });
  thrown<InvalidArgument>([&] { client.multiSet({longKey}, {okValue}); });
  // The values of one multi_set count together against the value limit.
  thrown<InvalidArgument>([&] { client.multiSet({"a", "b"}, {okValue, Bytes(1)}); });

  // Nothing reached the server, and the connection is still fine.
  EXPECT_EQ(server.numKeys(), 0);
  client.set(okKey, okValue);
  EXPECT_EQ(client.get(okKey), okValue);
}

TEST_F(TCPStoreTest, ServerEnforcesItsOwnLimits) {
  auto opts = serverOptions();
  opts.limits.maxKeyBytes = 16;
  opts.limits.maxValueBytes = 64;
  TCPStore server(opts);
  // A client configured with larger limits than the server's.
  TCPStore client(clientOptions(server.port()));
  TCPStore bystander(clientOptions(server.port()));
  std::string msg = thrown<StoreError>([&] { client.set(std::string(100, 'k'), "v"); });
  EXPECT_CONTAINS(msg, "exceeds the limit of 16");
  // The server closed that connection; the client says so, quickly.
  thrown<StoreError>([&] { client.set("k", "v"); });
  // Other clients are unaffected.
  bystander.set("k", "v");
  EXPECT_EQ(server.getString("k"), "v");
  EXPECT_EQ(server.numKeys(), 1);
}

TEST_F(TCPStoreTest, AppendBeyondTheValueLimitIsRefused) {
  auto opts = serverOptions();
  opts.limits.maxValueBytes = 64;
  TCPStore store(opts);
  store.append("a", Bytes(40, 'x'));
  std::string msg = thrown<StoreError>([&] { store.append("a", Bytes(40, 'y')); });
  EXPECT_CONTAINS(msg, "value limit");
  EXPECT_EQ(store.get("a"), Bytes(40, 'x'));
  store.append("a", Bytes(24, 'z'));  // exactly up to the limit is fine
  EXPECT_EQ(store.get("a").size(), 64u);
}

TEST_F(TCPStoreTest, ServerRefusesClientsBeyondMaxClients) {
  auto opts = serverOptions();
  opts.limits.maxClients = 2;  // the server's own client and one more
  TCPStore server(opts);
  auto first = std::make_unique<TCPStore>(clientOptions(server.port(), 3s));
  first->set("k", "v");
  auto t0 = Clock::now();
  std::string msg = thrown<StoreError>([&] { TCPStore extra(clientOptions(server.port(), 3s)); });
  EXPECT_LT(since(t0), 3s);
  // The server closes the surplus connection at once (FIN, or RST when the
  // hello had already arrived).
  EXPECT_CONTAINS(msg, "lost the connection");
  // Once a client leaves, there is room again. The server notices the close
  // asynchronously, so retry for a bounded time.
  first.reset();
  std::unique_ptr<TCPStore> again;
  for (auto t1 = Clock::now(); !again && since(t1) < 5s;) {
    try {
      again = std::make_unique<TCPStore>(clientOptions(server.port(), 3s));
    } catch (const StoreError&) {
      std::this_thread::sleep_for(10ms);
    }
  }
  ASSERT_TRUE(again);
  EXPECT_EQ(again->getString("k"), "v");
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

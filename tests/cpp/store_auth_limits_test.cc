// TCPStore's authentication (a token from the options or the environment,
// refused clients, which never count as workers) and its limits (request
// sizes on both sides, value sizes, the number of clients), with the server
// and its clients in one process (threads) or a forked client. Every method
// and PrefixStore: store_test.cc.
//
// Every wait is bounded: store timeouts are seconds, children are waited for
// with a bound and killed by pid when it passes.
#include "store_fixture.h"

namespace meshcomm {
namespace {

// A suite of its own: store_fixture.h's fixture is a class per file.
using TCPStoreAuthAndLimits = TCPStoreTest;

// `o` with the authentication token `token`.
TCPStoreOptions withToken(TCPStoreOptions o, const char* token) {
  o.authToken = token;
  return o;
}

// ---------------------------------------------------------------------------
// Authentication.

TEST_F(TCPStoreAuthAndLimits, AuthTokenOptionIsAccepted) {
  TCPStore server(withToken(serverOptions(), "s3cret"));
  TCPStore client(withToken(clientOptions(server.port()), "s3cret"));
  client.set("k", "v");
  EXPECT_EQ(server.getString("k"), "v");
}

TEST_F(TCPStoreAuthAndLimits, AuthTokenFromTheEnvironmentIsAccepted) {
  ScopedEnv token("MESHCOMM_AUTH_TOKEN", "from-env");
  TCPStore server(serverOptions());
  TCPStore client(clientOptions(server.port()));
  client.set("k", "v");
  EXPECT_EQ(server.getString("k"), "v");
  // The server really requires it: an explicit wrong token (which takes
  // precedence over the environment) is refused.
  thrown<StoreError>([&] { TCPStore c(withToken(clientOptions(server.port()), "other")); });
}

TEST_F(TCPStoreAuthAndLimits, AuthTokenFromTheEnvironmentInAForkedClient) {
  PipeChannel portChannel;
  ChildGroup child(1, [&portChannel](int) {
    auto port = static_cast<uint16_t>(portChannel.receiveOrExit(10s));
    ::setenv("MESHCOMM_AUTH_TOKEN", "forked-token", 1);
    TCPStore c(clientOptions(port));
    c.set("child", "authenticated");
    return test::kExitOk;
  });
  TCPStore server(withToken(serverOptions(), "forked-token"));
  ASSERT_TRUE(portChannel.post(server.port(), 1));
  EXPECT_EQ(server.getString("child"), "authenticated");
  expectChildrenOk(child, 10s);
}

TEST_F(TCPStoreAuthAndLimits, WrongTokenIsRefusedWithStoreError) {
  TCPStore server(withToken(serverOptions(), "right"));
  auto t0 = Clock::now();
  std::string msg =
      thrown<StoreError>([&] { TCPStore c(withToken(clientOptions(server.port()), "wrong")); });
  EXPECT_LT(since(t0), 3s);
  EXPECT_CONTAINS(msg, "authentication failed");
  // The server keeps serving clients with the right token.
  TCPStore good(withToken(clientOptions(server.port()), "right"));
  good.set("still", "works");
  EXPECT_EQ(server.getString("still"), "works");
}

TEST_F(TCPStoreAuthAndLimits, MissingTokenIsRefusedWithStoreErrorNamingTheVariable) {
  TCPStore server(withToken(serverOptions(), "right"));
  std::string msg = thrown<StoreError>([&] { TCPStore c(clientOptions(server.port())); });
  EXPECT_CONTAINS(msg, "MESHCOMM_AUTH_TOKEN");
  EXPECT_CONTAINS(msg, "requires authentication");
}

TEST_F(TCPStoreAuthAndLimits, RefusedClientsDoNotCountAsWorkers) {
  uint16_t port = unusedPort();
  ASSERT_NE(port, 0);
  ScopedThreads intruder;
  intruder.spawn([port] {
    try {
      TCPStore c(withToken(clientOptions(port, 5s), "guess"));
      ADD_FAILURE() << "a client with the wrong token was accepted";
    } catch (const StoreError&) {
      // refused, as it should be
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected a refusal, got: " << e.what();
    }
  });
  std::string msg =
      thrown<Timeout>([&] { TCPStore server(withToken(serverAwaiting(port, 2, 1s), "right")); });
  intruder.join();
  EXPECT_CONTAINS(msg, "only 0 of 1");
}

// ---------------------------------------------------------------------------
// Limits.

TEST_F(TCPStoreAuthAndLimits, OversizedRequestsAreRejectedClientSide) {
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

TEST_F(TCPStoreAuthAndLimits, ServerEnforcesItsOwnLimits) {
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

TEST_F(TCPStoreAuthAndLimits, AppendBeyondTheValueLimitIsRefused) {
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

TEST_F(TCPStoreAuthAndLimits, ServerRefusesClientsBeyondMaxClients) {
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

}  // namespace
}  // namespace meshcomm

// TCPStore::interrupt: a wait blocked on another thread ends at once with
// StoreError, later calls fail too, and other connections are untouched.
// (The World's abort-notice watcher stops its store wait this way.)

#include "store_fixture.h"

namespace meshcomm {
namespace {

class TCPStoreInterruptTest : public TCPStoreTest {};

TEST_F(TCPStoreInterruptTest, EndsABlockedWaitAndLaterCalls) {
  TCPStore server(serverOptions());
  auto waiter = std::make_shared<TCPStore>(clientOptions(server.port(), 30s));
  std::atomic<bool> ended{false};
  std::string why;
  ScopedThreads threads;
  threads.spawn([&] {
    why = thrown<StoreError>([&] { waiter->wait({"never-set"}, 20s); });
    ended = true;
  });
  // The wait is parked at the server, or about to be: either way it must end.
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(ended.load());
  const auto t0 = Clock::now();
  waiter->interrupt();
  threads.join();
  EXPECT_TRUE(ended.load());
  EXPECT_LT(since(t0), 10s);  // well before the wait's own 20 s
  EXPECT_CONTAINS(why, "interrupted");
  EXPECT_CONTAINS(thrown<StoreError>([&] { waiter->set("k", b("v")); }), "interrupted");
  // The server and its other clients go on.
  server.set("k", b("v"));
  EXPECT_EQ(str(server.get("k")), "v");
}

TEST_F(TCPStoreInterruptTest, BeforeAnyCallMakesTheNextOneFail) {
  TCPStore server(serverOptions());
  TCPStore client(clientOptions(server.port()));
  client.interrupt();
  EXPECT_CONTAINS(thrown<StoreError>([&] { client.check({"k"}); }), "interrupted");
}

}  // namespace
}  // namespace meshcomm

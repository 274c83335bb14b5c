// A live TCPStore server seen through raw sockets: targeted cases of
// unusual or hostile clients (handshake rules, pipelined requests, requests
// queued behind waits, stalled readers, descriptor exhaustion). Bounded
// fuzzing of the same server is in store_fuzz_test.cc.
//
// The server logs a warning per dropped client; it rate-limits them, so the
// noise is bounded.
#include <sys/resource.h>
#include <sys/socket.h>

#include "common/deadline.h"
#include "common/socket.h"
#include "process_stats.h"
#include "store_fixture.h"

namespace meshcomm {
namespace {

using test::cpuTicks;

// Servers here decide for themselves whether to authenticate (see
// TCPStoreTest).
class StoreWireTest : public TCPStoreTest {};

// A bare protocol connection: sends bytes and reads whole response frames.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) {
    std::string why;
    fd_ = tryConnectTcp("127.0.0.1", port, Deadline::after(5s), &why);
    EXPECT_TRUE(fd_.valid()) << why;
  }
  void send(const Bytes& bytes) {
    IoResult r = sendAll(fd_.get(), bytes.data(), bytes.size(), Deadline::after(5s));
    ASSERT_TRUE(r.ok()) << r.describe();
  }
  void send(store::Op op, const std::vector<Bytes>& args) {
    send(store::encodeFrame(static_cast<uint8_t>(op), args));
  }
  // The next response, or nullopt on EOF, error or timeout.
  std::optional<store::Frame> read(std::chrono::milliseconds timeout = 5s) {
    Deadline deadline = Deadline::after(timeout);
    for (;;) {
      if (offset_ < buf_.size()) {
        store::FrameDecoder::Result r;
        offset_ += decoder_.feed(buf_.data() + offset_, buf_.size() - offset_, &r);
        if (r == store::FrameDecoder::Result::kFrame) return decoder_.take();
        if (r == store::FrameDecoder::Result::kError) {
          ADD_FAILURE() << "malformed response: " << decoder_.error();
          return std::nullopt;
        }
        continue;
      }
      buf_.resize(4096);
      offset_ = 0;
      ssize_t n = ::recv(fd_.get(), buf_.data(), buf_.size(), 0);
      if (n > 0) {
        buf_.resize(static_cast<size_t>(n));
        continue;
      }
      buf_.clear();
      if (n == 0) return std::nullopt;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return std::nullopt;
      if (!waitReadable(fd_.get(), deadline).ok()) return std::nullopt;
    }
  }
  // Whether the server closes the connection within the timeout.
  bool closedByPeer(std::chrono::milliseconds timeout = 5s) {
    Deadline deadline = Deadline::after(timeout);
    uint8_t byte;
    for (;;) {
      ssize_t n = ::recv(fd_.get(), &byte, 1, 0);
      if (n == 0) return true;
      if (n < 0 && errno == ECONNRESET) return true;
      if (n > 0) return false;
      if (!waitReadable(fd_.get(), deadline).ok()) return false;
    }
  }
  void hello() {
    send(store::Op::kHello, {store::encodeU64(0), b("raw")});
    auto r = read();
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->code, static_cast<uint8_t>(store::Status::kOk));
  }

 private:
  Fd fd_;
  store::FrameDecoder decoder_{store::Role::kClient, StoreLimits{}};
  Bytes buf_;
  size_t offset_ = 0;
};

uint8_t statusCode(store::Status s) { return static_cast<uint8_t>(s); }

TEST_F(StoreWireTest, RequestBeforeHelloIsRefused) {
  TCPStore server(serverOptions());
  RawConnection raw(server.port());
  raw.send(store::Op::kSet, {b("k"), b("v")});
  auto r = raw.read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, statusCode(store::Status::kBadRequest));
  ASSERT_EQ(r->args.size(), 1u);
  EXPECT_CONTAINS(str(r->args[0]), "hello");
  EXPECT_TRUE(raw.closedByPeer());
  EXPECT_FALSE(server.check({"k"}));
}

TEST_F(StoreWireTest, RequestBeforeHelloOnAnAuthServerAsksForTheToken) {
  auto opts = serverOptions();
  opts.authToken = "t";
  TCPStore server(opts);
  RawConnection raw(server.port());
  raw.send(store::Op::kNumKeys, {});
  auto r = raw.read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, statusCode(store::Status::kAuthRequired));
  EXPECT_CONTAINS(str(r->args.at(0)), "MESHCOMM_AUTH_TOKEN");
  EXPECT_TRUE(raw.closedByPeer());

  // Skipping AUTH after HELLO is refused too.
  RawConnection skip(server.port());
  skip.send(store::Op::kHello, {store::encodeU64(0), b("raw")});
  auto hello = skip.read();
  ASSERT_TRUE(hello.has_value());
  ASSERT_EQ(hello->args.size(), 2u);
  EXPECT_EQ(hello->args[0], Bytes{1});    // authentication required
  EXPECT_EQ(hello->args[1].size(), 32u);  // the nonce
  skip.send(store::Op::kSet, {b("k"), b("v")});
  auto refused = skip.read();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code, statusCode(store::Status::kAuthFailed));
  EXPECT_TRUE(skip.closedByPeer());
  EXPECT_FALSE(server.check({"k"}));
}

TEST_F(StoreWireTest, SecondHelloIsABadRequest) {
  TCPStore server(serverOptions());
  RawConnection raw(server.port());
  raw.hello();
  raw.send(store::Op::kHello, {store::encodeU64(0), b("again")});
  auto r = raw.read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, statusCode(store::Status::kBadRequest));
  EXPECT_TRUE(raw.closedByPeer());
}

TEST_F(StoreWireTest, PipelinedRequestsAreAnsweredInOrder) {
  TCPStore server(serverOptions());
  RawConnection raw(server.port());
  Bytes batch;
  auto add = [&](store::Op op, const std::vector<Bytes>& args) {
    Bytes f = store::encodeFrame(static_cast<uint8_t>(op), args);
    batch.insert(batch.end(), f.begin(), f.end());
  };
  add(store::Op::kHello, {store::encodeU64(0), b("raw")});
  add(store::Op::kSet, {b("a"), b("1")});
  add(store::Op::kGet, {store::encodeU64(1000), b("a")});
  add(store::Op::kAdd, {b("c"), store::encodeI64(7)});
  add(store::Op::kNumKeys, {});
  raw.send(batch);  // one write: the server sees them all at once
  auto hello = raw.read();
  auto set = raw.read();
  auto get = raw.read();
  auto addr = raw.read();
  auto num = raw.read();
  ASSERT_TRUE(hello && set && get && addr && num);
  EXPECT_EQ(set->code, statusCode(store::Status::kOk));
  ASSERT_EQ(get->args.size(), 1u);
  EXPECT_EQ(str(get->args[0]), "1");
  int64_t v = 0;
  ASSERT_TRUE(store::decodeI64(addr->args.at(0), &v));
  EXPECT_EQ(v, 7);
  ASSERT_TRUE(store::decodeI64(num->args.at(0), &v));
  EXPECT_EQ(v, 2);
}

TEST_F(StoreWireTest, RequestsBehindAParkedGetRunAfterItCompletes) {
  TCPStore server(serverOptions());
  RawConnection raw(server.port());
  raw.hello();
  Bytes batch = store::encodeFrame(static_cast<uint8_t>(store::Op::kGet),
                                   {store::encodeU64(10000), b("x")});
  Bytes ping = store::encodeFrame(static_cast<uint8_t>(store::Op::kAdd),
                                  {b("after"), store::encodeI64(1)});
  batch.insert(batch.end(), ping.begin(), ping.end());
  raw.send(batch);
  std::this_thread::sleep_for(100ms);
  // The add queued behind the parked get has not run yet.
  EXPECT_FALSE(server.check({"after"}));
  server.set("x", "value");
  auto get = raw.read();
  auto added = raw.read();
  ASSERT_TRUE(get && added);
  EXPECT_EQ(str(get->args.at(0)), "value");
  EXPECT_EQ(added->code, statusCode(store::Status::kOk));
  EXPECT_EQ(server.getString("after"), "1");
}

TEST_F(StoreWireTest, RequestsBehindATimedOutWaitStillRun) {
  TCPStore server(serverOptions());
  server.set("a", "1");
  RawConnection raw(server.port());
  raw.hello();
  Bytes batch = store::encodeFrame(static_cast<uint8_t>(store::Op::kWait),
                                   {store::encodeU64(100), b("a"), b("missing")});
  Bytes ping = store::encodeFrame(static_cast<uint8_t>(store::Op::kPing), {});
  batch.insert(batch.end(), ping.begin(), ping.end());
  raw.send(batch);
  auto wait = raw.read();
  auto pong = raw.read();
  ASSERT_TRUE(wait && pong);
  EXPECT_EQ(wait->code, statusCode(store::Status::kTimeout));
  // The timeout response lists the message, then each missing key.
  ASSERT_EQ(wait->args.size(), 2u);
  EXPECT_CONTAINS(str(wait->args[0]), "'missing'");
  EXPECT_EQ(str(wait->args[1]), "missing");
  EXPECT_EQ(pong->code, statusCode(store::Status::kOk));
}

TEST_F(StoreWireTest, MalformedFrameGetsBadRequestThenClose) {
  TCPStore server(serverOptions());
  RawConnection raw(server.port());
  raw.hello();
  Bytes junk = b("this is not a store frame at all");
  raw.send(junk);
  auto r = raw.read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, statusCode(store::Status::kBadRequest));
  EXPECT_CONTAINS(str(r->args.at(0)), "malformed request");
  EXPECT_TRUE(raw.closedByPeer());
  EXPECT_EQ(server.numKeys(), 0);
}

TEST_F(StoreWireTest, ClientThatStopsReadingDoesNotStallTheServer) {
  TCPStore server(serverOptions());
  server.set("big", Bytes(4 << 20, 'b'));
  RawConnection hog(server.port());
  hog.hello();
  Bytes batch;
  Bytes get = store::encodeFrame(static_cast<uint8_t>(store::Op::kGet),
                                 {store::encodeU64(1000), b("big")});
  for (int i = 0; i < 64; ++i) batch.insert(batch.end(), get.begin(), get.end());
  hog.send(batch);  // 256 MiB of responses requested, none read
  TCPStore other(clientOptions(server.port(), 5s));
  auto t0 = Clock::now();
  for (int i = 0; i < 50; ++i) EXPECT_EQ(other.add("n", 1), i + 1);
  EXPECT_LT(since(t0), 3s);
}

// A server that runs out of descriptors must turn the clients it cannot
// take away at once, not leave them in the listen backlog until their own
// deadline while its loop spins on a listener that stays readable.
TEST_F(StoreWireTest, ServerOutOfDescriptorsRefusesClientsFastWithoutSpinning) {
  PipeChannel portChannel;
  ChildGroup serverProc(1, [&portChannel](int) {
    // Room for what is open now, the server's own five descriptors (listen,
    // epoll, eventfd, and both ends of its own client), and four clients.
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = static_cast<rlim_t>(test::openFdCount() + 5 + 4);
    CHILD_CHECK(::setrlimit(RLIMIT_NOFILE, &lim) == 0, "setrlimit failed");
    TCPStore server(serverOptions(30s));
    portChannel.post(server.port(), 1);
    server.get("stop");
    return test::kExitOk;
  });
  auto port = portChannel.receive(10s);
  ASSERT_TRUE(port.has_value());
  const auto p = static_cast<uint16_t>(*port);

  std::vector<std::unique_ptr<TCPStore>> clients;
  std::string failure;
  bool storeError = false;
  std::chrono::milliseconds failedAfter{0};
  for (int i = 0; i < 16 && failure.empty(); ++i) {
    auto t0 = Clock::now();
    try {
      clients.push_back(std::make_unique<TCPStore>(clientOptions(p, 2s)));
    } catch (const StoreError& e) {
      failure = e.what();
      storeError = true;
      failedAfter = since(t0);
    } catch (const Error& e) {
      failure = e.what();
      failedAfter = since(t0);
    }
  }
  ASSERT_FALSE(failure.empty()) << "16 clients fit a server limited to about 4";
  EXPECT_GE(clients.size(), 2u);
  EXPECT_TRUE(storeError) << "expected StoreError, got: " << failure;
  EXPECT_LT(failedAfter, 1s) << failure;

  // A connection the server cannot take is closed, not left pending...
  RawConnection pending(p);
  EXPECT_TRUE(pending.closedByPeer(2s));
  // ...and the idle server does not burn CPU.
  int64_t before = cpuTicks(serverProc.pid(0));
  std::this_thread::sleep_for(500ms);
  int64_t used = cpuTicks(serverProc.pid(0)) - before;
  EXPECT_LT(used, 10) << "the server used " << used << " ticks of CPU in 500 ms idle";

  // It takes clients again once descriptors are free.
  clients.pop_back();
  std::unique_ptr<TCPStore> again;
  for (auto t0 = Clock::now(); !again && since(t0) < 5s;) {
    try {
      again = std::make_unique<TCPStore>(clientOptions(p, 2s));
    } catch (const StoreError&) {
      std::this_thread::sleep_for(20ms);
    }
  }
  ASSERT_TRUE(again);
  again->set("k", "v");
  EXPECT_EQ(clients.front()->getString("k"), "v");
  again->set("stop", "1");
  expectChildrenOk(serverProc, 10s);
}

TEST_F(StoreWireTest, ClientClosingWhileParkedIsForgotten) {
  TCPStore server(serverOptions());
  {
    RawConnection raw(server.port());
    raw.hello();
    raw.send(store::Op::kGet, {store::encodeU64(store::kNoTimeout), b("k")});
    std::this_thread::sleep_for(50ms);
  }  // closed while parked
  std::this_thread::sleep_for(50ms);
  server.set("k", "v");  // wakes nobody; must not touch the closed connection
  EXPECT_EQ(server.getString("k"), "v");
  EXPECT_EQ(server.numKeys(), 1);
}

}  // namespace
}  // namespace meshcomm

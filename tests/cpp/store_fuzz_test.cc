// A live TCPStore server seen through raw sockets: targeted cases of
// unusual or hostile clients (handshake rules, pipelined requests, requests
// queued behind waits, stalled readers, descriptor exhaustion), then
// bounded, reproducible fuzzing.
//
// For fuzzing the server runs in a forked child, so a crash shows up as the
// child's death instead of taking the test binary with it. Thousands of
// cases — random bytes, valid requests, mutated and truncated frames,
// pipelined batches — are each sent on a fresh connection in random chunk
// sizes and finished in one of three ways (half-close and read every
// response, plain close, or reset). Afterwards the server must still be
// alive, hold no leaked connections, answer a normal client correctly, and
// exit cleanly when asked.
//
// The fuzz inputs come from a fixed seed (override with MESHCOMM_FUZZ_SEED)
// so a failure can be replayed. The server logs a warning per dropped
// client; it rate-limits them, so the noise is bounded.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "common/socket.h"
#include "meshcomm/error.h"
#include "meshcomm/store.h"
#include "multiprocess.h"
#include "scoped_env.h"
#include "store/protocol.h"

namespace meshcomm {
namespace {

using namespace std::chrono_literals;
using store::Op;
using store::Status;
using Clock = std::chrono::steady_clock;
using test::ChildGroup;
using test::PipeChannel;

#define EXPECT_CONTAINS(haystack, needle)                                   \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)          \
      << "'" << (haystack) << "' does not contain '" << (needle) << "'"

Bytes b(const std::string& s) { return Bytes(s.begin(), s.end()); }
std::string str(const Bytes& v) { return std::string(v.begin(), v.end()); }

std::chrono::milliseconds since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
}

TCPStoreOptions serverOptions(std::chrono::milliseconds timeout = 10s) {
  TCPStoreOptions o;
  o.isServer = true;
  o.timeout = timeout;
  return o;
}

TCPStoreOptions clientOptions(uint16_t port, std::chrono::milliseconds timeout = 10s) {
  TCPStoreOptions o;
  o.port = port;
  o.timeout = timeout;
  return o;
}

// Servers here decide for themselves whether to authenticate; a token in
// the environment the suite runs in must not change that.
class StoreWireTest : public ::testing::Test {
 protected:
  ScopedEnv noToken_{"MESHCOMM_AUTH_TOKEN", std::nullopt};
};

constexpr uint64_t kDefaultSeed = 0x5EED0F5704E;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif
#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

// A campaign takes about a second in a release build; sanitizers slow every
// connection down severalfold, so their builds get a proportionally longer
// (still bounded) allowance.
constexpr auto kCampaignBound =
    (kAddressSanitizer || kThreadSanitizer) ? std::chrono::seconds(90) : std::chrono::seconds(30);

uint64_t fuzzSeed() {
  if (const char* s = std::getenv("MESHCOMM_FUZZ_SEED")) return std::strtoull(s, nullptr, 0);
  return kDefaultSeed;
}

// Number of open descriptors of a process (its connections among them).
int openFds(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

// Resident memory of a process in KiB.
int64_t residentKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

// Descriptors this process has open.
int openFdsOfSelf() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - 1;  // the directory stream's own descriptor
}

// CPU time (user + system, in clock ticks) a process has used.
int64_t cpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');  // the command name may contain spaces
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string f;
  int64_t utime = 0, stime = 0;
  // Fields after the name start at 3 (state); utime and stime are 14, 15.
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoll(f);
    if (i == 15) stime = std::stoll(f);
  }
  return utime + stime;
}

// ---------------------------------------------------------------------------
// Targeted cases.

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
    lim.rlim_cur = static_cast<rlim_t>(openFdsOfSelf() + 5 + 4);
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
  auto st = serverProc.waitAll(10s);
  EXPECT_TRUE(test::allOk(st)) << test::describeAll(st);
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

// ---------------------------------------------------------------------------
// Fuzzing.

// Generates requests and damage for one server configuration.
class CaseGenerator {
 public:
  CaseGenerator(uint64_t seed, const StoreLimits& limits) : rng_(seed), limits_(limits) {}

  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool chance(int percent) { return below(100) < static_cast<uint64_t>(percent); }

  Bytes randomBytes(size_t n) {
    Bytes out(n);
    for (auto& c : out) c = static_cast<uint8_t>(rng_());
    return out;
  }

  // Mostly a handful of short keys (so requests interact), sometimes keys
  // at and just over the limit.
  Bytes key() {
    switch (below(10)) {
      case 0: return Bytes(limits_.maxKeyBytes, 'K');
      case 1: return Bytes(limits_.maxKeyBytes + 1, 'K');
      case 2: return Bytes{};
      default: return b("fz/" + std::to_string(below(8)));
    }
  }

  Bytes value() {
    switch (below(12)) {
      case 0: return Bytes{};
      case 1: return Bytes(std::min<size_t>(limits_.maxValueBytes, 1 << 16), 'V');
      case 2: return b(std::to_string(static_cast<int64_t>(rng_())));  // a counter
      default: return randomBytes(below(64));
    }
  }

  // Arguments of a well-formed request for op. *waits is set when the
  // server may park it (then it may be dropped unanswered on close).
  std::vector<Bytes> argsFor(Op op, bool* waits) {
    *waits = false;
    auto shortTimeout = [&] { return store::encodeU64(below(30)); };
    switch (op) {
      case Op::kHello: return {store::encodeU64(below(2)), randomBytes(below(40))};
      case Op::kAuth: return {randomBytes(32)};
      case Op::kSet:
      case Op::kAppend: return {key(), value()};
      case Op::kGet: *waits = true; return {shortTimeout(), key()};
      case Op::kAdd: return {key(), store::encodeI64(static_cast<int64_t>(rng_()) >> below(64))};
      case Op::kDelete: return {key()};
      case Op::kCompareSet: return {key(), value(), value()};
      case Op::kCheck:
      case Op::kWait:
      case Op::kMultiGet: {
        std::vector<Bytes> args;
        if (op != Op::kCheck) {
          *waits = true;
          args.push_back(shortTimeout());
        }
        size_t n = 1 + below(std::min<size_t>(limits_.maxKeysPerRequest + 1, 6));
        for (size_t i = 0; i < n; ++i) args.push_back(key());
        return args;
      }
      case Op::kNumKeys:
      case Op::kPing: return {};
      case Op::kMultiSet: {
        std::vector<Bytes> args;
        size_t n = 1 + below(4);
        for (size_t i = 0; i < n; ++i) {
          args.push_back(key());
          args.push_back(value());
        }
        return args;
      }
      case Op::kAppendOnClose: return {key(), randomBytes(below(16))};
    }
    return {};
  }

  Op randomOp() {
    // Every opcode isKnownOp accepts, so new opcodes are fuzzed as well.
    std::vector<uint8_t> known;
    for (int c = 0; c < 256; ++c) {
      if (store::isKnownOp(static_cast<uint8_t>(c))) known.push_back(static_cast<uint8_t>(c));
    }
    return static_cast<Op>(known[below(known.size())]);
  }

  // Appends one valid request; returns its start offset.
  size_t appendRequest(Bytes* wire, Op op, bool* waits) {
    size_t start = wire->size();
    auto args = argsFor(op, waits);
    std::vector<std::span<const uint8_t>> spans;
    for (const auto& a : args) spans.emplace_back(a.data(), a.size());
    store::encodeFrame(static_cast<uint8_t>(op), spans, wire);
    return start;
  }

  void appendHello(Bytes* wire) {
    Bytes f = store::encodeFrame(static_cast<uint8_t>(Op::kHello),
                                 {store::encodeU64(0), b("fuzz")});
    wire->insert(wire->end(), f.begin(), f.end());
  }

  uint32_t interestingU32() {
    const uint32_t v[] = {0,
                          1,
                          4,
                          7,
                          8,
                          9,
                          static_cast<uint32_t>(limits_.maxKeyBytes),
                          static_cast<uint32_t>(limits_.maxKeyBytes + 1),
                          static_cast<uint32_t>(limits_.maxValueBytes),
                          static_cast<uint32_t>(limits_.maxValueBytes + 1),
                          static_cast<uint32_t>(limits_.maxKeysPerRequest + 1),
                          0x7FFFFFFF,
                          0xFFFFFFFF};
    return chance(80) ? v[below(std::size(v))] : static_cast<uint32_t>(rng_());
  }

  // Damages wire in 1-4 places; frameStarts lets some mutations aim at
  // header fields, where the decoder's decisions are made.
  void mutate(Bytes* wire, const std::vector<size_t>& frameStarts) {
    int n = 1 + static_cast<int>(below(4));
    for (int i = 0; i < n && !wire->empty(); ++i) {
      size_t pos = below(wire->size());
      switch (below(9)) {
        case 0: (*wire)[pos] ^= static_cast<uint8_t>(1u << below(8)); break;
        case 1: (*wire)[pos] = static_cast<uint8_t>(rng_()); break;
        case 2: {  // a length-like value anywhere
          uint32_t v = interestingU32();
          for (size_t k = 0; k < 4 && pos + k < wire->size(); ++k) {
            (*wire)[pos + k] = static_cast<uint8_t>(v >> (8 * k));
          }
          break;
        }
        case 3:
        case 4: {  // a header field of one frame
          if (frameStarts.empty()) break;
          size_t f = frameStarts[below(frameStarts.size())];
          if (f + store::kHeaderBytes > wire->size()) break;
          switch (below(5)) {
            case 0: (*wire)[f + 3] = static_cast<uint8_t>(rng_()); break;  // opcode
            case 1: (*wire)[f + 2] = static_cast<uint8_t>(below(3)); break;  // version
            case 2: {  // argc
              uint32_t v = interestingU32();
              for (int k = 0; k < 4; ++k) (*wire)[f + 4 + k] = static_cast<uint8_t>(v >> (8 * k));
              break;
            }
            default: {  // payload length: off by a little or by a lot
              uint64_t old = 0;
              for (int k = 7; k >= 0; --k) old = (old << 8) | (*wire)[f + 8 + k];
              uint64_t v = chance(50) ? old + below(9) - 4 : (uint64_t{1} << below(64));
              for (int k = 0; k < 8; ++k) (*wire)[f + 8 + k] = static_cast<uint8_t>(v >> (8 * k));
              break;
            }
          }
          break;
        }
        case 5: {
          Bytes junk = randomBytes(1 + below(16));
          wire->insert(wire->begin() + static_cast<ptrdiff_t>(pos), junk.begin(), junk.end());
          break;
        }
        case 6: {
          size_t len = std::min<size_t>(1 + below(16), wire->size() - pos);
          wire->erase(wire->begin() + static_cast<ptrdiff_t>(pos),
                      wire->begin() + static_cast<ptrdiff_t>(pos + len));
          break;
        }
        case 7: {
          size_t len = std::min<size_t>(1 + below(32), wire->size() - pos);
          Bytes copy(wire->begin() + static_cast<ptrdiff_t>(pos),
                     wire->begin() + static_cast<ptrdiff_t>(pos + len));
          wire->insert(wire->end(), copy.begin(), copy.end());
          break;
        }
        default: wire->resize(pos); break;  // truncate
      }
    }
  }

 private:
  std::mt19937_64 rng_;
  StoreLimits limits_;
};

struct FuzzStats {
  int cases = 0;
  int responsesRead = 0;
  int malformedResponses = 0;  // the server sent something undecodable
  int notClosed = 0;           // the server kept a half-closed connection open
  int countMismatches = 0;     // valid non-waiting batch not answered 1:1
  int badStatuses = 0;         // valid request answered with a refusal
  int connectFailures = 0;
  int checkedBatches = 0;      // valid batches whose answers were counted
  std::string firstProblem;
};

enum class Finish { kReadAll, kClose, kReset };

// Sends wire on a fresh connection in random chunks and finishes as told.
// When expectedResponses is set, the batch was valid and must be answered
// one response per request, each kOk or kError.
void runCase(uint16_t port, CaseGenerator& gen, const Bytes& wire, Finish finish,
             std::optional<int> expectedResponses, FuzzStats* stats) {
  ++stats->cases;
  // Chunk sizes are drawn before sending, so how far a send gets (the
  // server may hang up early) never shifts the random stream of later cases.
  std::vector<size_t> chunks;
  for (size_t planned = 0; planned < wire.size();) {
    size_t chunk = std::min<size_t>(wire.size() - planned, 1 + gen.below(gen.chance(30) ? 8 : 512));
    chunks.push_back(chunk);
    planned += chunk;
  }
  std::string why;
  Fd fd = tryConnectTcp("127.0.0.1", port, Deadline::after(5s), &why);
  if (!fd) {
    ++stats->connectFailures;
    if (stats->firstProblem.empty()) stats->firstProblem = "connect: " + why;
    return;
  }
  size_t off = 0;
  for (size_t chunk : chunks) {
    IoResult r = sendAll(fd.get(), wire.data() + off, chunk, Deadline::after(5s));
    if (!r.ok()) break;  // the server already hung up on a bad frame
    off += chunk;
  }
  if (finish == Finish::kReset) {
    linger l{1, 0};  // close with RST
    ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    return;
  }
  if (finish == Finish::kClose) return;

  ::shutdown(fd.get(), SHUT_WR);
  store::FrameDecoder decoder(store::Role::kClient, StoreLimits{});
  Deadline deadline = Deadline::after(5s);
  Bytes buf(16 * 1024);
  int responses = 0;
  bool closed = false, malformed = false;
  std::vector<uint8_t> statuses;
  while (!closed && !malformed) {
    ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) {
      closed = true;
      break;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) break;
      if (!waitReadable(fd.get(), deadline).ok()) break;
      continue;
    }
    size_t used = 0;
    while (used < static_cast<size_t>(n)) {
      store::FrameDecoder::Result r;
      used += decoder.feed(buf.data() + used, static_cast<size_t>(n) - used, &r);
      if (r == store::FrameDecoder::Result::kFrame) {
        statuses.push_back(decoder.take().code);
        ++responses;
      } else if (r == store::FrameDecoder::Result::kError) {
        malformed = true;
        break;
      }
    }
  }
  stats->responsesRead += responses;
  auto problem = [&](int* counter, const std::string& what) {
    ++*counter;
    if (stats->firstProblem.empty()) stats->firstProblem = "case " + std::to_string(stats->cases) + ": " + what;
  };
  if (malformed) problem(&stats->malformedResponses, "malformed response: " + decoder.error());
  if (!closed && !malformed) problem(&stats->notClosed, "server did not close after client EOF");
  if (expectedResponses && responses != *expectedResponses) {
    problem(&stats->countMismatches, std::to_string(responses) + " responses to " +
                                         std::to_string(*expectedResponses) + " valid requests");
  }
  if (expectedResponses) {
    ++stats->checkedBatches;
    for (uint8_t s : statuses) {
      if (s != static_cast<uint8_t>(Status::kOk) && s != static_cast<uint8_t>(Status::kError)) {
        problem(&stats->badStatuses, "valid request refused with status " + std::to_string(s));
      }
    }
  }
}

// One fuzz campaign of `cases` cases against the server at port.
FuzzStats fuzzServer(uint16_t port, uint64_t seed, int cases, const StoreLimits& limits,
                     bool serverUsesAuth) {
  CaseGenerator gen(seed, limits);
  FuzzStats stats;
  for (int i = 0; i < cases; ++i) {
    Finish finish = gen.chance(50) ? Finish::kReadAll
                                   : (gen.chance(50) ? Finish::kClose : Finish::kReset);
    Bytes wire;
    std::vector<size_t> starts;
    std::optional<int> expected;
    bool waits = false;
    switch (gen.below(5)) {
      case 0: {  // random bytes, half of them behind a plausible header start
        if (gen.chance(50)) {
          if (gen.chance(50)) gen.appendHello(&wire);
          wire.insert(wire.end(), {0x4D, 0x53, store::kVersion});
        }
        Bytes junk = gen.randomBytes(gen.below(300));
        wire.insert(wire.end(), junk.begin(), junk.end());
        break;
      }
      case 1: {  // a valid batch: hello, then 1-6 requests, pipelined
        gen.appendHello(&wire);
        int n = 1 + static_cast<int>(gen.below(6));
        bool anyWaits = false, anyHandshake = false, anyOversized = false;
        for (int k = 0; k < n; ++k) {
          Op op = gen.randomOp();
          size_t start = gen.appendRequest(&wire, op, &waits);
          anyWaits = anyWaits || waits;
          anyHandshake = anyHandshake || op == Op::kHello || op == Op::kAuth;
          store::Frame f;
          std::string err;
          // The generator sometimes makes over-limit keys on purpose.
          if (store::decodeOne(store::Role::kServer, limits, wire.data() + start,
                               wire.size() - start, &f, &err) !=
              store::FrameDecoder::Result::kFrame) {
            anyOversized = true;
          }
        }
        if (!serverUsesAuth && !anyWaits && !anyHandshake && !anyOversized) expected = n + 1;
        break;
      }
      case 2:
      case 3: {  // valid frames, then damaged; mostly behind a valid hello
        // so the damage reaches request handling, not just the handshake
        if (gen.chance(80)) {
          gen.appendHello(&wire);
          starts.push_back(0);
        }
        int n = 1 + static_cast<int>(gen.below(3));
        for (int k = 0; k < n; ++k) {
          starts.push_back(gen.appendRequest(&wire, gen.randomOp(), &waits));
        }
        gen.mutate(&wire, starts);
        break;
      }
      default: {  // a valid request cut short
        gen.appendHello(&wire);
        gen.appendRequest(&wire, gen.randomOp(), &waits);
        wire.resize(gen.below(wire.size()));
        break;
      }
    }
    runCase(port, gen, wire, finish, expected, &stats);
  }
  return stats;
}

// Hosts a TCPStore server in a child process until told to stop.
class ServerProcess {
 public:
  ServerProcess(const StoreLimits& limits, const std::string& token)
      : child_(1, [this, limits, token](int) {
          TCPStoreOptions o;
          o.isServer = true;
          o.timeout = 120s;
          o.limits = limits;
          o.authToken = token;
          TCPStore server(o);
          port_.post(server.port(), 1);
          server.get("fuzz/shutdown");  // serves until the parent sets it
          return test::kExitOk;
        }) {
    auto p = port_.receive(10s);
    if (p) portNumber_ = static_cast<uint16_t>(*p);
  }

  uint16_t port() const { return portNumber_; }
  pid_t pid() const { return child_.pid(0); }
  bool alive() { return child_.alive(0); }
  test::ChildStatus wait(std::chrono::milliseconds t) { return child_.waitOne(0, t); }

 private:
  test::PipeChannel port_;  // constructed before child_ forks
  test::ChildGroup child_;
  uint16_t portNumber_ = 0;
};

TCPStoreOptions clientOf(uint16_t port, const std::string& token) {
  TCPStoreOptions o = clientOptions(port);
  o.authToken = token;
  return o;
}

void fuzzAndVerify(const StoreLimits& limits, const std::string& token, int cases,
                   uint64_t seed) {
  ServerProcess server(limits, token);
  ASSERT_NE(server.port(), 0) << "the server child did not report its port";
  // Let the server settle, then record its descriptors and memory.
  std::this_thread::sleep_for(50ms);
  const int fdsBefore = openFds(server.pid());
  const int64_t rssBefore = residentKiB(server.pid());
  ASSERT_GT(fdsBefore, 0);

  auto t0 = Clock::now();
  FuzzStats stats = fuzzServer(server.port(), seed, cases, limits, !token.empty());
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  std::printf("[fuzz] seed %#llx: %d cases, %d responses read, %d batches checked, %lld ms\n",
              static_cast<unsigned long long>(seed), stats.cases, stats.responsesRead,
              stats.checkedBatches, static_cast<long long>(elapsed.count()));

  ASSERT_TRUE(server.alive()) << "the server process died during fuzzing: "
                              << server.wait(0ms).describe();
  EXPECT_EQ(stats.cases, cases);
  EXPECT_EQ(stats.connectFailures, 0) << stats.firstProblem;
  EXPECT_EQ(stats.malformedResponses, 0) << stats.firstProblem;
  EXPECT_EQ(stats.notClosed, 0) << stats.firstProblem;
  EXPECT_EQ(stats.countMismatches, 0) << stats.firstProblem;
  EXPECT_EQ(stats.badStatuses, 0) << stats.firstProblem;
  EXPECT_GT(stats.responsesRead, cases / 4);  // the cases reached the server
  // Without authentication, valid pipelined batches are checked 1:1; make
  // sure that check ran often enough to mean something.
  if (token.empty()) {
    EXPECT_GT(stats.checkedBatches, cases / 50);
  }

  // Every fuzz connection is gone: the server closes what its clients close.
  int fdsAfter = -1;
  for (auto t1 = Clock::now(); Clock::now() - t1 < 5s;) {
    fdsAfter = openFds(server.pid());
    if (fdsAfter == fdsBefore) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(fdsAfter, fdsBefore) << "the server leaked connections";
  // A decoder that trusted declared lengths would allocate up to a GiB per
  // case. (AddressSanitizer keeps freed memory in quarantine, up to 256 MiB
  // by default, so its builds get more room.)
  const int64_t rssAfter = residentKiB(server.pid());
  const int64_t allowedKiB = (kAddressSanitizer ? 768 : 64) * 1024;
  std::printf("[fuzz] server resident memory %lld KiB before, %lld KiB after\n",
              static_cast<long long>(rssBefore), static_cast<long long>(rssAfter));
  EXPECT_LT(rssAfter - rssBefore, allowedKiB) << "server memory grew from " << rssBefore
                                              << " KiB to " << rssAfter << " KiB";

  // A well-formed client still gets correct answers.
  {
    TCPStore client(clientOf(server.port(), token));
    client.set("verify/k", "value");
    EXPECT_EQ(client.getString("verify/k"), "value");
    EXPECT_EQ(client.add("verify/n", 5), 5);
    EXPECT_EQ(client.add("verify/n", -2), 3);
    EXPECT_EQ(client.getString("verify/n"), "3");
    EXPECT_TRUE(client.check({"verify/k", "verify/n"}));
    EXPECT_GE(client.numKeys(), 2);
    auto both = client.multiGet({"verify/k", "verify/n"});
    ASSERT_EQ(both.size(), 2u);
    EXPECT_EQ(std::string(both[1].begin(), both[1].end()), "3");
    client.set("fuzz/shutdown", "1");
  }
  // It shuts down cleanly: exit code 0, not a signal.
  auto st = server.wait(10s);
  EXPECT_TRUE(st.ok()) << st.describe();
}

class StoreFuzzTest : public StoreWireTest {};

StoreLimits fuzzLimits() {
  StoreLimits l;
  l.maxKeyBytes = 64;
  l.maxValueBytes = 4096;
  l.maxKeysPerRequest = 8;
  l.maxClients = 1024;
  return l;
}

TEST_F(StoreFuzzTest, RandomAndMutatedFramesAgainstALiveServer) {
  auto t0 = Clock::now();
  fuzzAndVerify(fuzzLimits(), "", 5000, fuzzSeed());
  EXPECT_LT(Clock::now() - t0, kCampaignBound);
}

TEST_F(StoreFuzzTest, RandomAndMutatedFramesAgainstAnAuthenticatingServer) {
  // Default limits this time: declared lengths up to 1 GiB are legal, so
  // truncated frames leave the decoder waiting on large arguments.
  auto t0 = Clock::now();
  fuzzAndVerify(StoreLimits{}, "fuzz-token", 2000, fuzzSeed() + 1);
  EXPECT_LT(Clock::now() - t0, kCampaignBound);
}

}  // namespace
}  // namespace meshcomm

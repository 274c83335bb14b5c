// Bounded, reproducible fuzzing of a live TCPStore server through raw
// sockets.
//
// The server runs in a forked child, so a crash shows up as the child's
// death instead of taking the test binary with it. Thousands of cases —
// random bytes, valid requests, mutated and truncated frames, pipelined
// batches (store_fuzz_cases.h) — are each sent on a fresh connection in
// random chunk sizes and finished in one of three ways (half-close and
// read every response, plain close, or reset). Afterwards the server must
// still be alive, hold no leaked connections, answer a normal client
// correctly, and exit cleanly when asked.
//
// The fuzz inputs come from a fixed seed (override with MESHCOMM_FUZZ_SEED)
// so a failure can be replayed. The server logs a warning per dropped
// client; it rate-limits them, so the noise is bounded.
#include <sys/socket.h>

#include <cstdio>

#include "common/deadline.h"
#include "common/socket.h"
#include "process_stats.h"
#include "sanitizers.h"
#include "store_fixture.h"
#include "store_fuzz_cases.h"

namespace meshcomm {
namespace {

using store::Op;
using store::Status;
using test::CaseGenerator;
using test::kAddressSanitizer;
using test::kThreadSanitizer;
using test::residentKiB;

constexpr uint64_t kDefaultSeed = 0x5EED0F5704E;

// A campaign takes about a second in a release build; sanitizers slow every
// connection down severalfold, so their builds get a proportionally longer
// (still bounded) allowance.
constexpr auto kCampaignBound =
    (kAddressSanitizer || kThreadSanitizer) ? std::chrono::seconds(90) : std::chrono::seconds(30);

uint64_t fuzzSeed() {
  if (const char* s = std::getenv("MESHCOMM_FUZZ_SEED")) return std::strtoull(s, nullptr, 0);
  return kDefaultSeed;
}

// Servers here decide for themselves whether to authenticate (see
// TCPStoreTest).
class StoreFuzzTest : public TCPStoreTest {};

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
  const int fdsBefore = test::openFdCountOf(server.pid());
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
    fdsAfter = test::openFdCountOf(server.pid());
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

StoreLimits fuzzLimits() {
  return {.maxKeyBytes = 64, .maxValueBytes = 4096, .maxKeysPerRequest = 8, .maxClients = 1024};
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

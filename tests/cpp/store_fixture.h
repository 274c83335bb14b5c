// What the tests that run a TCPStore server in this process share (the
// store's own tests, and the transport tests, whose groups keep their keys
// in one): a fixture that keeps a token in the suite's environment out,
// option factories, and small conversions.
#pragma once

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
#include "scoped_env.h"
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

inline Bytes b(const std::string& s) { return Bytes(s.begin(), s.end()); }
inline std::string str(const Bytes& v) { return std::string(v.begin(), v.end()); }

// prefix + n, built with append: GCC 12 warns falsely (-Wrestrict) about
// some inlined "literal" + std::string concatenations.
inline std::string numbered(const char* prefix, int n) {
  std::string k(prefix);
  k += std::to_string(n);
  return k;
}

inline std::chrono::milliseconds since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
}

inline TCPStoreOptions serverOptions(std::chrono::milliseconds timeout = 10s) {
  TCPStoreOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.isServer = true;
  o.timeout = timeout;
  return o;
}

// A server on `port`, chosen in advance (its clients may dial it before it
// exists), that waits for `worldSize` participants, itself included.
inline TCPStoreOptions serverAwaiting(uint16_t port, int worldSize,
                                      std::chrono::milliseconds timeout = 10s) {
  TCPStoreOptions o = serverOptions(timeout);
  o.port = port;
  o.worldSize = worldSize;
  return o;
}

inline TCPStoreOptions clientOptions(uint16_t port, std::chrono::milliseconds timeout = 10s) {
  TCPStoreOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.isServer = false;
  o.timeout = timeout;
  return o;
}

// Waits up to `bound` for every child and expects each to have exited well.
inline void expectChildrenOk(ChildGroup& children, std::chrono::milliseconds bound) {
  auto st = children.waitAll(bound);
  EXPECT_TRUE(test::allOk(st)) << test::describeAll(st);
}

// A port nothing listens on right now (bound, read back, closed). Another
// process could take it before the test does, which is unlikely enough.
inline uint16_t unusedPort() {
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
inline std::string thrown(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception, but the call returned";
  return "";
}

// Tests that expect no authentication must not pick up a token from the
// environment the suite runs in.
class TCPStoreTest : public ::testing::Test {
 protected:
  ScopedEnv noToken_{"MESHCOMM_AUTH_TOKEN", std::nullopt};
};

}  // namespace
}  // namespace meshcomm

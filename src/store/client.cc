#include "store/client.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/crypto.h"
#include "common/env.h"
#include "common/socket.h"
#include "meshcomm/error.h"

namespace meshcomm {

using store::Frame;
using store::Op;
using store::Status;

namespace {

constexpr char kAuthContext[] = "meshcomm-store-auth-v1";

std::string describeSeconds(std::chrono::milliseconds ms) {
  return std::to_string(ms.count() / 1000.0).substr(0, 6) + " s";
}

// MESHCOMM_STORE_SPIN_US, default 50; 0 when this host has a single core,
// where spinning only delays the server.
std::chrono::microseconds spinFromEnvironment() {
  int64_t fallback = std::thread::hardware_concurrency() > 1 ? 50 : 0;
  return std::chrono::microseconds(std::max<int64_t>(0, envIntOr("MESHCOMM_STORE_SPIN_US", fallback)));
}

// Waits until `fd` is readable, `interruptFd` is readable (kClosed), or the
// deadline passes.
IoResult waitReadableOrInterrupted(int fd, int interruptFd, const Deadline& deadline) {
  for (;;) {
    pollfd p[2] = {{fd, POLLIN, 0}, {interruptFd, POLLIN, 0}};
    int rc = ::poll(p, 2, deadline.pollTimeoutMs());
    if (rc > 0) return (p[1].revents & POLLIN) != 0 ? IoResult{IoStatus::kClosed, 0} : IoResult{};
    if (rc == 0) return {IoStatus::kTimeout, 0};
    if (errno != EINTR) return {IoStatus::kError, errno};
  }
}

}  // namespace

TCPStoreClient::TCPStoreClient(std::string host, uint16_t port,
                               const std::string& authToken, bool local,
                               const StoreLimits& limits, const Deadline& deadline)
    : host_(std::move(host)),
      port_(port),
      limits_(limits),
      interruptFd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      spin_(spinFromEnvironment()) {
  endpoint_ = host_ + ":" + std::to_string(port_);
  if (!interruptFd_) throw StoreError("eventfd failed: " + std::string(std::strerror(errno)));
  auto started = Deadline::Clock::now();
  auto backoff = std::chrono::milliseconds(5);
  std::string why = "no attempt made";
  for (;;) {
    // Each attempt gets a bounded slice so a black-holed SYN does not eat
    // the whole budget in one go.
    Deadline attempt = deadline.earlier(Deadline::after(std::chrono::seconds(5)));
    fd_ = tryConnectTcp(host_, port_, attempt, &why);
    if (fd_) break;
    if (deadline.expired()) {
      auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
          Deadline::Clock::now() - started);
      throw Timeout("could not connect to the store at " + endpoint_ + " within " +
                    describeSeconds(waited) + " (last error: " + why +
                    "); is the server running and reachable?");
    }
    std::this_thread::sleep_for(std::min(backoff, deadline.remaining()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  handshake(authToken, local, deadline);
}

void TCPStoreClient::interrupt() {
  interrupted_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(interruptFd_.get(), &one, sizeof(one));
}

void TCPStoreClient::breakWith(const std::string& why) {
  brokenWhy_ = why;
  fd_.reset();
}

void TCPStoreClient::handshake(const std::string& authToken, bool local,
                               const Deadline& deadline) {
  Bytes flags = store::encodeU64(local ? store::kHelloFlagLocal : 0);
  std::string label = "meshcomm-client";
  auto hello = call(Op::kHello, {store::asSpan(flags), store::asSpan(label)}, deadline);
  bool authRequired = hello.size() == 2 && hello[0].size() == 1 && hello[0][0] == 1;
  if (!authRequired) return;
  if (authToken.empty()) {
    {
      MutexLock lock(mu_);
      fd_.reset();
    }
    throw StoreError("the store at " + endpoint_ +
                     " requires authentication but this process has no token; "
                     "set MESHCOMM_AUTH_TOKEN (or pass auth_token) to the job's token");
  }
  Bytes message = hello[1];
  message.insert(message.end(), kAuthContext, kAuthContext + sizeof(kAuthContext) - 1);
  Bytes mac = hmacSha256(authToken, message);
  call(Op::kAuth, {store::asSpan(mac)}, deadline);
}

std::vector<Bytes> TCPStoreClient::call(
    Op op, const std::vector<std::span<const uint8_t>>& args,
    const Deadline& deadline) {
  Frame response = roundTrip(op, args, deadline);
  auto status = static_cast<Status>(response.code);
  auto message = [&] {
    return response.args.empty() ? std::string("(no message)")
                                 : store::asString(response.args[0]);
  };
  switch (status) {
    case Status::kOk:
      return std::move(response.args);
    case Status::kTimeout:
      throw Timeout("store " + endpoint_ + ": " + std::string(store::opName(op)) +
                    " " + message());
    case Status::kError:
      throw StoreError("store " + endpoint_ + ": " + std::string(store::opName(op)) +
                       " failed: " + message());
    case Status::kAuthRequired:
    case Status::kAuthFailed:
    case Status::kBadRequest: {
      MutexLock lock(mu_);
      brokenWhy_ = message();
      fd_.reset();
      throw StoreError("store " + endpoint_ + " refused the connection: " + message());
    }
  }
  throw StoreError("store " + endpoint_ + ": unexpected response");
}

Frame TCPStoreClient::roundTrip(Op op,
                                const std::vector<std::span<const uint8_t>>& args,
                                const Deadline& deadline) {
  MutexLock lock(mu_);
  if (interrupted_.load() && brokenWhy_.empty()) breakWith("interrupted by this process");
  if (!brokenWhy_.empty()) {
    throw StoreError("connection to the store at " + endpoint_ +
                     " is unusable: " + brokenWhy_);
  }
  sendBuffer_.clear();
  store::encodeFrame(static_cast<uint8_t>(op), args, &sendBuffer_);
  IoResult r = sendAll(fd_.get(), sendBuffer_.data(), sendBuffer_.size(), deadline);
  // Keep the buffer for the next request unless an outsized value grew it.
  if (sendBuffer_.capacity() > (size_t{64} << 20)) Bytes().swap(sendBuffer_);
  if (!r.ok()) {
    std::string why = std::string(store::opName(op)) + " request: " + r.describe();
    breakWith(why);
    if (r.status == IoStatus::kTimeout) {
      throw Timeout("store " + endpoint_ + ": timed out sending " + why);
    }
    throw StoreError("lost the connection to the store at " + endpoint_ + " (" +
                     why + ")");
  }
  store::FrameDecoder decoder(store::Role::kClient, limits_);
  recvBuffer_.resize(64 * 1024);
  // Spinning pays only while responses come back within the spin window;
  // when they keep missing it (more busy processes than cores), stop for a
  // while, retrying now and then in case the load went away.
  bool spinning = spinMisses_ < 3 || (++requestsSinceMiss_ % 64) == 0;
  const auto spinUntil = Deadline::Clock::now() + (spinning ? spin_ : std::chrono::microseconds(0));
  for (;;) {
    ssize_t n = ::recv(fd_.get(), recvBuffer_.data(), recvBuffer_.size(), 0);
    if (n > 0) {
      store::FrameDecoder::Result result;
      size_t used = decoder.feed(recvBuffer_.data(), static_cast<size_t>(n), &result);
      if (result == store::FrameDecoder::Result::kFrame) {
        if (spinning) spinMisses_ = 0;
        if (used != static_cast<size_t>(n)) {
          breakWith("the server sent more than one response");
          throw StoreError("store " + endpoint_ + ": protocol error (" + brokenWhy_ + ")");
        }
        return decoder.take();
      }
      if (result == store::FrameDecoder::Result::kError) {
        breakWith("malformed response: " + decoder.error());
        throw StoreError("store " + endpoint_ + ": " + brokenWhy_);
      }
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      std::string why = n == 0 ? "the server closed the connection"
                               : std::string(std::strerror(errno));
      breakWith(why);
      // Dropped before the first answer: what listens there may not be
      // this job's store at all.
      const std::string hint =
          op == Op::kHello
              ? "; the server ended the connection before answering the handshake: check that "
                "the address and port are this job's store (MASTER_ADDR, MASTER_PORT), not "
                "another program's or another job's, and that the store's host is still up"
              : "";
      throw StoreError("lost the connection to the store at " + endpoint_ + " during " +
                       store::opName(op) + ": " + why + hint);
    }
    if (errno == EINTR) continue;
    // A store round trip on one host takes a few tens of microseconds;
    // polling that long first saves the sleep/wake-up, which costs as much.
    if (Deadline::Clock::now() < spinUntil) continue;
    if (spinning && spin_.count() > 0) spinMisses_ = std::min(spinMisses_ + 1, 1000);
    spinning = false;
    IoResult w = waitReadableOrInterrupted(fd_.get(), interruptFd_.get(), deadline);
    if (w.status == IoStatus::kClosed) {
      breakWith("interrupted by this process");
      throw StoreError("store " + endpoint_ + ": " + store::opName(op) + " " + brokenWhy_);
    }
    if (w.status == IoStatus::kTimeout) {
      breakWith(std::string("no response to ") + store::opName(op) + " in time");
      throw Timeout("store " + endpoint_ + ": no response to " + store::opName(op) +
                    " before the deadline");
    }
    if (!w.ok()) {
      breakWith(w.describe());
      throw StoreError("lost the connection to the store at " + endpoint_ + ": " +
                       w.describe());
    }
  }
}

}  // namespace meshcomm

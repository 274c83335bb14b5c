#include "store/server.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>

#include "common/check.h"
#include "common/crypto.h"
#include "common/env.h"
#include "common/logging.h"
#include "common/socket.h"

namespace meshcomm {

using store::Frame;
using store::Op;
using store::Status;

namespace {

constexpr uint64_t kListenId = 1;
constexpr uint64_t kWakeId = 2;
constexpr size_t kReadChunk = 256 * 1024;
constexpr char kAuthContext[] = "meshcomm-store-auth-v1";

// Malformed input is logged, but a flood of it must not flood the log.
bool shouldLogDrop() {
  static std::atomic<uint64_t> drops{0};
  uint64_t n = drops.fetch_add(1);
  return n < 20 || n % 1000 == 0;
}

std::optional<int64_t> parseCounter(const Bytes& v) {
  int64_t out = 0;
  const char* b = reinterpret_cast<const char*>(v.data());
  const char* e = b + v.size();
  auto [p, ec] = std::from_chars(b, e, out);
  if (v.empty() || ec != std::errc() || p != e) return std::nullopt;
  return out;
}

Bytes counterBytes(int64_t v) {
  std::string s = std::to_string(v);
  return Bytes(s.begin(), s.end());
}

}  // namespace

struct TCPStoreServer::Connection {
  enum class Phase { kHello, kAuth, kReady };

  Connection(ConnId i, Fd f, const StoreLimits& limits)
      : id(i), fd(std::move(f)), decoder(store::Role::kServer, limits) {}

  bool outputPending() const { return outOffset < out.size(); }
  bool busy() const { return parked.has_value() || outputPending() || closing; }

  ConnId id;
  Fd fd;
  std::string peer;
  store::FrameDecoder decoder;
  Bytes in;  // bytes read but not yet decoded
  size_t inOffset = 0;
  Bytes out;
  size_t outOffset = 0;
  uint32_t interest = 0;
  Phase phase = Phase::kHello;
  Bytes nonce;
  bool worker = false;
  bool closing = false;  // close once `out` is flushed
  std::optional<Frame> parked;
  std::string onCloseKey;  // kAppendOnClose registration
  Bytes onCloseValue;
  std::vector<std::string> parkedKeys;
  std::optional<std::multimap<Deadline::Clock::time_point, ConnId>::iterator>
      deadlineIt;
};

TCPStoreServer::TCPStoreServer(const std::string& host, uint16_t port,
                               StoreLimits limits, std::string authToken)
    : limits_(limits), authToken_(std::move(authToken)), readBuffer_(kReadChunk) {
  listen_ = listenTcp(host, port, /*backlog=*/4096, &port_);
  epoll_ = Fd(epoll_create1(EPOLL_CLOEXEC));
  wake_ = Fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  spare_ = Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  MESHCOMM_CHECK(epoll_ && wake_, "epoll/eventfd: " << std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  MESHCOMM_CHECK(epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listen_.get(), &ev) == 0);
  ev.data.u64 = kWakeId;
  MESHCOMM_CHECK(epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) == 0);
  int64_t fallback = std::thread::hardware_concurrency() > 1 ? 50 : 0;
  spin_ = std::chrono::microseconds(
      std::max<int64_t>(0, envIntOr("MESHCOMM_STORE_SPIN_US", fallback)));
  thread_ = std::thread([this] { loop(); });
}

TCPStoreServer::~TCPStoreServer() {
  stop_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

int TCPStoreServer::waitForWorkers(int count, const Deadline& deadline) {
  MutexLock lock(workersMu_);
  while (workers_ < count) {
    if (!workersCv_.waitUntil(workersMu_, deadline.at())) break;
  }
  return workers_;
}

int TCPStoreServer::nextTimeoutMs() const {
  if (waiterDeadlines_.empty()) return -1;
  auto at = waiterDeadlines_.begin()->first;
  auto now = Deadline::Clock::now();
  if (at <= now) return 0;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(at - now).count();
  return static_cast<int>(std::min<int64_t>(ms + 1, INT32_MAX));
}

void TCPStoreServer::loop() {
  epoll_event events[128];
  auto spinUntil = Deadline::Clock::now();
  auto contendedUntil = spinUntil;
  uint64_t lastClient = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    // Right after serving a request, poll instead of sleeping for a moment:
    // the same client's next request usually follows within microseconds,
    // and a sleep/wake-up on this path costs more than the request itself.
    // With several clients taking turns, the cores are better left to them.
    int timeout = Deadline::Clock::now() < spinUntil ? 0 : nextTimeoutMs();
    int n = epoll_wait(epoll_.get(), events, 128, timeout);
    if (n > 0) {
      auto now = Deadline::Clock::now();
      bool sameClient = n == 1 && events[0].data.u64 == lastClient;
      if (!sameClient) contendedUntil = now + std::chrono::milliseconds(20);
      lastClient = n == 1 ? events[0].data.u64 : 0;
      spinUntil = now < contendedUntil ? now : now + spin_;
    }
    if (n < 0 && errno != EINTR) {
      MESHCOMM_LOG(kError, "store server epoll_wait failed: " << std::strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kWakeId) continue;
      if (id == kListenId) {
        acceptAll();
        continue;
      }
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;  // closed earlier in this batch
      Connection& c = *it->second;
      uint32_t ev = events[i].events;
      if (ev & EPOLLOUT) onWritable(c);
      if (!conns_.count(id)) continue;
      if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) onReadable(c, ev);
    }
    expireWaiters();
    resumeParkedInput();
  }
  conns_.clear();
}

void TCPStoreServer::acceptAll() {
  for (;;) {
    int raw = ::accept4(listen_.get(), nullptr, nullptr,
                        SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (raw < 0) {
      if (errno == EINTR) continue;
      if ((errno == EMFILE || errno == ENFILE) && refuseWithSpare()) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK && shouldLogDrop()) {
        MESHCOMM_LOG(kWarn, "store server accept failed: " << std::strerror(errno));
      }
      return;
    }
    Fd fd(raw);
    if (conns_.size() >= limits_.maxClients) {
      if (shouldLogDrop()) {
        MESHCOMM_LOG(kWarn, "store server refusing " << peerAddress(fd.get())
                                << ": already serving " << conns_.size()
                                << " clients (the limit)");
      }
      continue;
    }
    setNoDelay(fd.get());
    ConnId id = nextId_++;
    auto conn = std::make_unique<Connection>(id, std::move(fd), limits_);
    conn->peer = peerAddress(conn->fd.get());
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = id;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, conn->fd.get(), &ev) != 0) continue;
    conn->interest = ev.events;
    conns_.emplace(id, std::move(conn));
  }
}

bool TCPStoreServer::refuseWithSpare() {
  // Out of descriptors, a pending connection keeps the listener readable, so
  // level-triggered epoll would wake this loop again at once, forever, while
  // the client waits out its whole deadline for a hello response. Giving up
  // the reserve descriptor lets the connection be accepted and closed: the
  // client fails fast with a lost connection and the loop goes back to sleep.
  if (!spare_) return false;
  const int err = errno;
  spare_.reset();
  Fd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  const bool refused = fd.valid();
  if (refused && logEnabled(LogLevel::kWarn) && shouldLogDrop()) {
    // Formatted without an ostream: at the descriptor limit, UBSan's vptr
    // checks (which probe memory through a pipe) cannot run and misreport.
    logLine(LogLevel::kWarn, "store server refusing " + peerAddress(fd.get()) +
                                 ": out of file descriptors (" + std::strerror(err) +
                                 ") while serving " + std::to_string(conns_.size()) +
                                 " clients; raise the limit (ulimit -n)");
  }
  fd.reset();
  spare_ = Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  return refused;
}

void TCPStoreServer::updateInterest(Connection& c) {
  uint32_t want = EPOLLRDHUP;
  if (!c.busy()) want |= EPOLLIN;
  if (c.outputPending()) want |= EPOLLOUT;
  if (want == c.interest) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
  c.interest = want;
}

void TCPStoreServer::onReadable(Connection& c, uint32_t events) {
  const ConnId id = c.id;
  if (c.busy()) {
    // Only a hang-up wakes a busy connection (EPOLLIN is off): the peer went
    // away while parked or while its response was being written. Clients
    // never half-close, so there is nobody left to answer.
    if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) closeConnection(id);
    return;
  }
  // Fresh bytes are read into the loop's shared buffer; a connection keeps
  // only what is left undecoded behind a request that parked or whose
  // response is still being written, so idle clients cost no buffer.
  const bool fresh = c.inOffset >= c.in.size();
  const uint8_t* data = c.in.data();
  size_t size = c.in.size();
  size_t offset = c.inOffset;
  if (fresh) {
    ssize_t r = ::recv(c.fd.get(), readBuffer_.data(), readBuffer_.size(), 0);
    if (r <= 0) {
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      closeConnection(id);
      return;
    }
    data = readBuffer_.data();
    size = static_cast<size_t>(r);
    offset = 0;
  }
  // Decode and serve requests until the input runs out or the connection
  // becomes busy (parked, or a response still being written).
  while (offset < size && !c.busy()) {
    store::FrameDecoder::Result result;
    offset += c.decoder.feed(data + offset, size - offset, &result);
    if (result == store::FrameDecoder::Result::kError) {
      if (shouldLogDrop()) {
        MESHCOMM_LOG(kWarn, "store server dropping client " << c.peer
                                << ": malformed frame: " << c.decoder.error());
      }
      respondError(c, Status::kBadRequest,
                   "malformed request: " + c.decoder.error());
      c.closing = true;
      break;
    }
    if (result == store::FrameDecoder::Result::kFrame) {
      handleFrame(c, c.decoder.take());
      if (!conns_.count(id)) return;
    }
  }
  if (offset >= size) {
    Bytes().swap(c.in);
    c.inOffset = 0;
  } else if (fresh) {
    c.in.assign(data + offset, data + size);
    c.inOffset = 0;
  } else {
    c.inOffset = offset;
  }
  if (c.closing && !c.outputPending()) {
    closeConnection(id);
    return;
  }
  updateInterest(c);
}

bool TCPStoreServer::flushOutput(Connection& c) {
  while (c.outputPending()) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.outOffset,
                       c.out.size() - c.outOffset, MSG_NOSIGNAL);
    if (n > 0) {
      c.outOffset += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

void TCPStoreServer::onWritable(Connection& c) {
  if (!flushOutput(c)) {
    closeConnection(c.id);
    return;
  }
  if (!c.outputPending()) {
    c.out.clear();
    c.outOffset = 0;
    if (c.closing) {
      closeConnection(c.id);
      return;
    }
    // Requests that arrived behind this response can be served now.
    if (c.inOffset < c.in.size() && !c.busy()) {
      onReadable(c, 0);
      return;
    }
  }
  updateInterest(c);
}

void TCPStoreServer::respond(Connection& c, Status status,
                             const std::vector<Bytes>& args) {
  std::vector<std::span<const uint8_t>> spans;
  spans.reserve(args.size());
  for (const auto& a : args) spans.emplace_back(a.data(), a.size());
  store::encodeFrame(static_cast<uint8_t>(status), spans, &c.out);
  // Write straight away: most responses fit the socket buffer, and a
  // round trip through epoll would cost a wake-up. What is left waits for
  // EPOLLOUT; a failed connection is closed by its EPOLLERR.
  flushOutput(c);
  if (!c.outputPending()) {
    c.out.clear();
    c.outOffset = 0;
  }
}

void TCPStoreServer::respondError(Connection& c, Status status,
                                  const std::string& message) {
  respond(c, status, {Bytes(message.begin(), message.end())});
}

void TCPStoreServer::handleFrame(Connection& c, Frame frame) {
  if (c.phase != Connection::Phase::kReady) {
    handleHandshake(c, frame);
    return;
  }
  handleCommand(c, frame);
}

void TCPStoreServer::handleHandshake(Connection& c, Frame& frame) {
  auto op = static_cast<Op>(frame.code);
  if (c.phase == Connection::Phase::kHello) {
    if (op != Op::kHello) {
      respondError(c, authToken_.empty() ? Status::kBadRequest : Status::kAuthRequired,
                   authToken_.empty()
                       ? "the first request must be hello"
                       : "this store requires authentication; set "
                         "MESHCOMM_AUTH_TOKEN to the job's token");
      c.closing = true;
      return;
    }
    uint64_t flags = 0;
    store::decodeU64(frame.args[0], &flags);
    c.worker = (flags & store::kHelloFlagLocal) == 0;
    if (authToken_.empty()) {
      c.phase = Connection::Phase::kReady;
      respond(c, Status::kOk, {Bytes{0}, Bytes{}});
    } else {
      c.nonce = randomBytes(32);
      c.phase = Connection::Phase::kAuth;
      respond(c, Status::kOk, {Bytes{1}, c.nonce});
      return;
    }
  } else {  // Phase::kAuth
    Bytes message = c.nonce;
    message.insert(message.end(), kAuthContext, kAuthContext + sizeof(kAuthContext) - 1);
    if (op != Op::kAuth ||
        !constantTimeEqual(frame.args[0], hmacSha256(authToken_, message))) {
      if (shouldLogDrop()) {
        MESHCOMM_LOG(kWarn, "store server refused client " << c.peer
                                << ": authentication failed");
      }
      respondError(c, Status::kAuthFailed,
                   "authentication failed: the client's token does not match "
                   "the store's (check MESHCOMM_AUTH_TOKEN on every rank)");
      c.closing = true;
      return;
    }
    c.phase = Connection::Phase::kReady;
    respond(c, Status::kOk, {});
  }
  if (c.worker) {
    MutexLock lock(workersMu_);
    ++workers_;
    workersCv_.notifyAll();
  }
}

void TCPStoreServer::handleCommand(Connection& c, Frame& frame) {
  auto op = static_cast<Op>(frame.code);
  auto& a = frame.args;
  auto key = [&](size_t i) { return store::asString(a[i]); };
  switch (op) {
    case Op::kHello:
    case Op::kAuth:
      respondError(c, Status::kBadRequest, "handshake already completed");
      c.closing = true;
      return;
    case Op::kPing:
      respond(c, Status::kOk, {});
      return;
    case Op::kAppendOnClose:
      c.onCloseKey = key(0);
      c.onCloseValue = std::move(a[1]);
      respond(c, Status::kOk, {});
      return;
    case Op::kSet: {
      std::string k = key(0);
      data_[k] = std::move(a[1]);
      respond(c, Status::kOk, {});
      wakeWaiters(k);
      return;
    }
    case Op::kAppend: {
      std::string k = key(0);
      Bytes& v = data_[k];
      if (v.size() + a[1].size() > limits_.maxValueBytes) {
        respondError(c, Status::kError,
                     "append to key '" + k + "' would exceed the value limit of " +
                         std::to_string(limits_.maxValueBytes) + " bytes");
        return;
      }
      v.insert(v.end(), a[1].begin(), a[1].end());
      respond(c, Status::kOk, {});
      wakeWaiters(k);
      return;
    }
    case Op::kAdd: {
      std::string k = key(0);
      int64_t amount = 0;
      store::decodeI64(a[1], &amount);
      int64_t value = amount;
      auto it = data_.find(k);
      if (it != data_.end()) {
        auto current = parseCounter(it->second);
        if (!current) {
          respondError(c, Status::kError,
                       "add: the value of key '" + k +
                           "' is not an integer, so it cannot be a counter");
          return;
        }
        if (__builtin_add_overflow(*current, amount, &value)) {
          respondError(c, Status::kError,
                       "add: counter '" + k + "' would overflow int64");
          return;
        }
      }
      data_[k] = counterBytes(value);
      respond(c, Status::kOk, {store::encodeI64(value)});
      wakeWaiters(k);
      return;
    }
    case Op::kDelete: {
      bool existed = data_.erase(key(0)) > 0;
      respond(c, Status::kOk, {Bytes{static_cast<uint8_t>(existed)}});
      return;
    }
    case Op::kCompareSet: {
      std::string k = key(0);
      auto it = data_.find(k);
      bool swap = (it == data_.end() && a[1].empty()) ||
                  (it != data_.end() && it->second == a[1]);
      if (swap) {
        data_[k] = a[2];
        respond(c, Status::kOk, {a[2]});
        wakeWaiters(k);
      } else {
        respond(c, Status::kOk, {it == data_.end() ? a[1] : it->second});
      }
      return;
    }
    case Op::kCheck: {
      bool all = true;
      for (const auto& k : a) all = all && data_.count(store::asString(k)) > 0;
      respond(c, Status::kOk, {Bytes{static_cast<uint8_t>(all)}});
      return;
    }
    case Op::kNumKeys:
      respond(c, Status::kOk, {store::encodeI64(static_cast<int64_t>(data_.size()))});
      return;
    case Op::kMultiSet: {
      std::vector<std::string> keys;
      for (size_t i = 0; i < a.size(); i += 2) {
        keys.push_back(key(i));
        data_[keys.back()] = std::move(a[i + 1]);
      }
      respond(c, Status::kOk, {});
      for (const auto& k : keys) wakeWaiters(k);
      return;
    }
    case Op::kGet:
    case Op::kWait:
    case Op::kMultiGet: {
      uint64_t timeoutMs = 0;
      store::decodeU64(a[0], &timeoutMs);
      park(c, std::move(frame), timeoutMs);
      tryCompleteWaiter(c);
      return;
    }
  }
}

void TCPStoreServer::park(Connection& c, Frame frame, uint64_t timeoutMs) {
  c.parkedKeys.clear();
  for (size_t i = 1; i < frame.args.size(); ++i) {
    c.parkedKeys.push_back(store::asString(frame.args[i]));
  }
  c.parked = std::move(frame);
  for (const auto& k : c.parkedKeys) waitersByKey_[k].insert(c.id);
  if (timeoutMs != store::kNoTimeout) {
    auto at = Deadline::Clock::now() +
              std::chrono::milliseconds(std::min<uint64_t>(timeoutMs, INT64_MAX / 2000000));
    c.deadlineIt = waiterDeadlines_.emplace(at, c.id);
  }
}

void TCPStoreServer::unpark(Connection& c) {
  for (const auto& k : c.parkedKeys) {
    auto it = waitersByKey_.find(k);
    if (it == waitersByKey_.end()) continue;
    it->second.erase(c.id);
    if (it->second.empty()) waitersByKey_.erase(it);
  }
  if (c.deadlineIt) waiterDeadlines_.erase(*c.deadlineIt);
  c.deadlineIt.reset();
  c.parked.reset();
  c.parkedKeys.clear();
}

bool TCPStoreServer::tryCompleteWaiter(Connection& c) {
  for (const auto& k : c.parkedKeys) {
    if (!data_.count(k)) return false;
  }
  auto op = static_cast<Op>(c.parked->code);
  std::vector<Bytes> values;
  if (op != Op::kWait) {
    for (const auto& k : c.parkedKeys) values.push_back(data_[k]);
  }
  unpark(c);
  respond(c, Status::kOk, values);
  updateInterest(c);
  if (c.inOffset < c.in.size()) resume_.push_back(c.id);
  return true;
}

void TCPStoreServer::wakeWaiters(const std::string& key) {
  auto it = waitersByKey_.find(key);
  if (it == waitersByKey_.end()) return;
  std::vector<ConnId> ids(it->second.begin(), it->second.end());
  for (ConnId id : ids) {
    auto c = conns_.find(id);
    if (c != conns_.end() && c->second->parked) tryCompleteWaiter(*c->second);
  }
}

void TCPStoreServer::expireWaiters() {
  auto now = Deadline::Clock::now();
  while (!waiterDeadlines_.empty() && waiterDeadlines_.begin()->first <= now) {
    ConnId id = waiterDeadlines_.begin()->second;
    auto it = conns_.find(id);
    if (it == conns_.end() || !it->second->parked) {
      waiterDeadlines_.erase(waiterDeadlines_.begin());
      continue;
    }
    Connection& c = *it->second;
    std::vector<Bytes> args;
    std::string message = "timed out waiting for key(s):";
    std::vector<Bytes> missing;
    for (const auto& k : c.parkedKeys) {
      if (data_.count(k)) continue;
      message += " '" + k + "'";
      missing.emplace_back(k.begin(), k.end());
    }
    args.emplace_back(message.begin(), message.end());
    for (auto& m : missing) args.push_back(std::move(m));
    unpark(c);
    respond(c, Status::kTimeout, args);
    updateInterest(c);
    if (c.inOffset < c.in.size()) resume_.push_back(c.id);
  }
}

void TCPStoreServer::resumeParkedInput() {
  // Requests a client sent behind a request that was parked are already in
  // its input buffer; no EPOLLIN will announce them, so serve them here.
  while (!resume_.empty()) {
    std::vector<ConnId> ids;
    ids.swap(resume_);
    for (ConnId id : ids) {
      auto it = conns_.find(id);
      if (it != conns_.end() && !it->second->busy() &&
          it->second->inOffset < it->second->in.size()) {
        onReadable(*it->second, 0);
      }
    }
  }
}

void TCPStoreServer::closeConnection(ConnId id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Connection& c = *it->second;
  if (c.parked) unpark(c);
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
  std::string onCloseKey = std::move(c.onCloseKey);
  Bytes onCloseValue = std::move(c.onCloseValue);
  conns_.erase(it);
  if (!onCloseKey.empty() && !stop_.load()) {
    Bytes& v = data_[onCloseKey];
    if (v.size() + onCloseValue.size() <= limits_.maxValueBytes) {
      v.insert(v.end(), onCloseValue.begin(), onCloseValue.end());
    }
    wakeWaiters(onCloseKey);
  }
}

}  // namespace meshcomm

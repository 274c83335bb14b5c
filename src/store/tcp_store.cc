// TCPStore: the public store class, a thin shell over TCPStoreClient (and
// TCPStoreServer when this process hosts the store).
#include <limits>

#include "common/env.h"
#include "meshcomm/error.h"
#include "meshcomm/store.h"
#include "store/client.h"
#include "store/protocol.h"
#include "store/server.h"

namespace meshcomm {

using store::Op;

namespace {

// A waiting request's response may legitimately take the whole timeout;
// allow this much more before concluding the server itself is gone.
constexpr std::chrono::milliseconds kResponseGrace{10000};

uint64_t wireTimeout(std::chrono::milliseconds t) {
  if (t.count() < 0 || t == std::chrono::milliseconds::max()) return store::kNoTimeout;
  return static_cast<uint64_t>(t.count());
}

Deadline responseDeadline(std::chrono::milliseconds t) {
  if (wireTimeout(t) == store::kNoTimeout) return Deadline::never();
  // t + grace must not overflow into a negative (already expired) timeout.
  if (t > std::chrono::milliseconds::max() - kResponseGrace) return Deadline::never();
  return Deadline::after(t + kResponseGrace);
}

std::string connectHostFor(const std::string& bindHost) {
  if (bindHost.empty() || bindHost == "0.0.0.0") return "127.0.0.1";
  if (bindHost == "::") return "::1";
  return bindHost;
}

}  // namespace

TCPStore::TCPStore(TCPStoreOptions options)
    : options_(std::move(options)), timeoutMs_(options_.timeout.count()) {
  if (options_.worldSize && *options_.worldSize <= 0) {
    throw InvalidArgument("TCPStore: world_size must be positive, got " +
                          std::to_string(*options_.worldSize));
  }
  if (options_.timeout.count() < 0) {
    throw InvalidArgument("TCPStore: timeout must not be negative");
  }
  std::string token = options_.authToken;
  if (token.empty()) token = envString("MESHCOMM_AUTH_TOKEN").value_or("");
  Deadline deadline = Deadline::after(options_.timeout);
  port_ = options_.port;
  if (options_.isServer) {
    server_ = std::make_unique<TCPStoreServer>(options_.host, options_.port,
                                               options_.limits, token);
    port_ = server_->port();
  }
  std::string host = options_.isServer ? connectHostFor(options_.host) : options_.host;
  client_ = std::make_unique<TCPStoreClient>(host, port_, token, options_.isServer,
                                             options_.limits, deadline);
  if (options_.isServer && options_.waitForWorkers && options_.worldSize &&
      *options_.worldSize > 1) {
    int expected = *options_.worldSize - 1;
    int arrived = server_->waitForWorkers(expected, deadline);
    if (arrived < expected) {
      throw Timeout("TCPStore on port " + std::to_string(port_) + ": only " +
                    std::to_string(arrived) + " of " + std::to_string(expected) +
                    " workers connected within " +
                    std::to_string(options_.timeout.count()) + " ms");
    }
  }
}

TCPStore::~TCPStore() {
  client_.reset();
  server_.reset();
}

namespace {

void checkKey(const std::string& key, const StoreLimits& limits) {
  if (key.size() > limits.maxKeyBytes) {
    throw InvalidArgument("store key of " + std::to_string(key.size()) +
                          " bytes exceeds the limit of " +
                          std::to_string(limits.maxKeyBytes));
  }
}

void checkValue(const Bytes& value, const StoreLimits& limits) {
  if (value.size() > limits.maxValueBytes) {
    throw InvalidArgument("store value of " + std::to_string(value.size()) +
                          " bytes exceeds the limit of " +
                          std::to_string(limits.maxValueBytes));
  }
}

void checkKeys(const std::vector<std::string>& keys, const StoreLimits& limits) {
  if (keys.size() > limits.maxKeysPerRequest) {
    throw InvalidArgument("a store request may name at most " +
                          std::to_string(limits.maxKeysPerRequest) + " keys, got " +
                          std::to_string(keys.size()));
  }
  for (const auto& k : keys) checkKey(k, limits);
}

}  // namespace

void TCPStore::set(const std::string& key, const Bytes& value) {
  checkKey(key, options_.limits);
  checkValue(value, options_.limits);
  client_->call(Op::kSet, {store::asSpan(key), store::asSpan(value)},
                Deadline::after(timeout()));
}

Bytes TCPStore::get(const std::string& key) {
  checkKey(key, options_.limits);
  Bytes t = store::encodeU64(wireTimeout(timeout()));
  auto r = client_->call(Op::kGet, {store::asSpan(t), store::asSpan(key)},
                         responseDeadline(timeout()));
  if (r.size() != 1) throw StoreError("store: malformed get response");
  return std::move(r[0]);
}

int64_t TCPStore::add(const std::string& key, int64_t amount) {
  checkKey(key, options_.limits);
  Bytes a = store::encodeI64(amount);
  auto r = client_->call(Op::kAdd, {store::asSpan(key), store::asSpan(a)},
                         Deadline::after(timeout()));
  int64_t value = 0;
  if (r.size() != 1 || !store::decodeI64(r[0], &value)) {
    throw StoreError("store: malformed add response");
  }
  return value;
}

bool TCPStore::deleteKey(const std::string& key) {
  checkKey(key, options_.limits);
  auto r = client_->call(Op::kDelete, {store::asSpan(key)},
                         Deadline::after(timeout()));
  return r.size() == 1 && r[0].size() == 1 && r[0][0] == 1;
}

Bytes TCPStore::compareSet(const std::string& key, const Bytes& expected,
                           const Bytes& desired) {
  checkKey(key, options_.limits);
  checkValue(expected, options_.limits);
  checkValue(desired, options_.limits);
  auto r = client_->call(
      Op::kCompareSet,
      {store::asSpan(key), store::asSpan(expected), store::asSpan(desired)},
      Deadline::after(timeout()));
  if (r.size() != 1) throw StoreError("store: malformed compare_set response");
  return std::move(r[0]);
}

void TCPStore::wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) {
  if (keys.empty()) return;
  checkKeys(keys, options_.limits);
  Bytes t = store::encodeU64(wireTimeout(timeout));
  std::vector<std::span<const uint8_t>> args{store::asSpan(t)};
  for (const auto& k : keys) args.push_back(store::asSpan(k));
  client_->call(Op::kWait, args, responseDeadline(timeout));
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  checkKeys(keys, options_.limits);
  std::vector<std::span<const uint8_t>> args;
  for (const auto& k : keys) args.push_back(store::asSpan(k));
  auto r = client_->call(Op::kCheck, args, Deadline::after(timeout()));
  return r.size() == 1 && r[0].size() == 1 && r[0][0] == 1;
}

int64_t TCPStore::numKeys() {
  auto r = client_->call(Op::kNumKeys, {}, Deadline::after(timeout()));
  int64_t n = 0;
  if (r.size() != 1 || !store::decodeI64(r[0], &n)) {
    throw StoreError("store: malformed num_keys response");
  }
  return n;
}

void TCPStore::append(const std::string& key, const Bytes& value) {
  checkKey(key, options_.limits);
  checkValue(value, options_.limits);
  client_->call(Op::kAppend, {store::asSpan(key), store::asSpan(value)},
                Deadline::after(timeout()));
}

std::vector<Bytes> TCPStore::multiGet(const std::vector<std::string>& keys) {
  if (keys.empty()) return {};
  checkKeys(keys, options_.limits);
  Bytes t = store::encodeU64(wireTimeout(timeout()));
  std::vector<std::span<const uint8_t>> args{store::asSpan(t)};
  for (const auto& k : keys) args.push_back(store::asSpan(k));
  auto r = client_->call(Op::kMultiGet, args, responseDeadline(timeout()));
  if (r.size() != keys.size()) throw StoreError("store: malformed multi_get response");
  return r;
}

void TCPStore::multiSet(const std::vector<std::string>& keys,
                        const std::vector<Bytes>& values) {
  if (keys.size() != values.size()) {
    throw InvalidArgument("multi_set: " + std::to_string(keys.size()) + " keys but " +
                          std::to_string(values.size()) + " values");
  }
  if (keys.empty()) return;
  checkKeys(keys, options_.limits);
  size_t total = 0;
  for (const auto& v : values) total += v.size();
  if (total > options_.limits.maxValueBytes) {
    throw InvalidArgument("multi_set: values total " + std::to_string(total) +
                          " bytes, more than the limit of " +
                          std::to_string(options_.limits.maxValueBytes));
  }
  std::vector<std::span<const uint8_t>> args;
  for (size_t i = 0; i < keys.size(); ++i) {
    args.push_back(store::asSpan(keys[i]));
    args.push_back(store::asSpan(values[i]));
  }
  client_->call(Op::kMultiSet, args, Deadline::after(timeout()));
}

void TCPStore::appendOnDisconnect(const std::string& key, const Bytes& value) {
  checkKey(key, options_.limits);
  if (key.empty()) throw InvalidArgument("appendOnDisconnect: the key must not be empty");
  if (value.size() > store::kMaxOnCloseValueBytes) {
    throw InvalidArgument("appendOnDisconnect: the value may be at most " +
                          std::to_string(store::kMaxOnCloseValueBytes) + " bytes");
  }
  client_->call(Op::kAppendOnClose, {store::asSpan(key), store::asSpan(value)},
                Deadline::after(timeout()));
}

void TCPStore::clearOnDisconnect() {
  std::string none;
  Bytes empty;
  client_->call(Op::kAppendOnClose, {store::asSpan(none), store::asSpan(empty)},
                Deadline::after(timeout()));
}

void TCPStore::interrupt() { client_->interrupt(); }

std::chrono::milliseconds TCPStore::timeout() const {
  return std::chrono::milliseconds(timeoutMs_.load(std::memory_order_relaxed));
}

void TCPStore::setTimeout(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) throw InvalidArgument("store timeout must not be negative");
  timeoutMs_.store(timeout.count(), std::memory_order_relaxed);
}

}  // namespace meshcomm

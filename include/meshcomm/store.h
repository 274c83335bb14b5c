// Key-value stores used for rendezvous: the abstract Store interface, the
// TCPStore (an epoll server plus a blocking client), and PrefixStore.
//
// Thread-safety: every Store method may be called from any thread. A
// TCPStore serialises its calls over one connection, so concurrent callers
// wait for each other; open one TCPStore per thread for parallel traffic.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "meshcomm/export.h"

namespace meshcomm {

using Bytes = std::vector<uint8_t>;

// The store interface that process groups rendezvous through.
// Values are opaque bytes; add() treats a value as a decimal int64.
class MESHCOMM_API Store {
 public:
  virtual ~Store() = default;

  // Sets key to value, replacing any old value; wakes every waiter on key.
  virtual void set(const std::string& key, const Bytes& value) = 0;

  // Returns the value of key, waiting up to timeout() for it to be set.
  // Throws Timeout naming the key when it does not appear in time.
  virtual Bytes get(const std::string& key) = 0;

  // Adds amount to the int64 counter at key (created at amount when absent)
  // and returns the new value. Throws StoreError if the existing value is
  // not a decimal integer.
  virtual int64_t add(const std::string& key, int64_t amount) = 0;

  // Removes key; returns whether it existed.
  virtual bool deleteKey(const std::string& key) = 0;

  // Atomically: if key is absent and expected is empty, or key holds
  // expected, sets it to desired. Returns the value key holds afterwards
  // (desired on success, the current value otherwise; expected when the key
  // is absent and expected is non-empty).
  virtual Bytes compareSet(const std::string& key, const Bytes& expected,
                           const Bytes& desired) = 0;

  // Waits until every key exists. Throws Timeout naming the missing keys.
  virtual void wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }

  // Returns whether every key exists, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;

  // Number of keys in the store.
  virtual int64_t numKeys() = 0;

  // Appends value to the bytes at key (creating key when absent).
  virtual void append(const std::string& key, const Bytes& value) = 0;

  // get() for several keys at once, waiting for all of them.
  virtual std::vector<Bytes> multiGet(const std::vector<std::string>& keys) = 0;

  // set() for several keys at once, applied atomically.
  // REQUIRES: keys.size() == values.size().
  virtual void multiSet(const std::vector<std::string>& keys,
                        const std::vector<Bytes>& values) = 0;

  // The default deadline of get(), wait() and multiGet().
  virtual std::chrono::milliseconds timeout() const = 0;
  virtual void setTimeout(std::chrono::milliseconds timeout) = 0;

  // Convenience overloads for text values.
  void set(const std::string& key, const std::string& value) {
    set(key, Bytes(value.begin(), value.end()));
  }
  std::string getString(const std::string& key) {
    Bytes b = get(key);
    return std::string(b.begin(), b.end());
  }
};

// Limits the server enforces on every request before allocating for it.
struct StoreLimits {
  size_t maxKeyBytes = 4096;
  size_t maxValueBytes = size_t{1} << 30;
  size_t maxKeysPerRequest = 65536;
  size_t maxClients = 65536;
};

struct TCPStoreOptions {
  // Address the server binds to (server) or connects to (client). A
  // hostname or an IPv4/IPv6 literal; the server also accepts "" or
  // "0.0.0.0" for every interface.
  std::string host = "127.0.0.1";
  // 0 on the server picks a free port; port() reports it.
  uint16_t port = 0;
  bool isServer = false;
  // Total users of the store including the server. With waitForWorkers the
  // server's constructor returns once worldSize - 1 clients have connected.
  std::optional<int> worldSize;
  bool waitForWorkers = true;
  // Deadline for connecting, for wait-for-workers, and default for get().
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // Shared secret; empty means the MESHCOMM_AUTH_TOKEN environment variable
  // (and no authentication when that is unset too).
  std::string authToken;
  StoreLimits limits;
};

class TCPStoreServer;
class TCPStoreClient;

// A TCP key-value store. With isServer it starts the server in this process
// (one epoll thread) and talks to it like any other client.
//
// Throws: Timeout when the server cannot be reached or workers do not arrive
// in time; StoreError when authentication is refused; InvalidArgument for
// bad options.
class MESHCOMM_API TCPStore final : public Store {
 public:
  explicit TCPStore(TCPStoreOptions options);
  ~TCPStore() override;
  TCPStore(const TCPStore&) = delete;
  TCPStore& operator=(const TCPStore&) = delete;

  using Store::set;
  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  bool deleteKey(const std::string& key) override;
  Bytes compareSet(const std::string& key, const Bytes& expected,
                   const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys,
            std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t numKeys() override;
  void append(const std::string& key, const Bytes& value) override;
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys,
                const std::vector<Bytes>& values) override;
  std::chrono::milliseconds timeout() const override;
  void setTimeout(std::chrono::milliseconds timeout) override;

  // Asks the server to append value to key if this store's connection
  // closes before clearOnDisconnect() (the process died). Only one
  // registration per TCPStore; a new one replaces the old.
  void appendOnDisconnect(const std::string& key, const Bytes& value);
  void clearOnDisconnect();

  // Ends a call blocked in this store on another thread at once, with
  // StoreError, and makes every later call fail too: for a thread that
  // waits on the store and must be stopped. Thread-safe.
  void interrupt();

  const std::string& host() const { return options_.host; }
  // The port the server listens on (the chosen one when options.port was 0).
  uint16_t port() const { return port_; }
  bool isServer() const { return options_.isServer; }

 private:
  TCPStoreOptions options_;  // options_.timeout is only the initial value
  std::atomic<int64_t> timeoutMs_;  // setTimeout() may race with calls
  uint16_t port_ = 0;
  std::unique_ptr<TCPStoreServer> server_;
  std::unique_ptr<TCPStoreClient> client_;
};

// A view of another store that prepends "<prefix>/" to every key, so several
// groups can share one store without their keys colliding.
class MESHCOMM_API PrefixStore final : public Store {
 public:
  // The base store must outlive this view.
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);

  using Store::set;
  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  bool deleteKey(const std::string& key) override;
  Bytes compareSet(const std::string& key, const Bytes& expected,
                   const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys,
            std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  // Counts the keys of the whole base store.
  int64_t numKeys() override;
  void append(const std::string& key, const Bytes& value) override;
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys,
                const std::vector<Bytes>& values) override;
  std::chrono::milliseconds timeout() const override;
  void setTimeout(std::chrono::milliseconds timeout) override;

  const std::shared_ptr<Store>& base() const { return base_; }

 private:
  std::string prefixed(const std::string& key) const;
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace meshcomm

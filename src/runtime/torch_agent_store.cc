#include "runtime/torch_agent_store.h"

#include <cstring>
#include <vector>

#include "common/env.h"
#include "common/socket.h"
#include "meshcomm/error.h"

namespace meshcomm {
namespace {

// torch's TCPStore frames: a one-byte query type, then its arguments;
// strings are a native-endian uint64 length and the bytes. The query
// numbers moved when torch 2 put a validation query first.
struct Dialect {
  const char* name;
  bool validates;  // the connection opens with VALIDATE + magic number
  uint8_t set, get, check, wait;
};
constexpr Dialect kCurrent{"torch >= 2", true, 1, 3, 5, 6};
constexpr Dialect kLegacy{"torch 1.x", false, 0, 2, 4, 5};
constexpr uint8_t kValidate = 0;
constexpr uint32_t kValidationMagic = 0x3C85F7CE;
constexpr uint8_t kStopWaiting = 0;
constexpr uint64_t kMaxValueBytes = 1 << 20;

// torch's clients put "/" before every key.
std::string torchKey(const std::string& key) { return "/" + key; }

class TorchStoreConnection {
 public:
  TorchStoreConnection(std::string host, uint16_t port, const Dialect& dialect,
                       const Deadline& deadline)
      : host_(std::move(host)), port_(port), dialect_(dialect), deadline_(deadline) {
    std::string why;
    fd_ = tryConnectTcp(host_, port_, deadline_, &why);
    if (!fd_) {
      if (deadline_.expired()) throw Timeout(where() + ": cannot connect: " + why);
      throw StoreError(where() + ": cannot connect: " + why);
    }
    if (dialect_.validates) {
      put(kValidate);
      out_.resize(out_.size() + sizeof(kValidationMagic));
      std::memcpy(out_.data() + out_.size() - sizeof(kValidationMagic), &kValidationMagic,
                  sizeof(kValidationMagic));
    }
  }

  // Sends CHECK for key and reads the answer; false when the server drops
  // the connection instead, which is how a server of the other dialect
  // answers (torch 1.x reads the validation frame as a malformed SET).
  bool understood(const std::string& key) {
    put(dialect_.check);
    putNumber(1);
    putString(torchKey(key));
    flush("checking");
    uint8_t answer = 0;
    IoResult r = recvAll(fd_.get(), &answer, 1, deadline_);
    if (r.status == IoStatus::kTimeout) fail(r, "checking");
    return r.ok();
  }

  void set(const std::string& key, const std::string& value) {
    put(dialect_.set);
    putString(torchKey(key));
    putString(value);
    flush("setting " + key);
  }

  std::string waitGet(const std::string& key) {
    put(dialect_.wait);
    putNumber(1);
    putString(torchKey(key));
    flush("waiting for " + key);
    uint8_t answer = 0;
    IoResult r = recvAll(fd_.get(), &answer, 1, deadline_);
    if (!r.ok()) fail(r, "waiting for " + key);
    if (answer != kStopWaiting) {
      throw StoreError(where() + ": unexpected answer " + std::to_string(answer) +
                       " while waiting for " + key);
    }
    put(dialect_.get);
    putString(torchKey(key));
    flush("reading " + key);
    uint64_t size = 0;
    r = recvAll(fd_.get(), &size, sizeof(size), deadline_);
    if (!r.ok()) fail(r, "reading " + key);
    if (size > kMaxValueBytes) {
      throw StoreError(where() + ": " + key + " holds " + std::to_string(size) +
                       " bytes, not an address");
    }
    std::string value(size, '\0');
    r = recvAll(fd_.get(), value.data(), size, deadline_);
    if (!r.ok()) fail(r, "reading " + key);
    return value;
  }

 private:
  std::string where() const {
    return "torchrun's store at " + host_ + ":" + std::to_string(port_) + " (" + dialect_.name +
           " protocol)";
  }
  void put(uint8_t byte) { out_.push_back(static_cast<char>(byte)); }
  void putNumber(uint64_t n) {
    out_.resize(out_.size() + sizeof(n));
    std::memcpy(out_.data() + out_.size() - sizeof(n), &n, sizeof(n));
  }
  void putString(const std::string& s) {
    putNumber(s.size());
    out_ += s;
  }
  void flush(const std::string& doing) {
    IoResult r = sendAll(fd_.get(), out_.data(), out_.size(), deadline_);
    out_.clear();
    if (!r.ok()) fail(r, doing);
  }
  [[noreturn]] void fail(const IoResult& r, const std::string& doing) const {
    std::string message = where() + ": " + doing + ": " + r.describe();
    if (r.status == IoStatus::kTimeout) throw Timeout(message);
    throw StoreError(message);
  }

  std::string host_;
  uint16_t port_;
  Dialect dialect_;
  Deadline deadline_;
  Fd fd_;
  std::string out_;
};

// A connection in the dialect the server speaks.
TorchStoreConnection connect(const std::string& host, uint16_t port, const std::string& key,
                             const Deadline& deadline) {
  TorchStoreConnection current(host, port, kCurrent, deadline);
  if (current.understood(key)) return current;
  TorchStoreConnection legacy(host, port, kLegacy, deadline);
  if (legacy.understood(key)) return legacy;
  throw StoreError("torchrun's store at " + host + ":" + std::to_string(port) +
                   " closed the connection in both of torch's store protocols; is "
                   "MASTER_PORT a torch TCPStore?");
}

}  // namespace

bool torchAgentHostsStore() {
  auto flag = envString("TORCHELASTIC_USE_AGENT_STORE");
  return flag && *flag == "True";  // torch writes str(bool)
}

std::string torchAgentStoreKey() {
  return "meshcomm/store/" + envString("TORCHELASTIC_RUN_ID").value_or("none") + "/" +
         envString("TORCHELASTIC_RESTART_COUNT").value_or("0");
}

void torchStoreSet(const std::string& host, uint16_t port, const std::string& key,
                   const std::string& value, const Deadline& deadline) {
  TorchStoreConnection connection = connect(host, port, key, deadline);
  connection.set(key, value);
  // SET has no answer: reading the key back confirms the server took it.
  connection.waitGet(key);
}

std::string torchStoreWaitGet(const std::string& host, uint16_t port, const std::string& key,
                              const Deadline& deadline) {
  return connect(host, port, key, deadline).waitGet(key);
}

void publishStoreAddress(const std::string& agentHost, uint16_t agentPort,
                         const std::string& address, const Deadline& deadline) {
  torchStoreSet(agentHost, agentPort, torchAgentStoreKey(), address, deadline);
}

std::string publishedStoreAddress(const std::string& agentHost, uint16_t agentPort,
                                  const Deadline& deadline) {
  const std::string key = torchAgentStoreKey();
  try {
    return torchStoreWaitGet(agentHost, agentPort, key, deadline);
  } catch (const Timeout& e) {
    throw Timeout("joining the job under torchrun: rank 0 did not publish meshcomm's store "
                  "address under " + key + " in time (" + e.what() + ")");
  }
}

}  // namespace meshcomm

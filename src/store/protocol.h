// The TCPStore wire protocol: frames, opcodes, statuses, and an incremental
// decoder that checks every length against limits before allocating for it.
// docs/store-protocol.md describes the format; this header is its one
// implementation, shared by server, client, tests and the fuzz target.
//
// Frame (all integers little-endian):
//   u16 magic 0x534D ("MS")  u8 version (1)  u8 code
//   u32 argc                 u64 payload bytes
//   argc x { u32 length, length bytes }
// code is an Op in requests and a Status in responses.
//
// Thread-safety: FrameDecoder is not thread-safe; the free functions are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "meshcomm/store.h"

namespace meshcomm::store {

inline constexpr uint16_t kMagic = 0x534D;
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 16;
// "no deadline" in the timeout argument of waiting requests.
inline constexpr uint64_t kNoTimeout = UINT64_MAX;

enum class Op : uint8_t {
  kHello = 1,       // u64 flags, label           -> u8 authRequired, nonce
  kAuth = 2,        // mac                        -> (empty)
  kSet = 3,         // key, value                 -> (empty)
  kGet = 4,         // u64 timeoutMs, key         -> value
  kAdd = 5,         // key, i64 amount            -> i64 new value
  kDelete = 6,      // key                        -> u8 existed
  kCompareSet = 7,  // key, expected, desired     -> value now held
  kWait = 8,        // u64 timeoutMs, key...      -> (empty)
  kCheck = 9,       // key...                     -> u8 allPresent
  kNumKeys = 10,    //                            -> i64 count
  kAppend = 11,     // key, value                 -> (empty)
  kMultiGet = 12,   // u64 timeoutMs, key...      -> value...
  kMultiSet = 13,   // (key, value)...            -> (empty)
  kPing = 14,       //                            -> (empty)
  // When this connection closes without a clean shutdown, append value to
  // key (an empty key cancels). Used for liveness: see PeerMonitor.
  kAppendOnClose = 15,  // key, value             -> (empty)
};

enum class Status : uint8_t {
  kOk = 0x80,
  kTimeout = 0x81,       // message, missing key...
  kError = 0x82,         // message (the request was understood but failed)
  kBadRequest = 0x83,    // message (malformed; the server closes)
  kAuthRequired = 0x84,  // message (the server closes)
  kAuthFailed = 0x85,    // message (the server closes)
};

// HELLO flag: this client belongs to the server's own process and does not
// count towards wait_for_workers.
inline constexpr uint64_t kHelloFlagLocal = 1;
// The largest value kAppendOnClose may register.
inline constexpr size_t kMaxOnCloseValueBytes = 4096;

const char* opName(Op op);
bool isKnownOp(uint8_t code);
bool isKnownStatus(uint8_t code);

struct Frame {
  uint8_t code = 0;
  std::vector<Bytes> args;
};

// Appends one encoded frame to *out.
void encodeFrame(uint8_t code, std::span<const std::span<const uint8_t>> args,
                 Bytes* out);
Bytes encodeFrame(uint8_t code, const std::vector<Bytes>& args);

Bytes encodeU64(uint64_t v);
Bytes encodeI64(int64_t v);
// Decoders return false when the argument is not exactly 8 bytes.
bool decodeU64(const Bytes& b, uint64_t* v);
bool decodeI64(const Bytes& b, int64_t* v);

inline std::span<const uint8_t> asSpan(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
inline std::span<const uint8_t> asSpan(const Bytes& b) {
  return {b.data(), b.size()};
}
inline std::string asString(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

// Which side a decoder reads: a server checks each request's argument count
// and each argument's length against the opcode's shape (a key may not be
// longer than maxKeyBytes); a client checks responses against generic limits.
enum class Role { kServer, kClient };

class FrameDecoder {
 public:
  enum class Result { kNeedMore, kFrame, kError };

  FrameDecoder(Role role, const StoreLimits& limits);

  // Consumes bytes from data[0..n) and returns how many it used. Stops after
  // a complete frame (Result::kFrame: call take()) or on the first violation
  // (Result::kError: error() says what; the decoder must not be fed again).
  size_t feed(const uint8_t* data, size_t n, Result* result);

  Frame take();
  const std::string& error() const { return error_; }
  // Bytes buffered for the frame in progress (for memory accounting).
  size_t bufferedBytes() const { return buffered_; }

 private:
  enum class State { kHeader, kArgLength, kArgBody, kError };

  bool fail(std::string message);
  bool checkHeader();
  // Maximum length of argument `index` of the current frame.
  size_t argLimit(size_t index) const;
  bool startArg(uint32_t length);
  void finishArgOrFrame(Result* result);

  Role role_;
  StoreLimits limits_;
  State state_ = State::kHeader;
  uint8_t header_[kHeaderBytes] = {};
  size_t headerFill_ = 0;
  uint8_t code_ = 0;
  uint32_t argc_ = 0;
  uint64_t payload_ = 0;
  uint64_t payloadSeen_ = 0;
  uint8_t lengthBytes_[4] = {};
  size_t lengthFill_ = 0;
  size_t argFill_ = 0;
  size_t buffered_ = 0;
  Frame frame_;
  std::string error_;
};

// Decodes exactly one frame from a complete buffer (tests and fuzzing).
// Returns kFrame with the frame, or kError / kNeedMore with *error set.
FrameDecoder::Result decodeOne(Role role, const StoreLimits& limits,
                               const uint8_t* data, size_t n, Frame* frame,
                               std::string* error);

}  // namespace meshcomm::store

#include "store/protocol.h"

#include <algorithm>
#include <cstring>

namespace meshcomm::store {
namespace {

void putU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void putU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void putU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t getU16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t getU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t getU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// The shape of one request: how many arguments it takes and what each is.
enum class Arg { kInt, kKey, kValue, kLabel, kMac };
constexpr size_t kMaxLabelBytes = kMaxOnCloseValueBytes;
constexpr size_t kMaxMacBytes = 64;

// What argument `index` of a request with opcode `code` is. REQUIRES: code
// passed isKnownOp (checkHeader runs first).
Arg requestArgKind(uint8_t code, size_t index) {
  switch (static_cast<Op>(code)) {
    case Op::kHello: return index == 0 ? Arg::kInt : Arg::kLabel;
    case Op::kAuth: return Arg::kMac;
    case Op::kSet:
    case Op::kAppend: return index == 0 ? Arg::kKey : Arg::kValue;
    case Op::kGet:
    case Op::kWait:
    case Op::kMultiGet: return index == 0 ? Arg::kInt : Arg::kKey;
    case Op::kAdd: return index == 0 ? Arg::kKey : Arg::kInt;
    case Op::kDelete:
    case Op::kCheck: return Arg::kKey;
    case Op::kCompareSet: return index == 0 ? Arg::kKey : Arg::kValue;
    case Op::kMultiSet: return index % 2 == 0 ? Arg::kKey : Arg::kValue;
    case Op::kNumKeys:
    case Op::kPing: return Arg::kInt;  // take no arguments
    case Op::kAppendOnClose: return index == 0 ? Arg::kKey : Arg::kLabel;
  }
  return Arg::kValue;
}

}  // namespace

const char* opName(Op op) {
  switch (op) {
    case Op::kHello: return "hello";
    case Op::kAuth: return "auth";
    case Op::kSet: return "set";
    case Op::kGet: return "get";
    case Op::kAdd: return "add";
    case Op::kDelete: return "delete_key";
    case Op::kCompareSet: return "compare_set";
    case Op::kWait: return "wait";
    case Op::kCheck: return "check";
    case Op::kNumKeys: return "num_keys";
    case Op::kAppend: return "append";
    case Op::kMultiGet: return "multi_get";
    case Op::kMultiSet: return "multi_set";
    case Op::kPing: return "ping";
    case Op::kAppendOnClose: return "append_on_close";
  }
  return "unknown";
}

bool isKnownOp(uint8_t code) {
  return code >= static_cast<uint8_t>(Op::kHello) &&
         code <= static_cast<uint8_t>(Op::kAppendOnClose);
}

bool isKnownStatus(uint8_t code) {
  return code >= static_cast<uint8_t>(Status::kOk) &&
         code <= static_cast<uint8_t>(Status::kAuthFailed);
}

void encodeFrame(uint8_t code, std::span<const std::span<const uint8_t>> args,
                 Bytes* out) {
  uint64_t payload = 0;
  for (const auto& a : args) payload += 4 + a.size();
  size_t start = out->size();
  out->resize(start + kHeaderBytes + payload);
  uint8_t* p = out->data() + start;
  putU16(p, kMagic);
  p[2] = kVersion;
  p[3] = code;
  putU32(p + 4, static_cast<uint32_t>(args.size()));
  putU64(p + 8, payload);
  p += kHeaderBytes;
  for (const auto& a : args) {
    putU32(p, static_cast<uint32_t>(a.size()));
    if (!a.empty()) std::memcpy(p + 4, a.data(), a.size());
    p += 4 + a.size();
  }
}

Bytes encodeFrame(uint8_t code, const std::vector<Bytes>& args) {
  std::vector<std::span<const uint8_t>> spans;
  spans.reserve(args.size());
  for (const auto& a : args) spans.emplace_back(a.data(), a.size());
  Bytes out;
  encodeFrame(code, spans, &out);
  return out;
}

Bytes encodeU64(uint64_t v) {
  Bytes b(8);
  putU64(b.data(), v);
  return b;
}

Bytes encodeI64(int64_t v) { return encodeU64(static_cast<uint64_t>(v)); }

bool decodeU64(const Bytes& b, uint64_t* v) {
  if (b.size() != 8) return false;
  *v = getU64(b.data());
  return true;
}

bool decodeI64(const Bytes& b, int64_t* v) {
  uint64_t u = 0;
  if (!decodeU64(b, &u)) return false;
  *v = static_cast<int64_t>(u);
  return true;
}

FrameDecoder::FrameDecoder(Role role, const StoreLimits& limits)
    : role_(role), limits_(limits) {}

bool FrameDecoder::fail(std::string message) {
  state_ = State::kError;
  error_ = std::move(message);
  return false;
}

bool FrameDecoder::checkHeader() {
  uint16_t magic = getU16(header_);
  if (magic != kMagic) return fail("bad magic (not a meshcomm store frame)");
  if (header_[2] != kVersion) {
    return fail("unsupported protocol version " + std::to_string(header_[2]) +
                " (this side speaks " + std::to_string(kVersion) + ")");
  }
  code_ = header_[3];
  argc_ = getU32(header_ + 4);
  payload_ = getU64(header_ + 8);
  const uint64_t maxKeys = limits_.maxKeysPerRequest;
  const uint64_t maxPayload = limits_.maxValueBytes +
                              maxKeys * (limits_.maxKeyBytes + 16) + 4096;
  if (payload_ > maxPayload) {
    return fail("frame payload of " + std::to_string(payload_) +
                " bytes exceeds the limit of " + std::to_string(maxPayload));
  }
  if (static_cast<uint64_t>(argc_) * 4 > payload_) {
    return fail("argument count " + std::to_string(argc_) +
                " does not fit the payload length");
  }
  if (role_ == Role::kClient) {
    if (!isKnownStatus(code_)) {
      return fail("unknown response status " + std::to_string(code_));
    }
    if (argc_ > maxKeys + 2) return fail("too many response arguments");
    return true;
  }
  if (!isKnownOp(code_)) return fail("unknown opcode " + std::to_string(code_));
  auto op = static_cast<Op>(code_);
  auto need = [&](bool ok) {
    return ok ? true
              : fail(std::string("wrong argument count ") +
                     std::to_string(argc_) + " for " + opName(op));
  };
  switch (op) {
    case Op::kHello: return need(argc_ == 2);
    case Op::kAuth: return need(argc_ == 1);
    case Op::kSet:
    case Op::kGet:
    case Op::kAdd:
    case Op::kAppend:
    case Op::kAppendOnClose: return need(argc_ == 2);
    case Op::kDelete: return need(argc_ == 1);
    case Op::kCompareSet: return need(argc_ == 3);
    case Op::kWait:
    case Op::kMultiGet: return need(argc_ >= 2 && argc_ <= maxKeys + 1);
    case Op::kCheck: return need(argc_ >= 1 && argc_ <= maxKeys);
    case Op::kNumKeys:
    case Op::kPing: return need(argc_ == 0);
    case Op::kMultiSet:
      return need(argc_ >= 2 && argc_ % 2 == 0 && argc_ <= 2 * maxKeys);
  }
  return fail("unknown opcode");
}

size_t FrameDecoder::argLimit(size_t index) const {
  if (role_ == Role::kClient) {
    return std::max(limits_.maxValueBytes, limits_.maxKeyBytes);
  }
  switch (requestArgKind(code_, index)) {
    case Arg::kInt: return 8;
    case Arg::kKey: return limits_.maxKeyBytes;
    case Arg::kValue: return limits_.maxValueBytes;
    case Arg::kLabel: return kMaxLabelBytes;
    case Arg::kMac: return kMaxMacBytes;
  }
  return 0;
}

bool FrameDecoder::startArg(uint32_t length) {
  size_t index = frame_.args.size();
  size_t limit = argLimit(index);
  if (length > limit) {
    return fail("argument " + std::to_string(index) + " of " +
                std::to_string(length) + " bytes exceeds the limit of " +
                std::to_string(limit));
  }
  // Decided by the argument's kind, not by its limit: a key limit that
  // happens to be 8 must not turn keys into integers.
  if (role_ == Role::kServer && requestArgKind(code_, index) == Arg::kInt &&
      length != 8) {
    return fail("argument " + std::to_string(index) +
                " must be an 8-byte integer");
  }
  payloadSeen_ += 4;
  if (payloadSeen_ + length > payload_) {
    return fail("argument lengths overrun the declared payload");
  }
  frame_.args.emplace_back();
  // Grow with the bytes that actually arrive, so a peer that declares a
  // large value and then stalls costs no memory.
  frame_.args.back().reserve(std::min<size_t>(length, 64 * 1024));
  argFill_ = length;
  return true;
}

void FrameDecoder::finishArgOrFrame(Result* result) {
  if (frame_.args.size() == argc_) {
    if (payloadSeen_ != payload_) {
      fail("declared payload is longer than its arguments");
      *result = Result::kError;
      return;
    }
    *result = Result::kFrame;
    state_ = State::kHeader;
    headerFill_ = 0;
    return;
  }
  state_ = State::kArgLength;
  lengthFill_ = 0;
}

size_t FrameDecoder::feed(const uint8_t* data, size_t n, Result* result) {
  *result = Result::kNeedMore;
  size_t used = 0;
  while (used < n || (state_ == State::kArgBody && argFill_ == 0)) {
    switch (state_) {
      case State::kError:
        *result = Result::kError;
        return used;
      case State::kHeader: {
        size_t take = std::min(kHeaderBytes - headerFill_, n - used);
        std::memcpy(header_ + headerFill_, data + used, take);
        headerFill_ += take;
        used += take;
        buffered_ += take;
        if (headerFill_ < kHeaderBytes) return used;
        frame_ = Frame();
        payloadSeen_ = 0;
        if (!checkHeader()) {
          *result = Result::kError;
          return used;
        }
        frame_.code = code_;
        frame_.args.reserve(std::min<uint32_t>(argc_, 64));
        if (argc_ == 0) {
          if (payload_ != 0) {
            fail("declared payload is longer than its arguments");
            *result = Result::kError;
            return used;
          }
          *result = Result::kFrame;
          headerFill_ = 0;
          return used;
        }
        state_ = State::kArgLength;
        lengthFill_ = 0;
        break;
      }
      case State::kArgLength: {
        size_t take = std::min<size_t>(4 - lengthFill_, n - used);
        std::memcpy(lengthBytes_ + lengthFill_, data + used, take);
        lengthFill_ += take;
        used += take;
        buffered_ += take;
        if (lengthFill_ < 4) return used;
        if (!startArg(getU32(lengthBytes_))) {
          *result = Result::kError;
          return used;
        }
        state_ = State::kArgBody;
        break;
      }
      case State::kArgBody: {
        size_t take = std::min(argFill_, n - used);
        Bytes& arg = frame_.args.back();
        arg.insert(arg.end(), data + used, data + used + take);
        argFill_ -= take;
        used += take;
        buffered_ += take;
        payloadSeen_ += take;
        if (argFill_ > 0) return used;
        finishArgOrFrame(result);
        if (*result != Result::kNeedMore) return used;
        break;
      }
    }
  }
  return used;
}

Frame FrameDecoder::take() {
  buffered_ = 0;
  return std::move(frame_);
}

FrameDecoder::Result decodeOne(Role role, const StoreLimits& limits,
                               const uint8_t* data, size_t n, Frame* frame,
                               std::string* error) {
  FrameDecoder decoder(role, limits);
  FrameDecoder::Result result = FrameDecoder::Result::kNeedMore;
  size_t used = decoder.feed(data, n, &result);
  if (result == FrameDecoder::Result::kFrame) {
    *frame = decoder.take();
    if (used != n) {
      *error = "trailing bytes after the frame";
      return FrameDecoder::Result::kError;
    }
    return result;
  }
  *error = result == FrameDecoder::Result::kError ? decoder.error()
                                                  : "truncated frame";
  return result;
}

}  // namespace meshcomm::store

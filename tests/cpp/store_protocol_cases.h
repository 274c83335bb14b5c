// Helpers of the store protocol's tests (store_protocol_test.cc: round
// trips and incremental decoding; store_protocol_errors_test.cc: every
// malformed frame): raw frames with chosen fields, small limits, and one
// well-formed request per opcode.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "store/protocol.h"

namespace meshcomm::store::test {

using Result = FrameDecoder::Result;

inline Bytes b(const std::string& s) { return Bytes(s.begin(), s.end()); }
inline Bytes filled(size_t n, uint8_t byte = 'x') { return Bytes(n, byte); }
inline uint8_t code(Op op) { return static_cast<uint8_t>(op); }
inline uint8_t code(Status s) { return static_cast<uint8_t>(s); }

// Small limits so that "over the limit" cases never allocate much.
inline StoreLimits smallLimits() {
  return {.maxKeyBytes = 16, .maxValueBytes = 64, .maxKeysPerRequest = 4, .maxClients = 8};
}

// The payload ceiling the decoder derives from the limits (see checkHeader).
inline uint64_t maxPayloadFor(const StoreLimits& l) {
  return l.maxValueBytes + l.maxKeysPerRequest * (l.maxKeyBytes + 16) + 4096;
}

// A raw 16-byte header with every field chosen by the test.
inline Bytes header(uint16_t magic, uint8_t version, uint8_t opcode, uint32_t argc,
             uint64_t payload) {
  Bytes h(kHeaderBytes);
  h[0] = static_cast<uint8_t>(magic);
  h[1] = static_cast<uint8_t>(magic >> 8);
  h[2] = version;
  h[3] = opcode;
  for (int i = 0; i < 4; ++i) h[4 + i] = static_cast<uint8_t>(argc >> (8 * i));
  for (int i = 0; i < 8; ++i) h[8 + i] = static_cast<uint8_t>(payload >> (8 * i));
  return h;
}

inline void putU32At(Bytes* wire, size_t offset, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*wire)[offset + i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void putU64At(Bytes* wire, size_t offset, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*wire)[offset + i] = static_cast<uint8_t>(v >> (8 * i));
}

struct Decoded {
  Result result = Result::kNeedMore;
  Frame frame;
  std::string error;
};

inline Decoded decode(Role role, const Bytes& wire, const StoreLimits& limits = StoreLimits{}) {
  Decoded d;
  d.result = decodeOne(role, limits, wire.data(), wire.size(), &d.frame, &d.error);
  return d;
}

// Expects a kError whose reason contains `reason`.
inline void expectRejected(Role role, const Bytes& wire, const StoreLimits& limits,
                    const std::string& reason) {
  Decoded d = decode(role, wire, limits);
  EXPECT_EQ(d.result, Result::kError) << "expected rejection for: " << reason;
  EXPECT_NE(d.error.find(reason), std::string::npos)
      << "error '" << d.error << "' does not mention '" << reason << "'";
}

// One well-formed request per opcode, with the argument shape the server
// expects. Every known opcode must appear here (checked below).
inline std::vector<std::pair<Op, std::vector<Bytes>>> validRequests() {
  return {
      {Op::kHello, {encodeU64(kHelloFlagLocal), b("label")}},
      {Op::kAuth, {filled(32, 0xAB)}},
      {Op::kSet, {b("key"), b("value")}},
      {Op::kGet, {encodeU64(1500), b("key")}},
      {Op::kAdd, {b("counter"), encodeI64(-42)}},
      {Op::kDelete, {b("key")}},
      {Op::kCompareSet, {b("key"), b("old"), b("new")}},
      {Op::kWait, {encodeU64(kNoTimeout), b("a"), b("b")}},
      {Op::kCheck, {b("a"), b("b"), b("c")}},
      {Op::kNumKeys, {}},
      {Op::kAppend, {b("key"), b("tail")}},
      {Op::kMultiGet, {encodeU64(0), b("a"), b("b"), b("c")}},
      {Op::kMultiSet, {b("a"), b("1"), b("b"), b("2")}},
      {Op::kPing, {}},
      {Op::kAppendOnClose, {b("alive/3"), b("dead:3;")}},
  };
}

}  // namespace meshcomm::store::test

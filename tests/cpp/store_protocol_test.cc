// Store wire protocol: encode/decode round trips and every malformed case.
//
// The decoder is the server's first line of defence, so each rule it
// enforces (magic, version, opcode, argument count per opcode, per-argument
// length limits, payload accounting) has a test that breaks exactly that rule
// and checks both the result and the reason the decoder gives.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "store/protocol.h"

namespace meshcomm::store {
namespace {

using Result = FrameDecoder::Result;

Bytes b(const std::string& s) { return Bytes(s.begin(), s.end()); }
Bytes filled(size_t n, uint8_t byte = 'x') { return Bytes(n, byte); }
uint8_t code(Op op) { return static_cast<uint8_t>(op); }
uint8_t code(Status s) { return static_cast<uint8_t>(s); }

// Small limits so that "over the limit" cases never allocate much.
StoreLimits smallLimits() {
  StoreLimits l;
  l.maxKeyBytes = 16;
  l.maxValueBytes = 64;
  l.maxKeysPerRequest = 4;
  l.maxClients = 8;
  return l;
}

// The payload ceiling the decoder derives from the limits (see checkHeader).
uint64_t maxPayloadFor(const StoreLimits& l) {
  return l.maxValueBytes + l.maxKeysPerRequest * (l.maxKeyBytes + 16) + 4096;
}

// A raw 16-byte header with every field chosen by the test.
Bytes header(uint16_t magic, uint8_t version, uint8_t opcode, uint32_t argc,
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

void putU32At(Bytes* wire, size_t offset, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*wire)[offset + i] = static_cast<uint8_t>(v >> (8 * i));
}
void putU64At(Bytes* wire, size_t offset, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*wire)[offset + i] = static_cast<uint8_t>(v >> (8 * i));
}

struct Decoded {
  Result result = Result::kNeedMore;
  Frame frame;
  std::string error;
};

Decoded decode(Role role, const Bytes& wire, const StoreLimits& limits = StoreLimits{}) {
  Decoded d;
  d.result = decodeOne(role, limits, wire.data(), wire.size(), &d.frame, &d.error);
  return d;
}

// Expects a kError whose reason contains `reason`.
void expectRejected(Role role, const Bytes& wire, const StoreLimits& limits,
                    const std::string& reason) {
  Decoded d = decode(role, wire, limits);
  EXPECT_EQ(d.result, Result::kError) << "expected rejection for: " << reason;
  EXPECT_NE(d.error.find(reason), std::string::npos)
      << "error '" << d.error << "' does not mention '" << reason << "'";
}

// One well-formed request per opcode, with the argument shape the server
// expects. Every known opcode must appear here (checked below).
std::vector<std::pair<Op, std::vector<Bytes>>> validRequests() {
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

TEST(StoreProtocol, RoundTripSet) {
  Bytes wire = encodeFrame(code(Op::kSet), {b("key"), b("value")});
  Frame f;
  std::string err;
  ASSERT_EQ(decodeOne(Role::kServer, StoreLimits{}, wire.data(), wire.size(), &f, &err),
            FrameDecoder::Result::kFrame) << err;
  EXPECT_EQ(f.code, code(Op::kSet));
  ASSERT_EQ(f.args.size(), 2u);
  EXPECT_EQ(asString(f.args[0]), "key");
  EXPECT_EQ(asString(f.args[1]), "value");
}

TEST(StoreProtocol, EncodedLayoutMatchesTheDocumentedFormat) {
  Bytes wire = encodeFrame(code(Op::kDelete), {b("ab")});
  Bytes expected = header(kMagic, kVersion, code(Op::kDelete), 1, 4 + 2);
  expected.insert(expected.end(), {2, 0, 0, 0, 'a', 'b'});
  EXPECT_EQ(wire, expected);
  // Magic "MS" little-endian: 'M' (0x4D) first.
  EXPECT_EQ(wire[0], 0x4D);
  EXPECT_EQ(wire[1], 0x53);
}

TEST(StoreProtocol, RequestTableCoversEveryKnownOpcode) {
  std::vector<bool> seen(256, false);
  for (const auto& [op, args] : validRequests()) seen[code(op)] = true;
  for (int c = 0; c < 256; ++c) {
    EXPECT_EQ(isKnownOp(static_cast<uint8_t>(c)), seen[static_cast<size_t>(c)])
        << "opcode " << c;
  }
}

TEST(StoreProtocol, RoundTripEveryOp) {
  for (const auto& [op, args] : validRequests()) {
    SCOPED_TRACE(opName(op));
    Bytes wire = encodeFrame(code(op), args);
    Decoded d = decode(Role::kServer, wire);
    ASSERT_EQ(d.result, Result::kFrame) << d.error;
    EXPECT_EQ(d.frame.code, code(op));
    EXPECT_EQ(d.frame.args, args);
  }
}

TEST(StoreProtocol, OpNamesAreDistinctAndKnown) {
  std::vector<std::string> names;
  for (const auto& [op, args] : validRequests()) {
    std::string name = opName(op);
    EXPECT_NE(name, "unknown");
    for (const auto& other : names) EXPECT_NE(name, other);
    names.push_back(name);
  }
  EXPECT_STREQ(opName(static_cast<Op>(0)), "unknown");
  EXPECT_STREQ(opName(static_cast<Op>(200)), "unknown");
}

TEST(StoreProtocol, RoundTripEveryStatus) {
  const Status all[] = {Status::kOk,         Status::kTimeout,      Status::kError,
                        Status::kBadRequest, Status::kAuthRequired, Status::kAuthFailed};
  for (Status s : all) {
    SCOPED_TRACE(static_cast<int>(s));
    EXPECT_TRUE(isKnownStatus(code(s)));
    std::vector<Bytes> args = {b("message"), b("k1"), Bytes{}};
    Decoded d = decode(Role::kClient, encodeFrame(code(s), args));
    ASSERT_EQ(d.result, Result::kFrame) << d.error;
    EXPECT_EQ(d.frame.code, code(s));
    EXPECT_EQ(d.frame.args, args);
    // A response with no arguments is also well formed.
    Decoded empty = decode(Role::kClient, encodeFrame(code(s), {}));
    ASSERT_EQ(empty.result, Result::kFrame) << empty.error;
    EXPECT_TRUE(empty.frame.args.empty());
  }
  int known = 0;
  for (int c = 0; c < 256; ++c) known += isKnownStatus(static_cast<uint8_t>(c)) ? 1 : 0;
  EXPECT_EQ(known, 6);
}

TEST(StoreProtocol, IntegerHelpers) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{0x0102030405060708}, kNoTimeout}) {
    uint64_t out = 7;
    ASSERT_TRUE(decodeU64(encodeU64(v), &out));
    EXPECT_EQ(out, v);
  }
  for (int64_t v : {INT64_MIN, int64_t{-1}, int64_t{0}, INT64_MAX}) {
    int64_t out = 7;
    ASSERT_TRUE(decodeI64(encodeI64(v), &out));
    EXPECT_EQ(out, v);
  }
  EXPECT_EQ(encodeU64(1), (Bytes{1, 0, 0, 0, 0, 0, 0, 0}));  // little-endian
  uint64_t u = 99;
  EXPECT_FALSE(decodeU64(Bytes(7), &u));
  EXPECT_FALSE(decodeU64(Bytes(9), &u));
  EXPECT_FALSE(decodeU64(Bytes{}, &u));
  EXPECT_EQ(u, 99u);
  int64_t i = 99;
  EXPECT_FALSE(decodeI64(Bytes(4), &i));
  EXPECT_EQ(i, 99);
}

TEST(StoreProtocol, ZeroLengthArguments) {
  // An empty key and an empty value are legal.
  Decoded set = decode(Role::kServer, encodeFrame(code(Op::kSet), {Bytes{}, Bytes{}}));
  ASSERT_EQ(set.result, Result::kFrame) << set.error;
  ASSERT_EQ(set.frame.args.size(), 2u);
  EXPECT_TRUE(set.frame.args[0].empty());
  EXPECT_TRUE(set.frame.args[1].empty());

  Decoded cas = decode(Role::kServer,
                       encodeFrame(code(Op::kCompareSet), {b("k"), Bytes{}, Bytes{}}));
  ASSERT_EQ(cas.result, Result::kFrame) << cas.error;
  EXPECT_EQ(cas.frame.args, (std::vector<Bytes>{b("k"), Bytes{}, Bytes{}}));

  // A frame that ends in a zero-length argument completes without more input.
  FrameDecoder dec(Role::kServer, StoreLimits{});
  Bytes wire = encodeFrame(code(Op::kAppend), {b("key"), Bytes{}});
  Result r;
  EXPECT_EQ(dec.feed(wire.data(), wire.size(), &r), wire.size());
  ASSERT_EQ(r, Result::kFrame);
  EXPECT_EQ(dec.take().args, (std::vector<Bytes>{b("key"), Bytes{}}));
}

TEST(StoreProtocol, MaxSizeKeyIsAcceptedAndOneMoreIsRejected) {
  StoreLimits limits;  // the defaults: a 4096-byte key limit
  Bytes key(limits.maxKeyBytes, 'k');
  Decoded ok = decode(Role::kServer, encodeFrame(code(Op::kSet), {key, b("v")}), limits);
  ASSERT_EQ(ok.result, Result::kFrame) << ok.error;
  EXPECT_EQ(ok.frame.args[0], key);

  key.push_back('k');
  expectRejected(Role::kServer, encodeFrame(code(Op::kSet), {key, b("v")}), limits,
                 "argument 0 of 4097 bytes exceeds the limit of 4096");
}

TEST(StoreProtocol, MaxSizeValueIsAccepted) {
  StoreLimits limits = smallLimits();
  Bytes value = filled(limits.maxValueBytes);
  Decoded d = decode(Role::kServer, encodeFrame(code(Op::kSet), {b("k"), value}), limits);
  ASSERT_EQ(d.result, Result::kFrame) << d.error;
  EXPECT_EQ(d.frame.args[1], value);
}

TEST(StoreProtocol, MaxKeysPerRequestIsAccepted) {
  StoreLimits limits = smallLimits();  // 4 keys per request
  std::vector<Bytes> check(limits.maxKeysPerRequest, b("k"));
  EXPECT_EQ(decode(Role::kServer, encodeFrame(code(Op::kCheck), check), limits).result,
            Result::kFrame);
  std::vector<Bytes> wait{encodeU64(5)};
  wait.insert(wait.end(), limits.maxKeysPerRequest, b("k"));
  EXPECT_EQ(decode(Role::kServer, encodeFrame(code(Op::kWait), wait), limits).result,
            Result::kFrame);
  EXPECT_EQ(decode(Role::kServer, encodeFrame(code(Op::kMultiGet), wait), limits).result,
            Result::kFrame);
  std::vector<Bytes> mset;
  for (size_t i = 0; i < limits.maxKeysPerRequest; ++i) {
    mset.push_back(b("k"));
    mset.push_back(b("v"));
  }
  EXPECT_EQ(decode(Role::kServer, encodeFrame(code(Op::kMultiSet), mset), limits).result,
            Result::kFrame);
}

// Limits equal to the width of an integer argument must not be mistaken for
// integer arguments: with an 8-byte key limit, a 3-byte key is still a key.
TEST(StoreProtocol, EightByteLimitsStillAcceptShorterKeysAndValues) {
  StoreLimits limits = smallLimits();
  limits.maxKeyBytes = 8;
  limits.maxValueBytes = 8;
  Decoded set = decode(Role::kServer, encodeFrame(code(Op::kSet), {b("abc"), b("xy")}),
                       limits);
  EXPECT_EQ(set.result, Result::kFrame) << set.error;
  Decoded get = decode(Role::kServer,
                       encodeFrame(code(Op::kGet), {encodeU64(1), b("abc")}), limits);
  EXPECT_EQ(get.result, Result::kFrame) << get.error;
  Decoded del = decode(Role::kServer, encodeFrame(code(Op::kDelete), {Bytes{}}), limits);
  EXPECT_EQ(del.result, Result::kFrame) << del.error;
  // The integer arguments of the same requests are still checked.
  expectRejected(Role::kServer, encodeFrame(code(Op::kGet), {Bytes(3), b("abc")}), limits,
                 "must be an 8-byte integer");
}

TEST(StoreProtocol, IncrementalFeedingOneByteAtATime) {
  FrameDecoder dec(Role::kServer, StoreLimits{});
  for (const auto& [op, args] : validRequests()) {
    SCOPED_TRACE(opName(op));
    Bytes wire = encodeFrame(code(op), args);
    for (size_t i = 0; i < wire.size(); ++i) {
      Result r = Result::kError;
      ASSERT_EQ(dec.feed(&wire[i], 1, &r), 1u) << "byte " << i;
      if (i + 1 < wire.size()) {
        ASSERT_EQ(r, Result::kNeedMore) << "byte " << i << " of " << wire.size();
        EXPECT_EQ(dec.bufferedBytes(), i + 1);
      } else {
        ASSERT_EQ(r, Result::kFrame);
      }
    }
    // The same decoder goes on to the next frame: state resets after take().
    Frame f = dec.take();
    EXPECT_EQ(f.code, code(op));
    EXPECT_EQ(f.args, args);
    EXPECT_EQ(dec.bufferedBytes(), 0u);
  }
}

TEST(StoreProtocol, IncrementalFeedingInUnevenChunks) {
  Bytes wire = encodeFrame(code(Op::kMultiSet), {b("alpha"), filled(300), b("b"), Bytes{}});
  for (size_t chunk : std::vector<size_t>{2, 3, 5, 7, 13, 64}) {
    SCOPED_TRACE(chunk);
    FrameDecoder dec(Role::kServer, StoreLimits{});
    size_t off = 0;
    Result r = Result::kNeedMore;
    while (off < wire.size()) {
      size_t n = std::min(chunk, wire.size() - off);
      size_t used = dec.feed(wire.data() + off, n, &r);
      ASSERT_EQ(used, n);
      off += used;
      if (off < wire.size()) {
        ASSERT_EQ(r, Result::kNeedMore);
      }
    }
    ASSERT_EQ(r, Result::kFrame);
    EXPECT_EQ(dec.take().args[1], filled(300));
  }
}

TEST(StoreProtocol, EmptyFeedNeedsMore) {
  FrameDecoder dec(Role::kServer, StoreLimits{});
  Result r = Result::kError;
  EXPECT_EQ(dec.feed(nullptr, 0, &r), 0u);
  EXPECT_EQ(r, Result::kNeedMore);
}

TEST(StoreProtocol, TwoFramesBackToBack) {
  Bytes first = encodeFrame(code(Op::kSet), {b("k"), b("v")});
  Bytes second = encodeFrame(code(Op::kPing), {});
  Bytes third = encodeFrame(code(Op::kGet), {encodeU64(3), b("k")});
  Bytes wire = first;
  wire.insert(wire.end(), second.begin(), second.end());
  wire.insert(wire.end(), third.begin(), third.end());

  FrameDecoder dec(Role::kServer, StoreLimits{});
  Result r;
  size_t used = dec.feed(wire.data(), wire.size(), &r);
  // The decoder stops right after the first frame, leaving the rest.
  ASSERT_EQ(r, Result::kFrame);
  ASSERT_EQ(used, first.size());
  EXPECT_EQ(dec.take().code, code(Op::kSet));

  size_t used2 = dec.feed(wire.data() + used, wire.size() - used, &r);
  ASSERT_EQ(r, Result::kFrame);
  ASSERT_EQ(used2, second.size());
  EXPECT_EQ(dec.take().code, code(Op::kPing));
  used += used2;

  size_t used3 = dec.feed(wire.data() + used, wire.size() - used, &r);
  ASSERT_EQ(r, Result::kFrame);
  ASSERT_EQ(used3, third.size());
  Frame f = dec.take();
  EXPECT_EQ(f.code, code(Op::kGet));
  EXPECT_EQ(asString(f.args[1]), "k");

  // decodeOne insists on exactly one frame.
  Decoded d = decode(Role::kServer, wire);
  EXPECT_EQ(d.result, Result::kError);
  EXPECT_EQ(d.error, "trailing bytes after the frame");
}

TEST(StoreProtocol, TrailingBytesAreRejected) {
  Bytes wire = encodeFrame(code(Op::kSet), {b("k"), b("v")});
  wire.push_back(0);
  Decoded d = decode(Role::kServer, wire);
  EXPECT_EQ(d.result, Result::kError);
  EXPECT_EQ(d.error, "trailing bytes after the frame");
}

TEST(StoreProtocol, EveryTruncationNeedsMore) {
  for (const auto& [op, args] : validRequests()) {
    SCOPED_TRACE(opName(op));
    Bytes wire = encodeFrame(code(op), args);
    for (size_t n = 0; n < wire.size(); ++n) {
      Frame f;
      std::string err;
      ASSERT_EQ(decodeOne(Role::kServer, StoreLimits{}, wire.data(), n, &f, &err),
                Result::kNeedMore)
          << "prefix of " << n << " bytes";
      EXPECT_EQ(err, "truncated frame");
    }
  }
  Bytes resp = encodeFrame(code(Status::kOk), {b("value")});
  for (size_t n = 0; n < resp.size(); ++n) {
    Frame f;
    std::string err;
    EXPECT_EQ(decodeOne(Role::kClient, StoreLimits{}, resp.data(), n, &f, &err),
              Result::kNeedMore);
  }
}

TEST(StoreProtocol, BadMagic) {
  Bytes wire = encodeFrame(code(Op::kPing), {});
  wire[0] ^= 0xFF;
  expectRejected(Role::kServer, wire, StoreLimits{}, "bad magic");
  wire = encodeFrame(code(Op::kPing), {});
  wire[1] = 0;
  expectRejected(Role::kServer, wire, StoreLimits{}, "bad magic");
  // Byte-swapped magic (a big-endian writer) is not accepted either.
  expectRejected(Role::kClient, header(0x4D53, kVersion, code(Status::kOk), 0, 0),
                 StoreLimits{}, "bad magic");
  // An HTTP request is the classic wrong-port mistake.
  Bytes http = b("GET / HTTP/1.1\r\n\r\n");
  expectRejected(Role::kServer, http, StoreLimits{}, "bad magic");
}

TEST(StoreProtocol, WrongVersion) {
  for (uint8_t v : {uint8_t{0}, uint8_t{2}, uint8_t{255}}) {
    Bytes wire = header(kMagic, v, code(Op::kPing), 0, 0);
    expectRejected(Role::kServer, wire, StoreLimits{},
                   "unsupported protocol version " + std::to_string(v));
    expectRejected(Role::kClient, header(kMagic, v, code(Status::kOk), 0, 0),
                   StoreLimits{}, "unsupported protocol version");
  }
}

TEST(StoreProtocol, UnknownOpcode) {
  for (uint8_t c : {uint8_t{0}, uint8_t{16}, uint8_t{0x7F}, code(Status::kOk), uint8_t{255}}) {
    expectRejected(Role::kServer, header(kMagic, kVersion, c, 0, 0), StoreLimits{},
                   "unknown opcode " + std::to_string(c));
  }
}

TEST(StoreProtocol, ClientRoleRejectsUnknownStatus) {
  for (uint8_t c : {uint8_t{0}, code(Op::kSet), uint8_t{0x7F}, uint8_t{0x86}, uint8_t{0xFF}}) {
    expectRejected(Role::kClient, encodeFrame(c, {b("m")}), StoreLimits{},
                   "unknown response status " + std::to_string(c));
  }
}

TEST(StoreProtocol, ClientRoleLimitsResponses) {
  StoreLimits limits = smallLimits();
  // At most maxKeysPerRequest + 2 arguments (a timeout lists its message and
  // the missing keys).
  std::vector<Bytes> args(limits.maxKeysPerRequest + 2, b("v"));
  EXPECT_EQ(decode(Role::kClient, encodeFrame(code(Status::kTimeout), args), limits).result,
            Result::kFrame);
  args.push_back(b("v"));
  expectRejected(Role::kClient, encodeFrame(code(Status::kTimeout), args), limits,
                 "too many response arguments");
  // No argument longer than the larger of the key and value limits.
  EXPECT_EQ(decode(Role::kClient, encodeFrame(code(Status::kOk), {filled(64)}), limits).result,
            Result::kFrame);
  expectRejected(Role::kClient, encodeFrame(code(Status::kOk), {filled(65)}), limits,
                 "exceeds the limit of 64");
}

TEST(StoreProtocol, WrongArgumentCountForEachOp) {
  StoreLimits limits = smallLimits();
  const size_t k = limits.maxKeysPerRequest;
  struct Case {
    Op op;
    std::vector<size_t> badCounts;
  };
  const std::vector<Case> cases = {
      {Op::kHello, {0, 1, 3}},
      {Op::kAuth, {0, 2}},
      {Op::kSet, {0, 1, 3}},
      {Op::kGet, {0, 1, 3}},
      {Op::kAdd, {0, 1, 3}},
      {Op::kDelete, {0, 2}},
      {Op::kCompareSet, {0, 2, 4}},
      {Op::kWait, {0, 1, k + 2}},
      {Op::kCheck, {0, k + 1}},
      {Op::kNumKeys, {1}},
      {Op::kAppend, {0, 1, 3}},
      {Op::kMultiGet, {0, 1, k + 2}},
      {Op::kMultiSet, {0, 1, 3, 2 * k + 2}},
      {Op::kPing, {1, 2}},
      {Op::kAppendOnClose, {0, 1, 3}},
  };
  ASSERT_EQ(cases.size(), validRequests().size());
  for (const auto& c : cases) {
    for (size_t argc : c.badCounts) {
      SCOPED_TRACE(std::string(opName(c.op)) + " with " + std::to_string(argc) + " args");
      // 8-byte arguments so the count is the only thing wrong.
      std::vector<Bytes> args(argc, Bytes(8, '1'));
      Bytes wire = encodeFrame(code(c.op), args);
      if (argc == 0) {
        // The payload check (argc*4 <= payload) passes trivially; the count
        // check must still reject it.
        ASSERT_EQ(wire.size(), kHeaderBytes);
      }
      expectRejected(Role::kServer, wire, limits,
                     "wrong argument count " + std::to_string(argc) + " for " +
                         opName(c.op));
    }
  }
}

TEST(StoreProtocol, KeyLongerThanTheLimitInEveryKeyPosition) {
  StoreLimits limits = smallLimits();
  Bytes longKey(limits.maxKeyBytes + 1, 'k');
  Bytes okKey(limits.maxKeyBytes, 'k');
  struct Case {
    Op op;
    std::vector<Bytes> args;
    size_t badIndex;
  };
  const std::vector<Case> cases = {
      {Op::kSet, {longKey, b("v")}, 0},
      {Op::kGet, {encodeU64(1), longKey}, 1},
      {Op::kAdd, {longKey, encodeI64(1)}, 0},
      {Op::kDelete, {longKey}, 0},
      {Op::kCompareSet, {longKey, b("a"), b("b")}, 0},
      {Op::kWait, {encodeU64(1), okKey, longKey}, 2},
      {Op::kCheck, {okKey, okKey, longKey}, 2},
      {Op::kAppend, {longKey, b("v")}, 0},
      {Op::kMultiGet, {encodeU64(1), longKey}, 1},
      {Op::kMultiSet, {okKey, b("v"), longKey, b("v")}, 2},
      {Op::kAppendOnClose, {longKey, b("v")}, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(opName(c.op));
    expectRejected(Role::kServer, encodeFrame(code(c.op), c.args), limits,
                   "argument " + std::to_string(c.badIndex) + " of 17 bytes exceeds the limit of 16");
  }
}

TEST(StoreProtocol, ValueLongerThanTheLimitInEveryValuePosition) {
  StoreLimits limits = smallLimits();
  Bytes big = filled(limits.maxValueBytes + 1);
  struct Case {
    Op op;
    std::vector<Bytes> args;
    size_t badIndex;
  };
  const std::vector<Case> cases = {
      {Op::kSet, {b("k"), big}, 1},
      {Op::kAppend, {b("k"), big}, 1},
      {Op::kCompareSet, {b("k"), big, b("d")}, 1},
      {Op::kCompareSet, {b("k"), b("e"), big}, 2},
      {Op::kMultiSet, {b("a"), b("v"), b("b"), big}, 3},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(opName(c.op));
    expectRejected(Role::kServer, encodeFrame(code(c.op), c.args), limits,
                   "argument " + std::to_string(c.badIndex) + " of 65 bytes exceeds the limit of 64");
  }
}

TEST(StoreProtocol, FixedArgumentLimits) {
  // Labels, on-close values and MACs have ceilings independent of
  // StoreLimits.
  const size_t label = kMaxOnCloseValueBytes;
  const std::string over = "argument 1 of " + std::to_string(label + 1) +
                           " bytes exceeds the limit of " + std::to_string(label);
  Decoded ok = decode(Role::kServer,
                      encodeFrame(code(Op::kHello), {encodeU64(0), filled(label)}));
  EXPECT_EQ(ok.result, Result::kFrame) << ok.error;
  expectRejected(Role::kServer,
                 encodeFrame(code(Op::kHello), {encodeU64(0), filled(label + 1)}),
                 StoreLimits{}, over);
  Decoded onClose = decode(Role::kServer,
                           encodeFrame(code(Op::kAppendOnClose), {b("k"), filled(label)}));
  EXPECT_EQ(onClose.result, Result::kFrame) << onClose.error;
  expectRejected(Role::kServer,
                 encodeFrame(code(Op::kAppendOnClose), {b("k"), filled(label + 1)}),
                 StoreLimits{}, over);
  EXPECT_EQ(decode(Role::kServer, encodeFrame(code(Op::kAuth), {filled(64)})).result,
            Result::kFrame);
  expectRejected(Role::kServer, encodeFrame(code(Op::kAuth), {filled(65)}), StoreLimits{},
                 "argument 0 of 65 bytes exceeds the limit of 64");
}

TEST(StoreProtocol, IntegerArgumentsMustBeEightBytes) {
  struct Case {
    Op op;
    std::vector<Bytes> args;
    size_t index;
  };
  std::vector<Case> cases;
  for (size_t n : {0u, 1u, 4u, 7u}) {
    cases.push_back({Op::kHello, {Bytes(n), b("l")}, 0});
    cases.push_back({Op::kGet, {Bytes(n), b("k")}, 0});
    cases.push_back({Op::kAdd, {b("k"), Bytes(n)}, 1});
    cases.push_back({Op::kWait, {Bytes(n), b("k")}, 0});
    cases.push_back({Op::kMultiGet, {Bytes(n), b("k")}, 0});
  }
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(opName(c.op)) + " int of " + std::to_string(c.args[c.index].size()));
    expectRejected(Role::kServer, encodeFrame(code(c.op), c.args), StoreLimits{},
                   "argument " + std::to_string(c.index) + " must be an 8-byte integer");
  }
  // Longer than 8 is over the integer's limit.
  expectRejected(Role::kServer, encodeFrame(code(Op::kGet), {Bytes(9), b("k")}),
                 StoreLimits{}, "argument 0 of 9 bytes exceeds the limit of 8");
  expectRejected(Role::kServer, encodeFrame(code(Op::kAdd), {b("k"), Bytes(16)}),
                 StoreLimits{}, "argument 1 of 16 bytes exceeds the limit of 8");
}

TEST(StoreProtocol, PayloadThatOverrunsItsArguments) {
  // The declared payload is one byte short of what the arguments need.
  Bytes wire = encodeFrame(code(Op::kSet), {b("key"), b("value")});
  uint64_t payload = wire.size() - kHeaderBytes;
  putU64At(&wire, 8, payload - 1);
  expectRejected(Role::kServer, wire, StoreLimits{},
                 "argument lengths overrun the declared payload");

  // An argument length that alone runs past the payload.
  wire = encodeFrame(code(Op::kDelete), {b("abc")});
  putU32At(&wire, kHeaderBytes, 4);
  expectRejected(Role::kServer, wire, StoreLimits{},
                 "argument lengths overrun the declared payload");

  // The second argument's length prefix still fits, but its one byte does
  // not.
  Bytes two = header(kMagic, kVersion, code(Op::kSet), 2, 9);
  two.insert(two.end(), {1, 0, 0, 0, 'k', 1, 0, 0, 0});
  expectRejected(Role::kServer, two, StoreLimits{},
                 "argument lengths overrun the declared payload");
}

TEST(StoreProtocol, PayloadLongerThanItsArguments) {
  // One byte more declared than the arguments use: caught when the last
  // argument completes, so trailing junk never becomes the next frame.
  Bytes wire = encodeFrame(code(Op::kSet), {b("key"), b("value")});
  uint64_t payload = wire.size() - kHeaderBytes;
  putU64At(&wire, 8, payload + 1);
  wire.push_back(0);
  expectRejected(Role::kServer, wire, StoreLimits{},
                 "declared payload is longer than its arguments");

  // A zero-argument frame must declare an empty payload.
  Bytes ping = header(kMagic, kVersion, code(Op::kPing), 0, 4);
  ping.insert(ping.end(), {0, 0, 0, 0});
  expectRejected(Role::kServer, ping, StoreLimits{},
                 "declared payload is longer than its arguments");
  expectRejected(Role::kClient, header(kMagic, kVersion, code(Status::kOk), 0, 1),
                 StoreLimits{}, "declared payload is longer than its arguments");
}

TEST(StoreProtocol, PayloadOverTheLimit) {
  StoreLimits limits = smallLimits();
  const uint64_t max = maxPayloadFor(limits);
  // Exactly at the ceiling passes the header check (it then needs more).
  Decoded at = decode(Role::kServer, header(kMagic, kVersion, code(Op::kSet), 2, max), limits);
  EXPECT_EQ(at.result, Result::kNeedMore) << at.error;
  for (uint64_t payload : {max + 1, uint64_t{1} << 40, UINT64_MAX}) {
    SCOPED_TRACE(payload);
    // The header alone is rejected: no byte of the payload is awaited, so
    // nothing is allocated for it.
    Bytes wire = header(kMagic, kVersion, code(Op::kSet), 2, payload);
    expectRejected(Role::kServer, wire, limits,
                   "frame payload of " + std::to_string(payload) +
                       " bytes exceeds the limit of " + std::to_string(max));
    expectRejected(Role::kClient, header(kMagic, kVersion, code(Status::kOk), 1, payload),
                   limits, "exceeds the limit");
  }
}

TEST(StoreProtocol, ArgumentCountThatCannotFitThePayload) {
  // Each argument needs at least its 4-byte length.
  expectRejected(Role::kServer, header(kMagic, kVersion, code(Op::kCompareSet), 3, 8),
                 StoreLimits{}, "argument count 3 does not fit the payload length");
  expectRejected(Role::kServer, header(kMagic, kVersion, code(Op::kCheck), UINT32_MAX, 4096),
                 StoreLimits{}, "does not fit the payload length");
  expectRejected(Role::kClient, header(kMagic, kVersion, code(Status::kOk), 1000, 100),
                 StoreLimits{}, "argument count 1000 does not fit the payload length");
  // Exactly 4 bytes per argument fits: three empty arguments.
  Bytes ok = header(kMagic, kVersion, code(Op::kCompareSet), 3, 12);
  ok.resize(ok.size() + 12, 0);
  EXPECT_EQ(decode(Role::kServer, ok).result, Result::kFrame);
}

TEST(StoreProtocol, DecoderStaysFailedAfterAnError) {
  FrameDecoder dec(Role::kServer, StoreLimits{});
  Bytes bad = header(0x0000, kVersion, code(Op::kPing), 0, 0);
  Result r;
  dec.feed(bad.data(), bad.size(), &r);
  ASSERT_EQ(r, Result::kError);
  std::string why = dec.error();
  EXPECT_NE(why.find("bad magic"), std::string::npos);
  // Valid input afterwards does not resurrect it.
  Bytes good = encodeFrame(code(Op::kPing), {});
  EXPECT_EQ(dec.feed(good.data(), good.size(), &r), 0u);
  EXPECT_EQ(r, Result::kError);
  EXPECT_EQ(dec.error(), why);
}

TEST(StoreProtocol, ErrorStopsConsumingAtTheOffendingField) {
  // The decoder reports how far it read, so a server never interprets bytes
  // past the violation.
  StoreLimits limits = smallLimits();
  Bytes wire = encodeFrame(code(Op::kSet), {filled(17), b("v")});
  FrameDecoder dec(Role::kServer, limits);
  Result r;
  size_t used = dec.feed(wire.data(), wire.size(), &r);
  EXPECT_EQ(r, Result::kError);
  EXPECT_EQ(used, kHeaderBytes + 4);  // the header and the bad length
}

TEST(StoreProtocol, ServerRoleRejectsResponsesAndClientRoleRejectsRequests) {
  expectRejected(Role::kServer, encodeFrame(code(Status::kOk), {}), StoreLimits{},
                 "unknown opcode 128");
  expectRejected(Role::kClient, encodeFrame(code(Op::kPing), {}), StoreLimits{},
                 "unknown response status 14");
}

}  // namespace
}  // namespace meshcomm::store

// Store wire protocol: encode/decode round trips, limits at their edge,
// and frames fed in pieces. Every malformed case is in
// store_protocol_errors_test.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "store/protocol.h"
#include "store_protocol_cases.h"

namespace meshcomm::store {
namespace {

using namespace meshcomm::store::test;


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

}  // namespace
}  // namespace meshcomm::store

// Store wire protocol: every malformed case. The decoder is the server's
// first line of defence, so each rule it enforces (magic, version, opcode,
// argument count per opcode, per-argument length limits, payload
// accounting) has a test that breaks exactly that rule and checks both the
// result and the reason the decoder gives. Round trips:
// store_protocol_test.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "store/protocol.h"
#include "store_protocol_cases.h"

namespace meshcomm::store {
namespace {

using namespace meshcomm::store::test;

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

// Store wire protocol: encode/decode round trips and every malformed case.
#include <gtest/gtest.h>

#include "store/protocol.h"

namespace meshcomm::store {
namespace {

Bytes b(const std::string& s) { return Bytes(s.begin(), s.end()); }

TEST(StoreProtocol, RoundTripSet) {
  Bytes wire = encodeFrame(static_cast<uint8_t>(Op::kSet), {b("key"), b("value")});
  Frame f;
  std::string err;
  ASSERT_EQ(decodeOne(Role::kServer, StoreLimits{}, wire.data(), wire.size(), &f, &err),
            FrameDecoder::Result::kFrame) << err;
  EXPECT_EQ(f.code, static_cast<uint8_t>(Op::kSet));
  ASSERT_EQ(f.args.size(), 2u);
  EXPECT_EQ(asString(f.args[0]), "key");
  EXPECT_EQ(asString(f.args[1]), "value");
}

}  // namespace
}  // namespace meshcomm::store

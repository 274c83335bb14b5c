// This host's interfaces and the address choice (common/interfaces.h).
#include "common/interfaces.h"

#include <gtest/gtest.h>

#include "meshcomm/error.h"

namespace meshcomm {
namespace {

TEST(Interfaces, LoopbackIsListedWithItsAddress) {
  bool found = false;
  for (const auto& i : interfaceAddresses()) found |= i.name == "lo" && i.address == "127.0.0.1";
  EXPECT_TRUE(found) << describeInterfaces(interfaceAddresses());
  EXPECT_EQ(addressOfInterface("lo"), "127.0.0.1");
}

TEST(Interfaces, AnUnknownInterfaceIsRejectedNamingTheOnesThereAre) {
  try {
    addressOfInterface("no-such-if0");
    FAIL() << "accepted an interface that does not exist";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-if0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lo 127.0.0.1"), std::string::npos) << e.what();
  }
}

TEST(Interfaces, TheRouteToALocalAddressLeavesThroughLoopback) {
  InterfaceAddress chosen = interfaceTowards("127.0.0.1");
  EXPECT_EQ(chosen.name, "lo");
  EXPECT_EQ(chosen.address, "127.0.0.1");
}

TEST(Interfaces, AnUnresolvableHostIsInvalid) {
  EXPECT_THROW(interfaceTowards("no-such-host.invalid"), InvalidArgument);
}

TEST(Interfaces, DescribeListsNameAndAddress) {
  EXPECT_EQ(describeInterfaces({{"eth0", "10.0.0.2"}, {"lo", "127.0.0.1"}}),
            "eth0 10.0.0.2, lo 127.0.0.1");
  EXPECT_EQ(describeInterfaces({}), "none");
}

}  // namespace
}  // namespace meshcomm

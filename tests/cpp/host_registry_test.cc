// The registry of on-host kinds (host/registry.h): a domain finds its
// kind's collectives by name, and a kind nobody registered is an error that
// says where kinds are registered.
#include "host/registry.h"

#include <gtest/gtest.h>

#include <string>

#include "meshcomm/error.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm {
namespace {

// A domain that is only a kind's name: the registry asks nothing else.
class NamedDomain final : public HostDomain {
 public:
  explicit NamedDomain(const char* kind) : kind_(kind) {}
  const char* kind() const override { return kind_; }
  int localRank() const override { return 0; }
  int localSize() const override { return 1; }
  int groupRank(int local) const override { return local; }
  void announce(uint64_t, const MessageSignature&) override {}
  void abort(wire::AbortReason, const std::string&) noexcept override {}
  std::exception_ptr abortError() const override { return nullptr; }
  void throwIfAborted() const override {}

 private:
  const char* kind_;
};

TEST(HostRegistry, AnUnregisteredKindIsAnErrorNamingIt) {
  NamedDomain domain("nowhere");
  try {
    host::collectivesFor(domain);
    FAIL() << "an unregistered kind found collectives";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'nowhere'"), std::string::npos) << what;
    EXPECT_NE(what.find("src/host/registry.cc"), std::string::npos) << what;
  }
}

TEST(HostRegistry, TheSharedMemoryKindIsRegisteredUnderItsDomainsName) {
  EXPECT_STREQ(ShmDomain::kKind, "shm");
  // Its collectives offer the agreement's records a cell each.
  NamedDomain domain(ShmDomain::kKind);
  EXPECT_EQ(host::collectivesFor(domain).recordBytes(), ShmDomain::kCellBytes);
}

}  // namespace
}  // namespace meshcomm

// The transports a multi-process job can run on, as test parameters.
//
// A TransportCase names a transport and a layout of ranks:
//   shm           every rank on this host, collectives on shared memory;
//   tcp           the same ranks with MESHCOMM_SHM=0, so every byte goes
//                 through TcpTransport;
//   hierarchical  the ranks spread over emulated hosts (MESHCOMM_HOST_ID per
//                 rank): shared memory within each, TCP between their
//                 leaders.
// The library picks its transport from the environment, so a case is an
// environment for the job's children (withTransport). Each case also sets
// MESHCOMM_SHM explicitly, so a variable left in the suite's own
// environment cannot turn an shm case into a tcp one behind its name.
//
// The name printer (TransportCaseName) makes the transport part of every
// test's name: `Conformance/EveryCollective.DtypesOpsSizes/tcp_P5`.
//
// Thread-safety: constants and pure functions.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "collective_harness.h"
#include "expect_world.h"
#include "scoped_env.h"

namespace meshcomm::test {

enum class TransportKind { kShm, kTcp, kHierarchical };

struct TransportCase {
  TransportKind kind = TransportKind::kShm;
  int p = 1;
  // hierarchical: the emulated host of each rank, and what the layout
  // looks like ("3x2": three hosts of two ranks).
  int (*hostOf)(int rank) = nullptr;
  const char* layout = "";

  std::string name() const {
    switch (kind) {
      case TransportKind::kShm: return "shm_P" + std::to_string(p);
      case TransportKind::kTcp: return "tcp_P" + std::to_string(p);
      case TransportKind::kHierarchical: return std::string("hierarchical_") + layout;
    }
    return "unknown";
  }
};

constexpr TransportCase shmCase(int p) { return {TransportKind::kShm, p, nullptr, ""}; }
constexpr TransportCase tcpCase(int p) { return {TransportKind::kTcp, p, nullptr, ""}; }

// Emulated-host layouts: blocks of two (three hosts), interleaved (ranks
// 0,2,4 and 1,3), one lone rank on a host of its own ({0,1,2} and {3}),
// and two hosts of two.
inline constexpr TransportCase kHierarchical3x2{
    TransportKind::kHierarchical, 6, [](int r) { return r / 2; }, "3x2"};
inline constexpr TransportCase kHierarchicalInterleaved{
    TransportKind::kHierarchical, 5, [](int r) { return r % 2; }, "3and2_interleaved"};
inline constexpr TransportCase kHierarchicalLoneRank{
    TransportKind::kHierarchical, 4, [](int r) { return r == 3 ? 1 : 0; }, "3and1"};
inline constexpr TransportCase kHierarchical2x2{
    TransportKind::kHierarchical, 4, [](int r) { return r / 2; }, "2x2"};

// `options` with the environment that puts a job on `c`'s transport.
inline JobOptions withTransport(const TransportCase& c, JobOptions options = {}) {
  options.env.emplace_back("MESHCOMM_SHM", c.kind == TransportKind::kTcp ? "0" : "1");
  if (c.kind == TransportKind::kHierarchical) {
    // After the test's own per-rank environment, if it has one.
    auto hostOf = c.hostOf;
    auto own = std::move(options.rankEnv);
    options.rankEnv = [hostOf, own](int rank) {
      std::vector<std::pair<std::string, std::string>> env;
      if (own) env = own(rank);
      env.emplace_back("MESHCOMM_HOST_ID", "emulated-host-" + std::to_string(hostOf(rank)));
      return env;
    };
  }
  return options;
}

// Runs `body` on every rank of a job on `c`'s transport and expects every
// rank to exit well.
inline void expectJobOk(const TransportCase& c, const JobOptions& options, const RankBody& body) {
  expectWorldOk(c.p, withTransport(c, options), body);
}

struct TransportCaseName {
  std::string operator()(const ::testing::TestParamInfo<TransportCase>& info) const {
    return info.param.name();
  }
};

// So a failing parameterised test prints its case by name.
inline void PrintTo(const TransportCase& c, std::ostream* os) { *os << c.name(); }

// A fixture for tests that run twice, on shared memory (parameter true) and
// on TCP, with MESHCOMM_SHM set for the whole test; instantiate it with
// ::testing::Bool() and ShmOrTcp::name.
class ShmOrTcp : public ::testing::TestWithParam<bool> {
 public:
  static std::string name(const ::testing::TestParamInfo<bool>& info) {
    return info.param ? "shm" : "tcp";
  }

 private:
  ScopedEnv shm_{"MESHCOMM_SHM", GetParam() ? "1" : "0"};
};

}  // namespace meshcomm::test

// The GoogleTest side of runWorld (collective_harness.h): a test that runs
// a body on every rank and expects every rank to exit well.
#pragma once

#include <gtest/gtest.h>

#include "collective_harness.h"

namespace meshcomm::test {

// Runs `body` on `p` ranks and expects each of them to exit well, showing
// every rank's status when one does not.
inline void expectWorldOk(int p, const JobOptions& options, const RankBody& body) {
  auto statuses = runWorld(p, options, body);
  EXPECT_TRUE(allOk(statuses)) << describeAll(statuses);
}

}  // namespace meshcomm::test

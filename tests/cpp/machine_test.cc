// localMachineId (transport/machine.h): what tells the ranks of one machine
// apart from those of others when MESHCOMM_HOST_ID makes several hosts of
// it, so that waits weigh all of them against the machine's cores.
#include "transport/machine.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "scoped_env.h"
#include "transport/placement.h"

namespace meshcomm {
namespace {

TEST(LocalMachineId, IsTheKernelsBootIdWhateverHostTheRankStandsFor) {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string bootId;
  std::getline(boot, bootId);
  if (bootId.empty()) GTEST_SKIP() << "this kernel publishes no boot id";
  const std::string before = localMachineId();
  EXPECT_EQ(before, bootId);
  ScopedEnv host("MESHCOMM_HOST_ID", std::string("emulated-host-7"));
  EXPECT_EQ(localHostId(), "emulated-host-7");
  EXPECT_EQ(localMachineId(), before);
}

// What an emulated host is: a network namespace of this machine. Its ranks
// must find the same machine as the ranks outside it.
TEST(LocalMachineId, IsTheSameInsideAnotherNetworkNamespace) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(out[0]);
    std::string reply;
    if (unshare(CLONE_NEWNET) != 0) {
      reply = std::string("skip:") + std::strerror(errno);
    } else {
      reply = "id:" + localMachineId();
    }
    ssize_t n = write(out[1], reply.data(), reply.size());
    _exit(n == static_cast<ssize_t>(reply.size()) ? 0 : 1);
  }
  close(out[1]);
  std::string reply;
  char buf[256];
  for (ssize_t n; (n = read(out[0], buf, sizeof(buf))) > 0;) reply.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << reply;
  if (reply.rfind("skip:", 0) == 0) {
    GTEST_SKIP() << "cannot create a network namespace here (" << reply.substr(5) << ")";
  }
  EXPECT_EQ(reply, "id:" + localMachineId());
}

}  // namespace
}  // namespace meshcomm

// How long flight-recorder dump folders stay (runtime/dump_folders.h): the
// oldest marked folders beyond the count or size go first; folders that are
// not meshcomm's (no marker, another name, a foreign file, a symbolic
// link), in use (a process holds the marker, or a process that wrote a
// dump there still runs) or written to recently are never removed; and a
// dump into the default place marks its folder and prunes its old siblings. Each test works in a fresh root folder of
// its own, so nothing under /tmp but that root is touched.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/socket.h"
#include "meshcomm/flight_recorder.h"
#include "runtime/dump_folders.h"
#include "multiprocess.h"

namespace meshcomm {
namespace {

namespace fs = std::filesystem;

constexpr char kMarker[] =
    "{\"format\":\"meshcomm-dump-folder\",\"version\":1,\"created_by\":\"test\"}\n";

class DumpFoldersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/meshcomm-dump-folders-test-XXXXXX";
    ASSERT_NE(::mkdtemp(name), nullptr);
    root_ = name;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // A folder as meshcomm leaves it: the marker and one dump per rank, last
  // written `ageSeconds` ago.
  std::string folder(const std::string& name, int64_t ageSeconds, int ranks = 2,
                     const char* marker = kMarker, size_t bytesPerRank = 100) {
    const std::string dir = root_ + "/" + name;
    fs::create_directory(dir);
    std::vector<std::string> files;
    if (marker != nullptr) {
      std::ofstream(dir + "/" + DumpFolders::kMarkerName) << marker;
      files.push_back(dir + "/" + DumpFolders::kMarkerName);
    }
    for (int r = 0; r < ranks; ++r) {
      const std::string f = dir + "/rank_" + std::to_string(r) + ".jsonl";
      std::ofstream(f) << std::string(bytesPerRank, 'x');
      files.push_back(f);
    }
    files.push_back(dir);
    age(files, ageSeconds);
    return dir;
  }

  static void age(const std::vector<std::string>& paths, int64_t seconds) {
    timespec times[2];
    times[0].tv_sec = times[1].tv_sec = ::time(nullptr) - seconds;
    times[0].tv_nsec = times[1].tv_nsec = 0;
    for (const auto& p : paths) ::utimensat(AT_FDCWD, p.c_str(), times, AT_SYMLINK_NOFOLLOW);
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(root_)) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }

  static DumpFolders::Policy keep(int64_t folders, int64_t bytes = 0,
                                  std::chrono::seconds quiet = DumpFolders::kQuietPeriod) {
    DumpFolders::Policy p;
    p.keepFolders = folders;
    p.keepBytes = bytes;
    p.quietPeriod = quiet;
    return p;
  }

  // A folder holding one dump whose header names `pid` on `host`, written now.
  std::string dumpedBy(const std::string& name, long pid, const std::string& host) {
    const std::string dir = root_ + "/" + name;
    fs::create_directory(dir);
    std::ofstream(dir + "/" + DumpFolders::kMarkerName) << kMarker;
    std::ofstream(dir + "/rank_0.jsonl")
        << "{\"format\":\"meshcomm-flight-recorder\",\"version\":1,\"rank\":0,\"pid\":" << pid
        << ",\"host\":\"" << host << "\",\"job\":\"x\"}\n";
    return dir;
  }

  std::string root_;
};

TEST_F(DumpFoldersTest, RemovesTheOldestBeyondTheCount) {
  for (int i = 0; i < 5; ++i) folder("meshcomm-dumps-job" + std::to_string(i), 3600 * (5 - i));
  // job4 is the newest, job0 the oldest; the current folder counts as one.
  folder("meshcomm-dumps-current", 0);
  auto removed = DumpFolders::prune(root_, "meshcomm-dumps-current", keep(3));
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{root_ + "/meshcomm-dumps-job0",
                                               root_ + "/meshcomm-dumps-job1",
                                               root_ + "/meshcomm-dumps-job2"}));
  EXPECT_EQ(names(), (std::vector<std::string>{"meshcomm-dumps-current", "meshcomm-dumps-job3",
                                               "meshcomm-dumps-job4"}));
}

TEST_F(DumpFoldersTest, ZeroMeansNoLimit) {
  for (int i = 0; i < 4; ++i) folder("meshcomm-dumps-job" + std::to_string(i), 3600);
  EXPECT_TRUE(DumpFolders::prune(root_, "", keep(0, 0)).empty());
  EXPECT_EQ(names().size(), 4u);
}

TEST_F(DumpFoldersTest, RemovesTheOldestBeyondTheSize) {
  // 3 folders of 2 x 1000 bytes; room for two.
  for (int i = 0; i < 3; ++i) {
    folder("meshcomm-dumps-job" + std::to_string(i), 3600 * (3 - i), 2, kMarker, 1000);
  }
  const auto removed = DumpFolders::prune(root_, "", keep(0, 4200));
  EXPECT_EQ(removed, (std::vector<std::string>{root_ + "/meshcomm-dumps-job0"}));
}

TEST_F(DumpFoldersTest, LeavesAloneWhatIsNotMeshcommsOwn) {
  folder("meshcomm-dumps-nomarker", 7200, 2, nullptr);
  folder("meshcomm-dumps-othermarker", 7200, 2, "a file of someone else's\n");
  folder("dumps-of-mine", 7200);              // the marker, another name
  folder("meshcomm-dumps-bad.name", 7200);    // not a name meshcomm makes
  const std::string extra = folder("meshcomm-dumps-extra", 7200);
  std::ofstream(extra + "/notes.txt") << "mine";
  age({extra + "/notes.txt", extra}, 7200);
  const std::string target = folder("meshcomm-dumps-target", 7200);
  fs::create_symlink(target, root_ + "/meshcomm-dumps-link");
  folder("meshcomm-dumps-newest", 0);
  const auto before = names();
  // Keep one: only the marked folders compete, and the newest stays.
  const auto removed = DumpFolders::prune(root_, "", keep(1));
  EXPECT_EQ(removed, (std::vector<std::string>{root_ + "/meshcomm-dumps-target"}));
  auto expected = before;
  expected.erase(std::find(expected.begin(), expected.end(), "meshcomm-dumps-target"));
  EXPECT_EQ(names(), expected);
  EXPECT_TRUE(fs::exists(extra + "/notes.txt"));
  EXPECT_TRUE(fs::exists(extra + "/rank_0.jsonl"));
}

TEST_F(DumpFoldersTest, LeavesAloneFoldersInUseOrRecent) {
  const std::string live = folder("meshcomm-dumps-live", 7200);
  folder("meshcomm-dumps-recent", 60);
  folder("meshcomm-dumps-old", 7200);
  // A live writer holds the marker, as every process that dumped there does.
  const int fd = ::open((live + "/" + DumpFolders::kMarkerName).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);
  const auto removed = DumpFolders::prune(root_, "", keep(1));
  ::close(fd);
  EXPECT_EQ(removed, (std::vector<std::string>{root_ + "/meshcomm-dumps-old"}));
  EXPECT_EQ(names(), (std::vector<std::string>{"meshcomm-dumps-live", "meshcomm-dumps-recent"}));
  // Once nobody holds it, it goes like any other.
  EXPECT_EQ(DumpFolders::prune(root_, "", keep(1)),
            (std::vector<std::string>{root_ + "/meshcomm-dumps-live"}));
}

TEST_F(DumpFoldersTest, ADumpInTheDefaultPlaceMarksAndHoldsItsFolderAndPrunesTheOldest) {
  folder("meshcomm-dumps-old1", 7200);
  folder("meshcomm-dumps-old2", 3600);
  const std::string user = root_ + "/mine";
  fs::create_directory(user);
  // In a child: the process's recorder and the lock it keeps are for life,
  // and later tests fork children from this process.
  const auto statuses = test::runChildren(1, [&](int) {
    ::setenv("MESHCOMM_DUMP_ROOT", root_.c_str(), 1);
    ::unsetenv("MESHCOMM_DUMP_DIR");
    ::setenv("MESHCOMM_DUMP_RETAIN_JOBS", "2", 1);
    ::setenv("MESHCOMM_DUMP_RETAIN_MB", "0", 1);
    const std::string file = dumpFlightRecorder();
    const std::string dir = fs::path(file).parent_path();
    CHILD_CHECK(fs::path(dir).parent_path() == fs::path(root_), "" << dir);
    CHILD_CHECK(fs::path(dir).filename().string().rfind("meshcomm-dumps-", 0) == 0, "" << dir);
    CHILD_CHECK(DumpFolders::isMarked(dir));
    CHILD_CHECK(!fs::exists(root_ + "/meshcomm-dumps-old1"));
    CHILD_CHECK(fs::exists(root_ + "/meshcomm-dumps-old2"));
    CHILD_CHECK(fs::exists(user));

    // This process wrote the dump and still runs: even beyond the count and
    // past the quiet period, its folder stays.
    CHILD_CHECK(DumpFolders::prune(root_, "", keep(0, 1, std::chrono::seconds(0))).size() == 1);
    CHILD_CHECK(fs::exists(file));
    CHILD_CHECK(!fs::exists(root_ + "/meshcomm-dumps-old2"));

    // A dump into a folder the user names gets no marker.
    CHILD_CHECK(dumpFlightRecorder(user + "/") == user + "/" + fs::path(file).filename().string());
    CHILD_CHECK(!fs::exists(user + "/" + DumpFolders::kMarkerName));
    return test::kExitOk;
  }, std::chrono::seconds(60));
  EXPECT_TRUE(test::allOk(statuses)) << test::describeAll(statuses);
  // Once that process is gone, nothing holds its folder.
  EXPECT_EQ(DumpFolders::prune(root_, "", keep(0, 1, std::chrono::seconds(0))).size(), 1u);
  EXPECT_EQ(names(), (std::vector<std::string>{"mine"}));
}

TEST_F(DumpFoldersTest, LeavesAloneFoldersOfProcessesThatStillRun) {
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
  dumpedBy("meshcomm-dumps-running", ::getpid(), hostName());
  dumpedBy("meshcomm-dumps-exited", gone, hostName());
  // Another host's process cannot be looked up here: the quiet period alone
  // protects its folder.
  dumpedBy("meshcomm-dumps-elsewhere", ::getpid(), hostName() + "-not");
  // A byte of room and no quiet period: everything that may go, goes.
  auto removed = DumpFolders::prune(root_, "", keep(0, 1, std::chrono::seconds(0)));
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{root_ + "/meshcomm-dumps-elsewhere",
                                               root_ + "/meshcomm-dumps-exited"}));
  EXPECT_EQ(names(), (std::vector<std::string>{"meshcomm-dumps-running"}));
}

}  // namespace
}  // namespace meshcomm

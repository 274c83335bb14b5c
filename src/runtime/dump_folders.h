// DumpFolders: the folders meshcomm makes for flight-recorder dumps, and how
// long they stay (docs/errors.md, "How long dumps are kept").
//
// A dump with no place given goes to a folder of its job,
// <root>/meshcomm-dumps-<job>, where <root> is MESHCOMM_DUMP_ROOT (default
// /tmp). meshcomm marks every folder it makes there with a file, kMarkerName,
// and only a folder that has both the name and the marker, belongs to this
// user, and holds nothing but meshcomm's files (rank_<R>.jsonl,
// pid_<P>.jsonl, their temporaries, the marker) is ever removed. A folder
// given by the user (MESHCOMM_DUMP_DIR, meshrun's --log-dir, a path passed
// to dumpFlightRecorder) gets no marker and is never pruned.
//
// In use: a folder is never removed while
// - a dump is being written into it: the writer holds a shared flock on the
//   marker meanwhile, and removal takes it exclusively without waiting;
// - a meshrun job runs that owns it: meshrun holds the same lock until the
//   job ends;
// - a process that wrote a dump there still runs on this host: each dump's
//   header names its pid and host (a pid that was reused by a process
//   started after the dump does not count). The lock is not held for the
//   writer's whole life because that would leave the process a descriptor
//   after every failure, and a group's loss must leave none behind
//   (docs/fault-tolerance.md);
// - it was written to in the last kQuietPeriod: that covers the ranks of
//   the same job that have not written their dump yet, and dumps of other
//   hosts (a shared root), whose pids cannot be checked here.
//
// Why pruning runs when a dump is written: that is the moment a folder is
// added, in every launcher (meshrun, torchrun, mpirun, a bare program), so
// the count stays bounded without anything running later. meshrun also
// removes its job's folder when every worker exits 0 (python/meshcomm/run.py),
// which the workers cannot know.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/fd.h"

namespace meshcomm {

class DumpFolders {
 public:
  static constexpr char kFolderPrefix[] = "meshcomm-dumps-";
  static constexpr char kMarkerName[] = ".meshcomm-dump-folder";
  // What the marker's content starts with.
  static constexpr char kMarkerStart[] = "{\"format\":\"meshcomm-dump-folder\"";
  static constexpr int64_t kDefaultKeepFolders = 10;
  static constexpr int64_t kDefaultKeepMegabytes = 512;
  static constexpr std::chrono::seconds kQuietPeriod{300};

  struct Policy {
    int64_t keepFolders = kDefaultKeepFolders;  // 0: no limit
    int64_t keepBytes = kDefaultKeepMegabytes << 20;  // 0: no limit
    std::chrono::seconds quietPeriod = kQuietPeriod;
  };
  // MESHCOMM_DUMP_RETAIN_JOBS and MESHCOMM_DUMP_RETAIN_MB; throws
  // InvalidArgument when one is malformed.
  static Policy policyFromEnvironment();

  // Where the default folders go: MESHCOMM_DUMP_ROOT, else /tmp.
  static std::string root();

  // A shared lock on a folder's marker, held while a dump is written.
  class Hold {
   public:
    bool marked() const { return marked_; }

   private:
    friend class DumpFolders;
    Fd fd_;  // the marker, locked; invalid when not held
    bool marked_ = false;
  };

  // Before a dump is written into `dir` (which exists). With
  // `defaultLocation` (the dump's folder was chosen by meshcomm) the folder
  // gets the marker if it has none, and is made again if a removal took it
  // meanwhile. Then, when `dir` is a marked folder of this user, holds a
  // shared lock on its marker until the Hold ends. Waits at most about a
  // second, for a removal in progress; never throws.
  static Hold enter(const std::string& dir, bool defaultLocation);

  // Whether `dir` is a folder meshcomm made: the name, the marker, this
  // user's, a real directory.
  static bool isMarked(const std::string& dir);

  // Removes marked folders of `rootDir` beyond the policy, the least
  // recently written first: the newest keepFolders are kept (`current`, the
  // name of the folder just written, counting as the newest), and of those
  // only as many as fit in keepBytes. Folders in use or written within the
  // quiet period stay. Returns the paths removed; never throws.
  static std::vector<std::string> prune(const std::string& rootDir, const std::string& current,
                                        const Policy& policy);

  // After a dump was written into `dir`: prunes `dir`'s siblings when `dir`
  // is a marked folder of root() (never elsewhere), logging what it removed.
  static void pruneAfterDump(const std::string& dir);
};

}  // namespace meshcomm

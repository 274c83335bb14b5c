// Two local ranks' views of one shared-memory domain, in one process: the
// creator makes and formats the segment and attaches as local rank 0, the
// other opens it by name and attaches as local rank 1, as two processes of
// a host would. Both views see the same memory, and since both record
// this process's pid, every liveness check passes.
//
// Segment names carry the pid and a counter (`/meshcomm-test-<pid>-<n>`),
// so tests running at the same time never collide, and
// shmEntriesOfThisProcess() finds whatever a test left in /dev/shm.
//
// Thread-safety: a view is driven by one thread at a time.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "transport/shm/segment.h"
#include "transport/shm/shm_domain.h"
#include "transport/shm/shm_transport.h"

namespace meshcomm::test {

inline std::string shmTestPrefix() { return "meshcomm-test-" + std::to_string(::getpid()) + "-"; }

// A fresh segment name ("/meshcomm-test-<pid>-<n>").
inline std::string uniqueShmName() {
  static std::atomic<int> counter{0};
  return "/" + shmTestPrefix() + std::to_string(counter++);
}

// The entries of /dev/shm that this process's tests created.
inline std::vector<std::string> shmEntriesOfThisProcess() {
  std::vector<std::string> out;
  const std::string prefix = shmTestPrefix();
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(e->d_name);
  }
  ::closedir(d);
  return out;
}

inline bool shmEntryExists(const std::string& name) {
  return ::access(("/dev/shm" + name).c_str(), F_OK) == 0;
}

struct ShmGeometry {
  size_t slotBytes = 8192;
  size_t chunkBytes = 8192;
  size_t ringBytes = 4096;
};

inline ShmDomainOptions viewOptions(int localRank, const ShmGeometry& g) {
  ShmDomainOptions o;
  o.groupName = "shm_test_group";
  o.localRank = localRank;
  o.groupRanks = {0, 1};
  o.worldRanks = {20, 21};
  o.slotBytes = g.slotBytes;
  o.chunkBytes = g.chunkBytes;
  o.ringBytes = g.ringBytes;
  return o;
}

// Creates and formats a segment for two local ranks, as a host's first
// rank does before it publishes the name.
inline ShmSegment createFormattedSegment(const std::string& name, const ShmGeometry& g) {
  ShmSegment created = ShmSegment::create(name, ShmDomain::segmentBytes(2, g.slotBytes, g.ringBytes));
  ShmDomain::format(created.data(), 2, g.slotBytes, g.chunkBytes, g.ringBytes);
  return created;
}

inline ShmSegment openSegment(const std::string& name, const ShmGeometry& g) {
  return ShmSegment::open(name, ShmDomain::segmentBytes(2, g.slotBytes, g.ringBytes));
}

class TwoShmViews {
 public:
  explicit TwoShmViews(ShmGeometry g = {}) : name_(uniqueShmName()) {
    first_ = std::make_unique<ShmDomain>(viewOptions(0, g), createFormattedSegment(name_, g));
    second_ = std::make_unique<ShmDomain>(viewOptions(1, g), openSegment(name_, g));
  }

  ShmDomain& view(int local) { return local == 0 ? *first_ : *second_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::unique_ptr<ShmDomain> first_;
  std::unique_ptr<ShmDomain> second_;
};

// Point-to-point through a domain: group ranks 0 and 1 are local ranks 0
// and 1.
inline std::unique_ptr<ShmTransport> shmTransportOf(ShmDomain& view, size_t maxUnexpectedBytes = 1 << 20) {
  return std::make_unique<ShmTransport>(view, view.localRank(), std::vector<int>{0, 1},
                                        std::make_shared<ReceiveMatcher>(maxUnexpectedBytes),
                                        Inbox::Describe{});
}

}  // namespace meshcomm::test

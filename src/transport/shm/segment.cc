#include "transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/fd.h"
#include "meshcomm/error.h"

namespace meshcomm {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& name, int err) {
  throw Error(what + " /dev/shm" + name + ": " + std::strerror(err) +
              " (set MESHCOMM_SHM=0 to use TCP between the ranks of a host)");
}

uint8_t* mapShared(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail("cannot map", name, errno);
  return static_cast<uint8_t*>(p);
}

}  // namespace

ShmSegment ShmSegment::create(const std::string& name, size_t bytes) {
  Fd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) fail("cannot create", name, errno);
  // posix_fallocate reserves every page now: tmpfs would otherwise hand out
  // pages lazily and kill the process with SIGBUS when it runs out.
  int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes));
  if (err != 0) {
    ::shm_unlink(name.c_str());
    fail("cannot reserve " + std::to_string(bytes) + " bytes in", name, err);
  }
  uint8_t* data = nullptr;
  try {
    data = mapShared(fd.get(), bytes, name);
  } catch (...) {
    ::shm_unlink(name.c_str());
    throw;
  }
  return ShmSegment(name, data, bytes, /*owner=*/true);
}

ShmSegment ShmSegment::open(const std::string& name, size_t bytes) {
  Fd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd.valid()) fail("cannot open", name, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail("cannot stat", name, errno);
  if (static_cast<size_t>(st.st_size) != bytes) {
    throw Error("/dev/shm" + name + " holds " + std::to_string(st.st_size) +
                " bytes, expected " + std::to_string(bytes) +
                "; the ranks of this host disagree on MESHCOMM_SHM_SLOT_BYTES");
  }
  return ShmSegment(name, mapShared(fd.get(), bytes, name), bytes, /*owner=*/false);
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owner_ = std::exchange(other.owner_, false);
    unlinked_ = std::exchange(other.unlinked_, false);
  }
  return *this;
}

ShmSegment::~ShmSegment() { release(); }

void ShmSegment::unlink() {
  if (unlinked_ || name_.empty()) return;
  unlinked_ = true;
  ::shm_unlink(name_.c_str());  // ENOENT: another member got there first
}

void ShmSegment::prefaultForWriting(size_t offset, size_t bytes) {
  if (data_ == nullptr || offset >= size_) return;
#ifdef MADV_POPULATE_WRITE
  ::madvise(data_ + offset, std::min(bytes, size_ - offset), MADV_POPULATE_WRITE);
#else
  // Headers older than Linux 5.14 (the manylinux wheels' build image):
  // the pages fault in as the copies first touch them.
  (void)offset;
  (void)bytes;
#endif
}

void ShmSegment::release() {
  if (owner_) unlink();
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace meshcomm

// ShmSegment: one named POSIX shared-memory object, mapped into this
// process.
//
// The creator sizes it (reserving the pages up front, so a full /dev/shm
// fails here with a clear error instead of a SIGBUS on first touch) and the
// other processes open it by name. Whoever maps it last unlinks the name, so
// after set-up nothing is left in /dev/shm even if every process is later
// SIGKILLed; the memory itself lives until the last mapping goes.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace meshcomm {

class ShmSegment {
 public:
  // Creates a new object (O_EXCL) of `bytes`, zero-filled. Throws Error
  // naming the path and errno when /dev/shm refuses.
  static ShmSegment create(const std::string& name, size_t bytes);
  // Opens an existing object; its size must be `bytes` (else Error).
  static ShmSegment open(const std::string& name, size_t bytes);

  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  // Unmaps; unlinks the name too if this process created it and it is
  // still there (a member that never mapped it must not leave it behind).
  ~ShmSegment();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

  // Removes the name from /dev/shm (idempotent); existing mappings stay.
  void unlink();

  // Maps the pages of [offset, offset + bytes) into this process for
  // writing now, so that the first stores there do not each take a page
  // fault (a first 512 KiB copy into a slot takes 6-7 times as long as the
  // next). Best effort: kernels before 5.14 fault the pages in as used.
  void prefaultForWriting(size_t offset, size_t bytes);

 private:
  ShmSegment(std::string name, uint8_t* data, size_t size, bool owner)
      : name_(std::move(name)), data_(data), size_(size), owner_(owner) {}
  void release();

  std::string name_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool owner_ = false;
  bool unlinked_ = false;
};

}  // namespace meshcomm

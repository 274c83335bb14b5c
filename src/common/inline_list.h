// InlineList: a list that keeps up to N elements in itself and moves to the
// heap beyond. The per-rank lists of one call (blocks, split sizes) use it,
// so a call on a small group allocates nothing for them: each heap vector
// cost an 8-byte collective at 2 ranks about 150 instructions.
//
// Thread-safety: as a std::vector.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

namespace meshcomm {

template <class T, size_t N>
class InlineList {
  static_assert(std::is_trivially_copyable_v<T>, "elements are copied as values");

 public:
  static constexpr size_t kInline = N;

  InlineList() = default;
  // `n` value-initialised elements.
  explicit InlineList(size_t n) : size_(n) {
    if (n > N) heap_.resize(n);
  }
  // `n` copies of `value`.
  InlineList(size_t n, const T& value) : InlineList(n) { std::fill(begin(), end(), value); }
  // A copy of `values`.
  explicit InlineList(std::span<const T> values) : InlineList(values.size()) {
    std::copy(values.begin(), values.end(), begin());
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return size_ > N ? heap_.data() : inline_.data(); }
  const T* data() const { return size_ > N ? heap_.data() : inline_.data(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  const T& back() const { return data()[size_ - 1]; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  operator std::span<const T>() const { return {data(), size_}; }  // NOLINT: a view of it

  void push_back(const T& value) {
    if (size_ < N) {
      inline_[size_] = value;
    } else {
      if (size_ == N) heap_.assign(inline_.begin(), inline_.end());
      heap_.push_back(value);
    }
    ++size_;
  }

 private:
  std::array<T, N> inline_{};
  std::vector<T> heap_;  // every element, beyond N
  size_t size_ = 0;
};

}  // namespace meshcomm

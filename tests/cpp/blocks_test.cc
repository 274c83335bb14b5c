// Splitting buffers into blocks (collectives/blocks.h), and the inline
// lists of a call (common/inline_list.h), whose elements move from the
// list itself to the heap past kInline.
#include "collectives/blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

namespace meshcomm {
namespace {

Block blockAt(size_t i) { return Block{reinterpret_cast<uint8_t*>(0x1000 + 64 * i), i}; }

void expectBlocks(std::span<const Block> blocks, size_t n) {
  ASSERT_EQ(blocks.size(), n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(blocks[i].data, blockAt(i).data) << i;
    EXPECT_EQ(blocks[i].bytes, i) << i;
  }
}

TEST(BlockList, KeepsEveryBlockInOrderOnEitherSideOfTheInlineCapacity) {
  for (size_t n : {size_t{0}, size_t{1}, BlockList::kInline - 1, BlockList::kInline,
                   BlockList::kInline + 1, 3 * BlockList::kInline + 5}) {
    BlockList list;
    for (size_t i = 0; i < n; ++i) list.push_back(blockAt(i));
    EXPECT_EQ(list.empty(), n == 0);
    expectBlocks(list, n);

    BlockList copy = list;
    expectBlocks(copy, n);
    if (n > 0) {
      copy[0] = Block{};  // the copy owns its blocks
      expectBlocks(list, n);
    }

    BlockList moved = std::move(list);
    expectBlocks(moved, n);
  }
}

TEST(BlockList, SizedListsStartEmptyAndAreWritable) {
  for (size_t n : {size_t{2}, BlockList::kInline + 3}) {
    BlockList list(n);
    ASSERT_EQ(list.size(), n);
    for (const Block& b : list) {
      EXPECT_EQ(b.data, nullptr);
      EXPECT_EQ(b.bytes, 0u);
    }
    for (size_t i = 0; i < n; ++i) list[i] = blockAt(i);
    expectBlocks(list, n);
  }
}

TEST(InlineList, FilledAndCopiedFromASpanOnEitherSide) {
  using Counts = InlineList<int64_t, 4>;
  for (size_t n : {size_t{3}, size_t{4}, size_t{9}}) {
    const Counts same(n, 7);
    ASSERT_EQ(same.size(), n);
    for (int64_t v : same) EXPECT_EQ(v, 7);
    std::vector<int64_t> values(n);
    std::iota(values.begin(), values.end(), int64_t{100});
    const Counts copied{std::span<const int64_t>(values)};
    ASSERT_EQ(copied.size(), n);
    EXPECT_TRUE(std::equal(copied.begin(), copied.end(), values.begin()));
    const std::span<const int64_t> view = copied;
    EXPECT_EQ(view.data(), copied.data());
  }
}

TEST(Blocks, EvenSplitGivesTheRemainderToTheFirstBlocks) {
  const std::vector<size_t> split = evenSplit(10, 4);
  EXPECT_EQ(split, (std::vector<size_t>{3, 3, 2, 2}));
  EXPECT_EQ(std::accumulate(split.begin(), split.end(), size_t{0}), 10u);
  const BlockOffsets offsets = offsetsOf(split);
  EXPECT_EQ(std::vector<size_t>(offsets.begin(), offsets.end()), (std::vector<size_t>{0, 3, 6, 8, 10}));
}

}  // namespace
}  // namespace meshcomm

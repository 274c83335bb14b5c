// Splitting buffers into blocks (collectives/blocks.h), and BlockList,
// whose blocks move from the list itself to the heap past kInline.
#include "collectives/blocks.h"

#include <gtest/gtest.h>

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

TEST(Blocks, EvenSplitGivesTheRemainderToTheFirstBlocks) {
  const std::vector<size_t> split = evenSplit(10, 4);
  EXPECT_EQ(split, (std::vector<size_t>{3, 3, 2, 2}));
  EXPECT_EQ(std::accumulate(split.begin(), split.end(), size_t{0}), 10u);
  EXPECT_EQ(offsetsOf(split), (std::vector<size_t>{0, 3, 6, 8, 10}));
}

}  // namespace
}  // namespace meshcomm

#include "scheduler/extender/node_index.h"

#include <gtest/gtest.h>

namespace gpupack::extender {
namespace {

TEST(NodeIndex, RowsAreAssignedInOrderAndReusedAfterRemoval) {
  NodeIndex index;
  EXPECT_EQ(index.RowOf("n0"), NodeIndex::kNoRow) << "an empty index knows nothing";
  EXPECT_EQ(index.Add("n0"), 0u);
  EXPECT_EQ(index.Add("n1"), 1u);
  EXPECT_EQ(index.Add("n2"), 2u);
  index.Remove(1);
  EXPECT_EQ(index.RowOf("n1"), NodeIndex::kNoRow);
  EXPECT_EQ(index.RowOf("n2"), 2u);
  EXPECT_EQ(index.Add("n3"), 1u) << "the freed row";
  EXPECT_EQ(index.RowCount(), 3u);
}

TEST(NodeIndex, FindsEveryNameThroughGrowth) {
  // 16 slots hold 8 names at load 1/2; the 9th rebuilds to 64 (load ≤ 1/4), and so on: 1000
  // names cross six rebuilds.
  NodeIndex index;
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(index.Add("node-" + std::to_string(i)), static_cast<size_t>(i));
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(index.RowOf("node-" + std::to_string(i)), static_cast<size_t>(i));
  EXPECT_EQ(index.RowOf("node-1000"), NodeIndex::kNoRow);
  EXPECT_EQ(index.Add(""), 1000u);
  EXPECT_EQ(index.RowOf(""), 1000u) << "an empty name is a name";
}

TEST(NodeIndex, StaleHintsCostALookupNotAWrongRow) {
  NodeIndex index;
  index.Add("a");
  index.Add("b");
  const std::vector<std::string_view> names = {"a", "b", "missing"};
  std::vector<size_t> rows;
  index.RowsOf(names, rows);
  EXPECT_EQ(rows, (std::vector<size_t>{0, 1, NodeIndex::kNoRow}));
  // Row 0 now holds another node: the hint for "a" must not be believed.
  index.Remove(0);
  index.Add("c");
  index.RowsOf(names, rows);
  EXPECT_EQ(rows, (std::vector<size_t>{NodeIndex::kNoRow, 1, NodeIndex::kNoRow}));
  index.Add("a");
  index.RowsOf(names, rows);
  EXPECT_EQ(rows, (std::vector<size_t>{2, 1, NodeIndex::kNoRow}));
}

}  // namespace
}  // namespace gpupack::extender

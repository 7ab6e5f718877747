#include "scheduler/extender/node_snapshot.h"

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace gpupack::extender {
namespace {

std::shared_ptr<const placement::Policy> Binpack() { return builders::PriorPolicy(model::PolicyKind::kBinpack); }

std::shared_ptr<const NodeView> View(uint64_t version) {
  auto view = std::make_shared<NodeView>();
  view->node = std::make_shared<model::Node>();
  view->version = version;
  view->heartbeat = Clock::TimePoint(std::chrono::seconds(version));
  return view;
}

TEST(SnapshotCell, PublishingARowCopiesOnlyItsChunk) {
  SnapshotCell cell(Binpack(), 1);
  // Rows 0 and 64 are in chunks 0 and 1 (64 rows a chunk).
  cell.PublishRows({{0, View(1)}, {64, View(2)}});
  const std::shared_ptr<const NodeSnapshot> before = cell.Current();
  ASSERT_EQ(before->chunks.size(), 2u);
  cell.PublishRows({{65, View(3)}});
  const std::shared_ptr<const NodeSnapshot> after = cell.Current();
  EXPECT_EQ(after->chunks[0], before->chunks[0]) << "chunk 0 is shared, not copied";
  EXPECT_NE(after->chunks[1], before->chunks[1]);
  EXPECT_EQ(after->ChunkOf(65)->versions[1], 3u);
  EXPECT_EQ(after->ChunkOf(65)->heartbeats[1], Clock::TimePoint(std::chrono::seconds(3)));
  EXPECT_EQ(before->ChunkOf(65)->versions[1], 0u) << "a published snapshot never changes";
  EXPECT_EQ(after->ChunkOf(128), nullptr);
}

TEST(SnapshotCell, ANullViewEmptiesItsRowAndAPolicyReplacesTheSnapshots) {
  SnapshotCell cell(Binpack(), 1);
  cell.PublishRows({{3, View(7)}});
  cell.PublishRows({{3, nullptr}});
  EXPECT_EQ(cell.Current()->ChunkOf(3)->versions[3], 0u);
  EXPECT_EQ(cell.Current()->ChunkOf(3)->views[3], nullptr);
  const std::shared_ptr<const placement::Policy> next = Binpack();
  cell.PublishRows({}, next, 2);
  EXPECT_EQ(cell.Current()->policy, next);
  EXPECT_EQ(cell.Current()->generation, 2u);
}

}  // namespace
}  // namespace gpupack::extender

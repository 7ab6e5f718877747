#include "scheduler/extender/assessment_memo.h"

#include <gtest/gtest.h>

namespace gpupack::extender {
namespace {

std::shared_ptr<AssessmentMemo::Memo> Filled(uint64_t shape_id, uint64_t generation) {
  auto memo = std::make_shared<AssessmentMemo::Memo>();
  memo->shape_id = shape_id;
  memo->generation = generation;
  memo->Write(0, 5);
  return memo;
}

TEST(AssessmentMemo, EqualShapesShareAnIdAndIdsAreNeverReused) {
  AssessmentMemo memos;
  const uint64_t a = memos.ShapeId("a");
  EXPECT_EQ(memos.ShapeId("a"), a);
  EXPECT_NE(memos.ShapeId("b"), a);
  // 4096 shapes fill the table; the next drops it, and "a" comes back under a new id.
  for (int i = 0; i < 4096; ++i) memos.ShapeId("s" + std::to_string(i));
  EXPECT_NE(memos.ShapeId("a"), a);
}

TEST(AssessmentMemo, FindsOnlyTheExactKey) {
  AssessmentMemo memos;
  memos.Store(Filled(1, 7));
  EXPECT_NE(memos.Find(1, 7, {}), nullptr);
  EXPECT_EQ(memos.Find(1, 8, {}), nullptr) << "another policy generation";
  EXPECT_EQ(memos.Find(2, 7, {}), nullptr) << "another shape";
  EXPECT_EQ(memos.Find(1, 7, {1, 0}), nullptr) << "another ranking";
}

TEST(AssessmentMemo, AShapeKeepsOneSlotAndTheOldestSlotGoesFirst) {
  AssessmentMemo memos;
  memos.Store(Filled(1, 1));
  memos.Store(Filled(1, 2));  // replaces shape 1's memo
  EXPECT_EQ(memos.Find(1, 1, {}), nullptr);
  EXPECT_NE(memos.Find(1, 2, {}), nullptr);
  // Eight slots: shapes 2..9 push shape 1 out, which was stored first.
  for (uint64_t shape = 2; shape <= 9; ++shape) memos.Store(Filled(shape, 1));
  EXPECT_EQ(memos.Find(1, 2, {}), nullptr);
  EXPECT_NE(memos.Find(9, 1, {}), nullptr);
}

TEST(AssessmentMemo, ARowIsServedOnlyAtTheVersionItWasWrittenFor) {
  AssessmentMemo::Memo memo;
  memo.Write(70, 3).cost = 1.5;
  ASSERT_NE(memo.Find(70, 3), nullptr);
  EXPECT_EQ(memo.Find(70, 3)->cost, 1.5);
  EXPECT_EQ(memo.Find(70, 4), nullptr) << "the node's view changed since";
  EXPECT_EQ(memo.Find(71, 3), nullptr) << "never assessed: version 0 in its chunk";
  EXPECT_EQ(memo.Find(200, 3), nullptr) << "past the last chunk";
  EXPECT_EQ(memo.Find(0, 3), nullptr) << "a chunk nobody wrote";
}

TEST(AssessmentMemo, TheNextMemoCopiesOnlyTheChunksItRewrites) {
  // Rows 0..199: chunks 0..3 of 64 rows (the last one partly filled).
  auto first = std::make_shared<AssessmentMemo::Memo>();
  for (size_t row = 0; row < 200; ++row) first->Write(row, 1).cost = static_cast<double>(row);
  const Assessment* held = first->Find(5, 1);  // a reader of the first memo points here

  AssessmentMemo::Memo next = *first;  // what AssessMany starts the next memo from
  next.Write(5, 2).cost = -1;          // row 5's node changed: chunk 0 is copied
  next.Write(6, 2).cost = -2;          // the copy takes the second write too

  EXPECT_EQ(held->cost, 5) << "the stored memo is immutable";
  EXPECT_EQ(first->Find(5, 2), nullptr);
  EXPECT_EQ(next.Find(5, 2)->cost, -1);
  EXPECT_EQ(next.Find(6, 2)->cost, -2);
  EXPECT_EQ(next.Find(7, 1)->cost, 7) << "the rest of the copied chunk comes along";
  EXPECT_NE(next.chunks[0], first->chunks[0]);
  for (size_t c = 1; c < 4; ++c) EXPECT_EQ(next.chunks[c], first->chunks[c]) << "chunk " << c << " is shared";
}

}  // namespace
}  // namespace gpupack::extender

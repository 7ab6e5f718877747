#include "scheduler/extender/assessment_memo.h"

#include <gtest/gtest.h>

namespace gpupack::extender {
namespace {

std::shared_ptr<AssessmentMemo::Memo> Filled(AssessmentMemo& memos, uint64_t shape_id, uint64_t generation) {
  std::shared_ptr<AssessmentMemo::Memo> memo = memos.New();
  memo->shape_id = shape_id;
  memo->generation = generation;
  memo->versions = {5};
  memo->assessments.resize(1);
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
  memos.Store(Filled(memos, 1, 7));
  EXPECT_NE(memos.Find(1, 7, {}), nullptr);
  EXPECT_EQ(memos.Find(1, 8, {}), nullptr) << "another policy generation";
  EXPECT_EQ(memos.Find(2, 7, {}), nullptr) << "another shape";
  EXPECT_EQ(memos.Find(1, 7, {1, 0}), nullptr) << "another ranking";
}

TEST(AssessmentMemo, AShapeKeepsOneSlotAndTheOldestSlotGoesFirst) {
  AssessmentMemo memos;
  memos.Store(Filled(memos, 1, 1));
  memos.Store(Filled(memos, 1, 2));  // replaces shape 1's memo
  EXPECT_EQ(memos.Find(1, 1, {}), nullptr);
  EXPECT_NE(memos.Find(1, 2, {}), nullptr);
  // Eight slots: shapes 2..9 push shape 1 out, which was stored first.
  for (uint64_t shape = 2; shape <= 9; ++shape) memos.Store(Filled(memos, shape, 1));
  EXPECT_EQ(memos.Find(1, 2, {}), nullptr);
  EXPECT_NE(memos.Find(9, 1, {}), nullptr);
}

TEST(AssessmentMemo, AMemoNobodyReadsIsReusedAndOneBeingReadIsNot) {
  AssessmentMemo memos;
  memos.Store(Filled(memos, 1, 1));
  const AssessmentMemo::Memo* first = memos.Find(1, 1, {}).get();
  memos.Store(Filled(memos, 1, 2));  // the first memo is unreachable now
  EXPECT_EQ(memos.New().get(), first) << "the spare";
  std::shared_ptr<const AssessmentMemo::Memo> held = memos.Find(1, 2, {});
  memos.Store(Filled(memos, 1, 3));
  EXPECT_NE(memos.New().get(), held.get()) << "a reader still holds it";
}

}  // namespace
}  // namespace gpupack::extender

#include "model/process_overhead.h"

#include <gtest/gtest.h>

namespace gpupack::model {
namespace {

TEST(ProcessOverheadTest, KnownFamiliesMatchWholeWordsOfTheModel) {
  EXPECT_EQ(DefaultProcessOverheadMiB("Tesla T4", 15360), 448);
  EXPECT_EQ(DefaultProcessOverheadMiB("NVIDIA A100-SXM4-80GB", 81920), 512);
  EXPECT_EQ(DefaultProcessOverheadMiB("NVIDIA A10", 23028), 512);
  EXPECT_EQ(DefaultProcessOverheadMiB("NVIDIA H100 80GB HBM3", 81559), 640);
  // "H20" is a word of neither "H200" nor "GH200": each finds its own row.
  EXPECT_EQ(DefaultProcessOverheadMiB("NVIDIA H20", 97871), 640);
  EXPECT_EQ(DefaultProcessOverheadMiB("NVIDIA B200", 183359), 768);
}

TEST(ProcessOverheadTest, UnknownFamilyPaysThreePercentAndAtLeast256MiB) {
  // 16384 × 3 % = 491.52, rounded up to 492 MiB: above the 256 MiB floor.
  EXPECT_EQ(DefaultProcessOverheadMiB("Some GPU", 16384), 492);
  // 4096 × 3 % = 122.88 → 123 MiB, below the floor: 256 MiB.
  EXPECT_EQ(DefaultProcessOverheadMiB("Some GPU", 4096), 256);
  // The Alibaba trace's 1000-MiB GPUs of an unlisted model: 30 MiB → the floor.
  EXPECT_EQ(DefaultProcessOverheadMiB("G2", 1000), 256);
}

TEST(ProcessOverheadTest, SmallestIsTheLeastAnyDeviceCharges) {
  // The unknown family's 256 MiB floor is below every listed figure (the least is T4's 448).
  EXPECT_EQ(SmallestProcessOverheadMiB(), 256);
}

}  // namespace
}  // namespace gpupack::model

#include "placement/rightsizing.h"

#include <gtest/gtest.h>

namespace gpupack::placement {
namespace {

constexpr model::MiB kGiB = 1024;
constexpr model::MiB k80GiB = 80 * kGiB;  // 81920 MiB

ObservedUse Seen(model::MiB request, model::MiB peak, model::MiB p99, int64_t samples = 360) {
  ObservedUse o;
  o.request_mib = request;
  o.peak_mib = peak;
  o.p99_mib = p99;
  o.samples = samples;
  o.device_memory_mib = k80GiB;
  return o;
}

TEST(PackingGranule, IsTheLargestPowerOfTwoUnderA256thOfTheDevice) {
  EXPECT_EQ(PackingGranuleMiB(k80GiB), 256);    // 81920 / 256 = 320 → 256
  EXPECT_EQ(PackingGranuleMiB(81559), 256);     // an H100's reported 81559 MiB: 318 → 256
  EXPECT_EQ(PackingGranuleMiB(16 * kGiB), 64);  // 16384 / 256 = 64
  EXPECT_EQ(PackingGranuleMiB(23034), 64);      // an L4: 89 → 64
  EXPECT_EQ(PackingGranuleMiB(100), 1);
}

TEST(PackedShare, RisesToTheLargestGranuleMultipleThatFitsAsMany) {
  // need 5632: ⌊81920 / 5632⌋ = 14 fit; 81920 / 14 = 5851.4 → ⌊5851 / 256⌋ × 256 = 5632 (= the need).
  EXPECT_EQ(PackedShareMiB(5632, k80GiB), 5632);
  // need 5858: 13 fit; 81920 / 13 = 6301.5 → 24 × 256 = 6144, and 13 × 6144 = 79872 ≤ 81920.
  EXPECT_EQ(PackedShareMiB(5858, k80GiB), 6144);
  // need 20000: 4 fit; 81920 / 4 = 20480 = 80 × 256: a quarter of the device exactly.
  EXPECT_EQ(PackedShareMiB(20000, k80GiB), 20480);
  // need 41000: 1 fits; the share is the whole device rounded down, 81920.
  EXPECT_EQ(PackedShareMiB(41000, k80GiB), k80GiB);
  // need 5800 on 81559 MiB: 14 fit; 81559 / 14 = 5825.6 → 22 × 256 = 5632 < 5800, so the need is
  // rounded up instead: ⌈5800 / 256⌉ × 256 = 5888 (13 fit, as the granule allows no finer).
  EXPECT_EQ(PackedShareMiB(5800, 81559), 5888);
  EXPECT_EQ(PackedShareMiB(90000, k80GiB), k80GiB);
}

// The example: a pod asking 8 GiB of an 80 GiB device, seen for an hour at 10 s (360
// samples), p99 5 GiB, peak 5.2 GiB (5324.8 → 5325 MiB); headroom 10 %.
TEST(Recommend, PeakOf5Point2GiBOfAn8GiBRequestOn80GiBDevices) {
  const Recommendation r = Recommend(Seen(8 * kGiB, 5325, 5 * kGiB), RightsizingOptions{});
  // guaranteed: 5120 × 1.10 = 5632 MiB; ⌊81920 / 5632⌋ = 14; 81920 / 14 = 5851 → 22 × 256 = 5632
  // = 5.5 GiB.
  EXPECT_EQ(r.guaranteed_mib, 5632);
  // ceiling: 5325 × 1.10 = 5857.5 → 5858; 13 fit; 81920 / 13 = 6301 → 24 × 256 = 6144 = 6 GiB.
  EXPECT_EQ(r.ceiling_mib, 6144);
  EXPECT_EQ(r.granule_mib, 256);
  EXPECT_EQ(r.verdict, RightsizingVerdict::kShrink);
  // At 8 GiB a device holds ⌊81920 / 8192⌋ = 10 of them, at 5.5 GiB ⌊81920 / 5632⌋ = 14: 2.5 GiB
  // freed per pod, 4 more pods per device.
  EXPECT_EQ(r.fit_now, 10);
  EXPECT_EQ(r.fit_recommended, 14);
  EXPECT_EQ(r.reason, "p99 5120 MiB, peak 5325 MiB of 8192 MiB: 14 per device instead of 10");
}

TEST(Recommend, NeverGoesBelowTheOverheadFloor) {
  // A container that holds 300 MiB: 300 × 1.1 = 330, but the floor is 1024 MiB: ⌊81920 / 1024⌋ =
  // 80 fit, 81920 / 80 = 1024 = 4 × 256, so 1024.
  RightsizingOptions options;
  options.min_share_mib = 1024;
  const Recommendation r = Recommend(Seen(4 * kGiB, 300, 280), options);
  EXPECT_EQ(r.verdict, RightsizingVerdict::kShrink);
  EXPECT_EQ(r.guaranteed_mib, 1024);
  // ceiling: 300 × 1.1 = 330; 248 fit, 81920 / 248 = 330 → 1 × 256 < 330, so ⌈330 / 256⌉ × 256 =
  // 512, below the guaranteed 1024: the ceiling is the guaranteed amount (no burst needed).
  EXPECT_EQ(r.ceiling_mib, 1024);
  EXPECT_EQ(r.fit_recommended, 80);
}

TEST(Recommend, KeepsTheShareWhenTheUseWasHeldAtTheCap) {
  // Peak 7900 of 8192 = 96 % ≥ 95 %: the cap may have been what stopped it.
  const Recommendation r = Recommend(Seen(8 * kGiB, 7900, 7000), RightsizingOptions{});
  EXPECT_EQ(r.verdict, RightsizingVerdict::kAtCap);
  EXPECT_EQ(r.guaranteed_mib, 8 * kGiB);
  EXPECT_EQ(r.ceiling_mib, 8 * kGiB);
  EXPECT_NE(r.reason.find("reached the cap"), std::string::npos) << r.reason;
}

TEST(Recommend, KeepsTheShareWhenHeadroomWouldNotShrinkIt) {
  // p99 7500 × 1.1 = 8250 ≥ 8192; peak 7700 is 94 % of the cap, under the at-cap line.
  const Recommendation r = Recommend(Seen(8 * kGiB, 7700, 7500), RightsizingOptions{});
  EXPECT_EQ(r.verdict, RightsizingVerdict::kKeep);
  EXPECT_EQ(r.guaranteed_mib, 8 * kGiB);
}

TEST(Recommend, AdvisesNothingOnTooFewSamples) {
  const Recommendation r = Recommend(Seen(8 * kGiB, 1000, 900, 29), RightsizingOptions{});
  EXPECT_EQ(r.verdict, RightsizingVerdict::kTooFewSamples);
  EXPECT_EQ(r.guaranteed_mib, 8 * kGiB);
  EXPECT_EQ(r.reason, "29 samples, 30 needed before advising");
}

TEST(CombineObserved, TakesTheLargestReplicaAndTheSmallestDevice) {
  ObservedUse a = Seen(8 * kGiB, 5000, 4000, 100);
  ObservedUse b = Seen(8 * kGiB, 4500, 4400, 50);
  b.device_memory_mib = 40 * kGiB;
  const ObservedUse c = CombineObserved({a, b});
  EXPECT_EQ(c.peak_mib, 5000);
  EXPECT_EQ(c.p99_mib, 4400);
  EXPECT_EQ(c.samples, 150);
  EXPECT_EQ(c.pods, 2);
  EXPECT_EQ(c.device_memory_mib, 40 * kGiB);
}

}  // namespace
}  // namespace gpupack::placement

#include "sim/what_if.h"

#include <gtest/gtest.h>

#include "sim/flags.h"
#include "testing/builders.h"

namespace gpupack::sim {
namespace {

model::PodRequest Sharing(const std::string& name, model::MiB mib) {
  model::PodRequest p;
  p.name = name;
  model::ContainerRequest c;
  c.name = "main";
  c.device_count = 1;
  c.mem_per_device_mib = mib;
  p.containers.push_back(c);
  return p;
}

TEST(UsageModel, ParsesBetaAndRefusesTheRest) {
  auto m = ParseUsageModel("beta:2,5");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->alpha, 2);
  EXPECT_EQ(m->beta, 5);
  EXPECT_FALSE(ParseUsageModel("beta:2").ok());
  EXPECT_FALSE(ParseUsageModel("beta:0,1").ok());
  EXPECT_FALSE(ParseUsageModel("normal:1,2").ok());
  EXPECT_EQ(ParseUsageModel("beta:x,1").status().message(), "--what-if: \"x\" is not a positive number");
}

TEST(UsageModel, FractionsAreSeededAndFollowTheirMean) {
  const UsageModel m{2, 6, 7};
  const std::vector<double> a = PeakFractions(4000, m);
  EXPECT_EQ(a, PeakFractions(4000, m)) << "the same seed draws the same fractions";
  double sum = 0;
  for (double f : a) {
    ASSERT_GT(f, 0);
    ASSERT_LT(f, 1);
    sum += f;
  }
  // Beta(2, 6) has mean 2 / 8 = 0.25 and SD √(2·6 / (8²·9)) = 0.144; the mean of 4000 draws is
  // within 0.144 / √4000 × 5 = 0.011 of it.
  EXPECT_NEAR(sum / 4000, 0.25, 0.011);
}

TEST(RightSized, SharesShrinkToTheRecommendationWholeDevicesStay) {
  model::PodRequest whole = Sharing("whole", 0);
  std::vector<model::PodRequest> pods = {Sharing("a", 8192), Sharing("b", 8192), whole};
  // a peaks at 0.65 × 8192 = 5325 MiB: 5325 × 1.1 = 5858 → 6144 on an 80 GiB device; b at 0.97:
  // at the cap, unchanged.
  const std::vector<model::PodRequest> out = RightSized(pods, {0.65, 0.97, 0.5}, 81920, {});
  EXPECT_EQ(out[0].containers[0].mem_per_device_mib, 6144);
  EXPECT_EQ(out[1].containers[0].mem_per_device_mib, 8192);
  EXPECT_TRUE(out[2].containers[0].whole_device());
}

TEST(RunWhatIf, RightSizedPodsFitWhereTheRequestedOnesDoNot) {
  // One 80 GiB GPU and 14 pods of 8 GiB that each peak at half: as requested 10 fit (10 × 8192 =
  // 81920); right-sized to 4608 (4096 × 1.1 = 4506 → 18 fit → 81920 / 18 = 4551 → 17 × 256 = 4352
  // < 4506, so ⌈4506 / 256⌉ × 256 = 4608), all 14 fit (14 × 4608 = 64512). The 10 placed as
  // requested free 10 × (8192 − 4608) = 35840 MiB.
  std::vector<model::PodRequest> pods;
  for (int i = 0; i < 14; ++i) pods.push_back(Sharing("p" + std::to_string(10 + i), 8192));
  ReplayOptions options;
  options.tune = 0;
  options.shuffle = false;
  const std::vector<model::Node> nodes = {builders::GpuNode("n1", 1, 81920)};
  UsageModel half{1e6, 1e6, 1};  // Beta with huge equal parameters: every fraction ≈ 0.5
  auto w = RunWhatIf(nodes, pods, options, half, "bestfit", {42});
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->seeds.size(), 1u);
  const WhatIfSeed& s = w->seeds[0];
  EXPECT_EQ(s.submitted, 14);
  EXPECT_EQ(s.placed_requested, 10);
  EXPECT_EQ(s.placed_rightsized, 14);
  EXPECT_EQ(s.held_requested_mib, 81920);
  EXPECT_EQ(s.held_rightsized_mib, 14 * 4608);
  EXPECT_EQ(s.freed_mib, 10 * (8192 - 4608));
  EXPECT_NE(FormatWhatIf(*w).find("+4"), std::string::npos) << FormatWhatIf(*w);
}

TEST(WhatIfFlags, ParseTheModelAndTheUsageSeed) {
  auto f = ParseSimFlags({"--cluster", "c", "--what-if", "beta:2,5", "--usage-seed", "9"});
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->what_if.has_value());
  EXPECT_EQ(f->what_if->alpha, 2);
  EXPECT_EQ(f->what_if->beta, 5);
  EXPECT_EQ(f->what_if->seed, 9u);
  f = ParseSimFlags({"--cluster", "c", "--what-if", "beta:2,2"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->what_if->seed, 1u) << "the usage seed's default";
}

TEST(WhatIfFlags, RefusalsSayWhatIsWrong) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--cluster", "c", "--what-if"}, "--what-if needs a usage model (e.g. beta:2,2)"},
      {{"--cluster", "c", "--what-if", "gauss:1,2"}, "--what-if: expected beta:A,B (e.g. beta:2,2), got \"gauss:1,2\""},
      {{"--cluster", "c", "--what-if", "beta:2"}, "--what-if: expected beta:A,B (e.g. beta:2,2), got \"beta:2\""},
      {{"--cluster", "c", "--what-if", "beta:-1,2"}, "--what-if: \"-1\" is not a positive number"},
      {{"--cluster", "c", "--usage-seed", "3"}, "--usage-seed needs --what-if"},
      {{"--cluster", "c", "--what-if", "beta:2,2", "--usage-seed", "1,2"}, "--usage-seed: one seed, got \"1,2\""},
      {{"--cluster", "c", "--what-if", "beta:2,2", "--extender", "http://x"},
       "--what-if replays in process, not --extender"},
      {{"--cluster", "c", "--what-if", "beta:2,2", "--json"},
       "--what-if prints its own table, without --json or --report"},
  };
  for (const auto& [args, message] : cases) {
    auto f = ParseSimFlags(args);
    ASSERT_FALSE(f.ok()) << message;
    EXPECT_EQ(f.status().message(), message);
  }
}

}  // namespace
}  // namespace gpupack::sim

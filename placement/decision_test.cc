#include "placement/decision.h"

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace gpupack::placement {
namespace {

Node NodeOf(const std::string& name, int devices, MiB mib) { return builders::GpuNode(name, devices, mib); }
PodRequest PodOf(MiB mem, int64_t cpu_milli = 1000) { return builders::Pod(1, mem, cpu_milli); }

// The device size holding the most memory: 2 × 80 GiB (160 GiB) outweighs 7 × 10 GiB (70 GiB),
// though the small ones are more; equal memory goes to the larger size; no device: the fallback.
TEST(TypicalDeviceMiB, IsTheSizeHoldingTheMostMemory) {
  EXPECT_EQ(TypicalDeviceMiB(std::vector<Node>{NodeOf("a", 2, 81920), NodeOf("b", 7, 10240)}), 81920);
  EXPECT_EQ(TypicalDeviceMiB(std::vector<Node>{NodeOf("a", 1, 16000), NodeOf("b", 2, 8000)}), 16000);
  EXPECT_EQ(TypicalDeviceMiB(std::vector<Node>{NodeOf("a", 1, 1000), NodeOf("b", 5, 16000)}), 16000);
  EXPECT_EQ(TypicalDeviceMiB(std::vector<Node>{}, 42), 42);
}

// The folded key, unit 1000 MiB: completion level L (thousandths of the unit), fill level F (half
// units, shifted by 512), FGD level G (shifted by 100): L·2^17 + (F + 512)·128 + (G + 100), with
// G = −int(100·σ(−ΔF/unit)).
TEST(RankOf, FoldsTheLevelsIntoOneExactKey) {
  const DecisionOptions options;
  struct Case {
    RankInputs in;
    double want;
  } cases[] = {
      // ΔF 0 → FGD 50 → G −50; fill 0; loss 0: 512·128 + 50.
      {{0, 0, 0, 0, 0}, 512.0 * 128 + 50},
      // loss 1/3 device → L 333; fill 600 MiB → F 1; ΔF −1000 → FGD 73.
      {{-1000, 600, 0, 1000.0 / 3, 0}, 333.0 * (1 << 17) + 513.0 * 128 + 27},
      // the reservation price joins the fill: 400 + 600 MiB = 2 half devices.
      {{0, 400, 600, 0, 0}, 514.0 * 128 + 50},
  };
  for (const Case& c : cases) EXPECT_EQ(RankOf(c.in, 1000, options).cost, c.want);
  DecisionOptions no_fill = options;
  no_fill.rank_by_fill = false;  // the reservation price alone: 600 MiB = 1 half device
  EXPECT_EQ(RankOf({0, 400, 600, 0, 0}, 1000, no_fill).cost, 513.0 * 128 + 50);
  DecisionOptions previous = options;
  previous.rank_by_completion = false;  // (−FGD level, fill level): −73·1024 + 1
  EXPECT_EQ(RankOf({-1000, 600, 0, 1000.0 / 3, 0}, 1000, previous).cost, -73.0 * 1024 + 1);
  DecisionOptions exact = options;
  exact.fgd_levels = false;
  EXPECT_EQ(RankOf({-1234.5, 600, 0, 0, 99}, 1000, exact), (RankKey{-1234.5, 0}));
}

// A pod's own gpupack.io/node-policy other than FGD ranks by its exact (binpack / spread) cost,
// in the extender and the simulator alike; naming fgd keeps the levels.
TEST(RankOf, APodsOwnNodePolicyRanksItsExactCost) {
  const DecisionOptions options;
  const RankInputs in{12345, 40960, 0, 0, 99};
  EXPECT_EQ(RankOf(in, 1000, options, PolicyKind::kBinpack), (RankKey{12345, 0}));
  EXPECT_EQ(RankOf(in, 1000, options, PolicyKind::kSpread), (RankKey{12345, 0}));
  EXPECT_EQ(RankOf(in, 1000, options, PolicyKind::kFgd), RankOf(in, 1000, options));
  EXPECT_NE(RankOf(in, 1000, options).cost, 12345);
  EXPECT_TRUE(RanksOnLevels(options, std::nullopt));
  EXPECT_FALSE(RanksOnLevels(options, PolicyKind::kBinpack));
}

// The last key is the node order: equal levels, the lower tie-break rank first; without
// fixed_tie_break the two tie.
TEST(RankOf, TheNodeOrderBreaksTies) {
  DecisionOptions options;
  const RankKey low = RankOf({0, 0, 0, 0, uint64_t{1} << 40}, 1000, options);
  const RankKey high = RankOf({0, 0, 0, 0, uint64_t{1} << 62}, 1000, options);
  EXPECT_LT(low, high);
  options.fixed_tie_break = false;
  EXPECT_EQ(RankOf({0, 0, 0, 0, uint64_t{1} << 40}, 1000, options),
            RankOf({0, 0, 0, 0, uint64_t{1} << 62}, 1000, options));
}

// Observe says when a refresh is due (every refresh_pods binds), and a refresh finds the
// cluster's device size and rebuilds the prior relative to it: 16000 MiB GPUs give the prior's
// half-device shape 8000 MiB.
TEST(Decision, RefreshesEveryRefreshPodsAndFindsTheDeviceSize) {
  DecisionOptions options;
  options.refresh_pods = 3;
  options.prior_pods = 1;  // so three pods outweigh the prior
  Decision decision(PolicyKind::kFgd, PlacementOptions{}, options);
  EXPECT_EQ(decision.unit_mib(), 81920) << "an 80 GB card until the cluster is known";
  const std::vector<Node> nodes = {NodeOf("a", 8, 16000), NodeOf("b", 4, 16000)};
  auto each = [&](const std::function<void(const Node&)>& visit) {
    for (const Node& n : nodes) visit(n);
  };
  Policy policy = decision.Refresh(each);
  EXPECT_EQ(decision.unit_mib(), 16000);
  bool half = false;
  for (const TypicalSpec& s : policy.workload().specs) half = half || s.mem_per_device_mib == 8000;
  EXPECT_TRUE(half);
  EXPECT_FALSE(policy.completion().empty()) << "the completion value is built at the refresh";
  EXPECT_FALSE(decision.Observe(PodOf(12960)));
  EXPECT_FALSE(decision.Observe(PodOf(3040)));
  EXPECT_TRUE(decision.Observe(PodOf(3040)));
  policy = decision.Refresh(each);
  // The learned shapes are exact: 12960 + 3040 = 16000 still fills a device.
  bool big = false, small = false;
  for (const TypicalSpec& s : policy.workload().specs) {
    big = big || s.mem_per_device_mib == 12960;
    small = small || s.mem_per_device_mib == 3040;
  }
  EXPECT_TRUE(big && small);
  EXPECT_FALSE(decision.Observe(PodOf(100))) << "the count restarts at the refresh";
}

// A configured device size is kept whatever the cluster holds; refresh_pods 0 never learns.
TEST(Decision, AConfiguredSizeIsKeptAndZeroRefreshNeverLearns) {
  DecisionOptions options;
  options.device_mib = 1000;
  options.refresh_pods = 0;
  Decision decision(PolicyKind::kFgd, PlacementOptions{}, options);
  const std::vector<Node> nodes = {NodeOf("a", 8, 16000)};
  decision.Refresh([&](const std::function<void(const Node&)>& visit) { visit(nodes[0]); });
  EXPECT_EQ(decision.unit_mib(), 1000);
  EXPECT_FALSE(decision.learning());
  EXPECT_FALSE(decision.Observe(PodOf(500)));
}

}  // namespace
}  // namespace gpupack::placement

#include "placement/decision.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace gpupack::placement {
namespace {

Node NodeOf(const std::string& name, int devices, MiB mib) { return builders::GpuNode(name, devices, mib); }
// Each call is another pod, with a UID of its own: the decision counts a UID once.
PodRequest PodOf(MiB mem, int64_t cpu_milli = 1000) {
  static int pods = 0;
  return builders::NamedPod("p" + std::to_string(++pods), 1, mem, cpu_milli);
}

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

// With fewer_gpus_first, among equal levels, the reservation price in 64ths of the unit device
// comes first, then the node's GPUs, then the node order: the tie is (price << 47 | GPUs << 41 |
// rank >> 23) / 2^53. A 2-GPU node late in the node order, (2·2^41 + 2^39) / 2^53 = 2^−11 +
// 2^−14, ranks before an 8-GPU node early in it, (8·2^41 + 2^17) / 2^53 = 2^−9 + 2^−36; a 1-GPU
// node priced 100 MiB of the 1000 MiB unit (⌊6.4⌋ = 6; its fill level is still 0) ranks after
// both; the levels come first (a node two fill levels worse ranks after all three); GPUs beyond 63
// count as 63. Without it the node order alone decides.
TEST(RankOf, FewerGpusFirstBreaksTiesBeforeTheNodeOrder) {
  const DecisionOptions options;
  const RankInputs small_late{0, 0, 0, 0, uint64_t{1} << 62, 2};
  const RankInputs large_early{0, 0, 0, 0, uint64_t{1} << 40, 8};
  const RankInputs priced{0, 0, 100, 0, 0, 1};
  const RankInputs worse_fill{0, 1000, 0, 0, 0, 1};
  auto rank = [&](const RankInputs& in) { return RankOf(in, 1000, options, std::nullopt, true); };
  EXPECT_EQ(rank(small_late).tie, std::ldexp(1.0, -11) + std::ldexp(1.0, -14));
  EXPECT_EQ(rank(large_early).tie, std::ldexp(1.0, -9) + std::ldexp(1.0, -36));
  EXPECT_EQ(rank(priced).tie, 6 * std::ldexp(1.0, -6) + std::ldexp(1.0, -12));
  EXPECT_EQ(rank(priced).cost, rank(large_early).cost);
  EXPECT_LT(rank(small_late), rank(large_early));
  EXPECT_LT(rank(large_early), rank(priced));
  EXPECT_LT(rank(priced), rank(worse_fill));
  EXPECT_LT(RankOf(large_early, 1000, options), RankOf(small_late, 1000, options));
  EXPECT_EQ(rank({0, 0, 0, 0, 0, 100}).tie, rank({0, 0, 0, 0, 0, 63}).tie);
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

// A refresh finds the cluster's device size and rebuilds the prior relative to it: 16000 MiB GPUs
// give the prior's half-device shape 8000 MiB. The first pod after it is due a refresh at once.
TEST(Decision, RefreshFindsTheDeviceSizeAndLearnsExactShapes) {
  DecisionOptions options;
  options.refresh_pods = 3;
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
  EXPECT_TRUE(decision.Observe(PodOf(12960))) << "one pod after a refresh made with none";
  decision.Refresh(each);
  EXPECT_TRUE(decision.Observe(PodOf(3040)));
  policy = decision.Refresh(each);
  // The learned shapes are exact: 12960 + 3040 = 16000 still fills a device.
  bool big = false, small = false;
  for (const TypicalSpec& s : policy.workload().specs) {
    big = big || s.mem_per_device_mib == 12960;
    small = small || s.mem_per_device_mib == 3040;
  }
  EXPECT_TRUE(big && small);
}

// The refresh tells the learner the cluster's GPU models by their share of the device memory:
// 3 × 8 × 16000 MiB of A100 (384,000 of 448,000 MiB: 86 %) and 2 × 2 × 16000 of T4 (14 %). Once a pod has named a
// model (here the A100), the policy keeps a whole-GPU shape pinned to the rare T4 (the hedge,
// WorkloadLearner) and none to the A100.
TEST(Decision, RefreshGivesTheLearnerTheClustersModels) {
  DecisionOptions options;
  options.coverage = 1.0;
  Decision decision(PolicyKind::kFgd, PlacementOptions{}, options);
  std::vector<Node> nodes = {NodeOf("a1", 8, 16000), NodeOf("a2", 8, 16000), NodeOf("a3", 8, 16000),
                             builders::GpuNode("t1", 2, 16000, "NVIDIA T4"),
                             builders::GpuNode("t2", 2, 16000, "NVIDIA T4")};
  auto each = [&](const std::function<void(const Node&)>& visit) {
    for (const Node& n : nodes) visit(n);
  };
  auto pinned_to = [](const Policy& policy, const std::string& model) {
    return std::any_of(policy.workload().specs.begin(), policy.workload().specs.end(), [&](const TypicalSpec& s) {
      return s.whole_device() && s.gpu_models == std::vector<std::string>{model};
    });
  };
  decision.Refresh(each);
  PodRequest pod = PodOf(4000);
  pod.gpu_models = {"A100"};
  ASSERT_TRUE(decision.Observe(pod));
  const Policy policy = decision.Refresh(each);
  EXPECT_TRUE(pinned_to(policy, "NVIDIA T4"));
  EXPECT_FALSE(pinned_to(policy, builders::kA100));
}

// What the hedge is for: three A100 nodes and one T4 node, each 8 × 16000 MiB and 64 cores, and
// a whole-GPU pod of 4 cores that names no model. After one pod that names none the pod ranks the
// same on an A100 node and on the T4 node (the node order decides); once a pod has named a model
// (the A100), the T4 (a quarter of the memory) is kept for pods pinned to it, and the unpinned pod
// ranks lower there.
TEST(Decision, OnceAPodNamesAModelUnpinnedPodsKeepOffTheRareModel) {
  Decision decision(PolicyKind::kFgd, PlacementOptions{}, DecisionOptions{});
  std::vector<Node> nodes = {NodeOf("a1", 8, 16000), NodeOf("a2", 8, 16000), NodeOf("a3", 8, 16000),
                             builders::GpuNode("t1", 8, 16000, "NVIDIA T4")};
  for (Node& node : nodes) node.cpu_milli = 64000;
  auto each = [&](const std::function<void(const Node&)>& visit) {
    for (const Node& n : nodes) visit(n);
  };
  const PodRequest unpinned = builders::NamedPod("u", 1, 0, 4000);
  auto key_on = [&](const Policy& policy, const Node& node) {
    const NodeScore score = policy.Score(node, policy.Summarize(node), unpinned);
    EXPECT_TRUE(score.verdict.fits());
    return RankOf({score.cost, score.fill_cost, score.reservation_cost, score.completion_loss, 0}, decision.unit_mib(),
                  decision.options());
  };
  decision.Refresh(each);
  ASSERT_TRUE(decision.Observe(PodOf(4000, 4000)));
  Policy policy = decision.Refresh(each);
  EXPECT_EQ(key_on(policy, nodes[0]).cost, key_on(policy, nodes[3]).cost) << "no pod has named a model";
  PodRequest pinned = PodOf(4000, 4000);
  pinned.gpu_models = {"A100"};
  ASSERT_TRUE(decision.Observe(pinned));
  policy = decision.Refresh(each);
  EXPECT_LT(key_on(policy, nodes[0]).cost, key_on(policy, nodes[3]).cost);
}

// The refresh also tells the learner the kinds of node with the most GPUs: two 8-GPU kinds (64
// cores and 256 GiB, and 96 cores and 512 GiB; the second 64-core node is the same kind), not the
// 2-GPU node. Once a pod asks for two whole GPUs, the policy holds a shape for each that asks for
// all of the node (the hedge for pods that take a whole node, WorkloadLearner).
TEST(Decision, RefreshGivesTheLearnerTheLargestNodes) {
  DecisionOptions options;
  options.coverage = 1.0;
  Decision decision(PolicyKind::kFgd, PlacementOptions{}, options);
  std::vector<Node> nodes = {NodeOf("a1", 8, 16000), NodeOf("a2", 8, 16000), NodeOf("b1", 8, 16000),
                             NodeOf("c1", 2, 16000)};
  const int64_t gib = int64_t{1} << 30;
  for (Node& node : nodes) {
    node.cpu_milli = node.name[0] == 'b' ? 96000 : 64000;
    node.memory_bytes = (node.name[0] == 'b' ? 512 : 256) * gib;
  }
  auto each = [&](const std::function<void(const Node&)>& visit) {
    for (const Node& n : nodes) visit(n);
  };
  auto whole_node_shapes = [](const Policy& policy) {
    std::set<std::pair<int64_t, int64_t>> found;
    for (const TypicalSpec& s : policy.workload().specs) {
      if (s.whole_device() && s.device_count == 8) found.insert({s.cpu_milli, s.memory_bytes});
    }
    return found;
  };
  decision.Refresh(each);
  ASSERT_TRUE(decision.Observe(PodOf(4000)));
  EXPECT_TRUE(whole_node_shapes(decision.Refresh(each)).empty()) << "no pod has asked for several GPUs";
  ASSERT_TRUE(decision.Observe(builders::NamedPod("two", 2, 0, 8000)));
  EXPECT_EQ(whole_node_shapes(decision.Refresh(each)),
            (std::set<std::pair<int64_t, int64_t>>{{64000, 256 * gib}, {96000, 512 * gib}}));
}

// Nodes with fewer GPUs go first among equals from the first refresh while the learner's hedges
// hold (a decayed count of pods under 200: n pods decay to (1 − r^n) / (1 − r), r = 2^(−1/1000),
// 186.8 at 200 pods and 200.7 from the 216th), and not once they are done; never when the
// decision does not learn.
TEST(Decision, RanksFewerGpusFirstWhileTheHedgesHold) {
  const std::vector<Node> nodes = {NodeOf("a", 8, 16000), NodeOf("b", 2, 16000)};
  auto each = [&](const std::function<void(const Node&)>& visit) {
    for (const Node& n : nodes) visit(n);
  };
  Decision decision(PolicyKind::kFgd, PlacementOptions{}, DecisionOptions{});
  decision.Refresh(each);
  EXPECT_TRUE(decision.fewer_gpus_first());
  for (int i = 0; i < 200; ++i) decision.Observe(PodOf(4000));
  decision.Refresh(each);
  EXPECT_TRUE(decision.fewer_gpus_first()) << "200 pods decay to 186.8";
  for (int i = 0; i < 30; ++i) decision.Observe(PodOf(4000));
  decision.Refresh(each);
  EXPECT_FALSE(decision.fewer_gpus_first()) << "230 pods decay to 212.7";
  DecisionOptions fixed;
  fixed.refresh_pods = 0;
  Decision never(PolicyKind::kFgd, PlacementOptions{}, fixed);
  never.Refresh(each);
  EXPECT_FALSE(never.fewer_gpus_first()) << "a decision that does not learn";
  Decision pinned = Decision::Pinned(PolicyKind::kFgd, PlacementOptions{}, DecisionOptions{},
                                     TypicalWorkload{{SpecOfPod(PodOf(4000))}});
  pinned.Refresh(each);
  EXPECT_FALSE(pinned.fewer_gpus_first()) << "a given workload is not learned";
}

PodRequest PodWithUid(MiB mem, const std::string& uid) {
  PodRequest p = PodOf(mem);
  p.uid = uid;
  return p;
}

// The schedule: a refresh is due once the pods since the last one reach the pods seen by then,
// clamped to [1, refresh_pods], so with refresh_pods 50 the refreshes fall after 1, 2, 4, 8, 16,
// 32, 64 pods and then every 50 (114, 164). The prior is the one shape observed, so the typical
// set never changes and only the schedule speaks. A pod asked about again (filter retries, then
// its bind) is the same UID and counts once.
TEST(Decision, RefreshesAfterOneTwoFourPodsThenEveryRefreshPods) {
  DecisionOptions options;
  Decision decision(PolicyKind::kFgd, PlacementOptions{}, options, TypicalWorkload{{SpecOfPod(PodOf(20480))}});
  const std::vector<Node> nodes = {NodeOf("a", 2, 81920)};
  auto each = [&](const std::function<void(const Node&)>& visit) { visit(nodes[0]); };
  decision.Refresh(each);
  std::vector<int> refreshed_at;
  for (int pod = 1; pod <= 164; ++pod) {
    const std::string uid = "uid-" + std::to_string(pod);
    const bool due = decision.Observe(PodWithUid(20480, uid));
    EXPECT_FALSE(decision.Observe(PodWithUid(20480, uid))) << "pod " << pod << " asked about twice counts once";
    if (due) {
      refreshed_at.push_back(pod);
      decision.Refresh(each);
    }
  }
  EXPECT_EQ(refreshed_at, (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 114, 164}));
  EXPECT_FALSE(decision.Observe(PodWithUid(20480, "uid-7"))) << "a UID seen long ago is still known";
}

// At a refresh due while the schedule still doubles, the pods waiting with the one asked about
// count too, each UID once (a burst reaching the extender); once a refresh has seen refresh_pods
// (50) pods, the waiting pods are no longer read. Pod 1 makes the first refresh due and the 10
// waiting (2–11) count with it: 11 seen. Asked about in turn they were counted already. The next
// refresh is due 11 new pods later (12–22), and the 40 then waiting (23–62) make 62 seen, past
// 50; the one after is due 50 pods later (63–112) and reads nothing.
TEST(Decision, CountsThePodsWaitingAtAnEarlyRefreshOnly) {
  Decision decision(PolicyKind::kFgd, PlacementOptions{}, DecisionOptions{},
                    TypicalWorkload{{SpecOfPod(PodOf(20480))}});
  const std::vector<Node> nodes = {NodeOf("a", 2, 81920)};
  auto each = [&](const std::function<void(const Node&)>& visit) { visit(nodes[0]); };
  decision.Refresh(each);
  auto pod = [](int i) { return PodWithUid(20480, "uid-" + std::to_string(i)); };
  std::vector<PodRequest> waiting;
  int reads = 0;
  const Decision::WaitingPods wait = [&] {
    ++reads;
    return waiting;
  };
  for (int i = 2; i <= 11; ++i) waiting.push_back(pod(i));
  EXPECT_TRUE(decision.Observe(pod(1), wait));
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(decision.seen(), 11);
  EXPECT_EQ(decision.seen_waiting(), 10);
  decision.Refresh(each);
  EXPECT_TRUE(decision.early());
  for (int i = 2; i <= 11; ++i) EXPECT_FALSE(decision.Observe(pod(i), wait)) << "pod " << i << " counted waiting";
  waiting.clear();
  for (int i = 23; i <= 62; ++i) waiting.push_back(pod(i));
  for (int i = 12; i <= 21; ++i) EXPECT_FALSE(decision.Observe(pod(i), wait)) << "pod " << i;
  EXPECT_EQ(reads, 1);
  EXPECT_TRUE(decision.Observe(pod(22), wait));
  EXPECT_EQ(reads, 2);
  EXPECT_EQ(decision.seen(), 62);
  EXPECT_EQ(decision.seen_waiting(), 50);
  decision.Refresh(each);
  EXPECT_FALSE(decision.early()) << "62 pods seen by the last refresh";
  for (int i = 63; i <= 111; ++i) EXPECT_FALSE(decision.Observe(pod(i), wait)) << "pod " << i;
  EXPECT_TRUE(decision.Observe(pod(112), wait));
  EXPECT_EQ(reads, 2) << "the waiting pods are read only while the schedule doubles";
}

// The mix change: 964 pods of 10 GiB, then 40 GiB pods, on 80 GiB devices. Half-life 1000 pods,
// r = 2^(-1/1000); prior 100 pods, so its share is s = 100(1 − r) / (1 + 100(1 − r)) = 6.48 %
// (whole devices 30 % of it = 1.94 %, halves 1.30 %, the rest below; the prior's shapes ask 4
// CPUs, these pods 1, so none is the same shape); coverage 0.95; refresh_pods 50. The last
// refresh was at the 964th pod, so the schedule's next is 50 pods later, and a change of the
// typical set is due once max(1, 50 / 8) = 6 pods have come since the last refresh.
//   after n large pods: small S = r^n·(1 − r^964)/(1 − r) = 703.36·r^n, large L = (1 − r^n)/(1 − r),
//   small's share (1 − s)·S/(S + L), large's (1 − s)·L/(S + L)
//   n = 0: small 0.9352 + whole 0.0194 = 0.9546 ≥ 0.95: the typical set is {10 GiB, whole}
//   n = 4: S = 701.42, L = 4.00, small 0.9299; + whole 0.9493 < 0.95, so the prior's half
//          device joins: {10 GiB, whole, 40 GiB of the prior}; 4 < 6 pods since the refresh
//   n = 6: the set differs from the last refresh's: refresh due; large is 0.0079, not in it
//   n = 10: S = 698.51, L = 9.97, large 0.0132 > the prior's half 0.0130, and the set becomes
//          {10 GiB, whole, 40 GiB of 1 CPU}; 4 < 6 pods since the refresh at n = 6
//   n = 12: 6 pods since: refresh due, and the policy knows the 40 GiB pods from the 13th on.
// The schedule alone would refresh at the 50th. Before the evidence rule (the prior as 100 pods
// against the count seen, a refresh every 50 binds) the policy saw them at the 50th.
TEST(Decision, AMixChangeRefreshesAsSoonAsTheNewShapeIsTypical) {
  DecisionOptions options;
  Decision decision(PolicyKind::kFgd, PlacementOptions{}, options);
  const std::vector<Node> nodes = {NodeOf("a", 8, 81920)};
  auto each = [&](const std::function<void(const Node&)>& visit) { visit(nodes[0]); };
  decision.Refresh(each);
  for (int pod = 1; pod <= 964; ++pod) {
    if (decision.Observe(PodOf(10240))) decision.Refresh(each);
  }
  decision.Refresh(each);  // the last refresh at the 964th pod
  auto has_large = [](const Policy& policy) {
    return std::any_of(policy.workload().specs.begin(), policy.workload().specs.end(),
                       [](const TypicalSpec& s) { return s.mem_per_device_mib == 40960 && s.cpu_milli == 1000; });
  };
  std::vector<int> refreshed_at;
  std::vector<bool> knew_large;
  for (int n = 1; n <= 50; ++n) {
    if (!decision.Observe(PodOf(40960))) continue;
    refreshed_at.push_back(n);
    knew_large.push_back(has_large(decision.Refresh(each)));
  }
  ASSERT_GE(refreshed_at.size(), 2u);
  EXPECT_EQ(refreshed_at[0], 6);
  EXPECT_FALSE(knew_large[0]);
  EXPECT_EQ(refreshed_at[1], 12);
  EXPECT_TRUE(knew_large[1]);
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

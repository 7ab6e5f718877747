// The pod's and the administrator's device controls in the placement core: device
// rules (UUID allow / exclude, model exclude), the administrator's exclusion, the spread key and
// the per-pod node / device policy. Every rejection names the rule that refused the devices.
#include <gtest/gtest.h>

#include "placement/placement.h"
#include "testing/builders.h"

namespace gpupack::placement {
namespace {

using builders::Gpu;
using builders::NodeOf;
using builders::Pod;
using builders::Spec;

Policy Binpack() {
  TypicalSpec whole;
  whole.device_count = 1;
  whole.weight = 1;
  return Policy(PolicyKind::kBinpack, TypicalWorkload{{whole}}, {});
}
std::vector<int> Slots(const NodeEvaluation& e) {
  return e.placement.containers.empty() ? std::vector<int>{} : e.placement.containers[0].device_slots;
}

// ---- device rules: which device a pod may land on ----

struct RuleCase {
  const char* name;
  std::vector<std::string> uuids, excluded_uuids, excluded_models;
  std::vector<int> slots;  // the placement when it fits
  std::string message;     // the rejection otherwise
};

TEST(DeviceRules, EachRulePicksOrRefusesWithItsReason) {
  // An 8000 MiB pod under binpack (least left over): slot 0 leaves 80000 − 8000 = 72000, slot 1
  // (60000 held) 20000 − 8000 = 12000, slot 2 (a T4) 16000 − 8000 = 8000.
  const Node node = NodeOf({Gpu("GPU-a", 80000), Gpu("GPU-b", 80000, 60000), Gpu("GPU-c", 16000, 0, "Tesla T4")});
  const RuleCase cases[] = {
      {"unrestricted: best fit is the T4 (8000 MiB left, vs 12000 on GPU-b)", {}, {}, {}, {2}, ""},
      {"allow list pins GPU-a", {"GPU-a"}, {}, {}, {0}, ""},
      {"allow list of two: best fit among them", {"GPU-a", "GPU-b"}, {}, {}, {1}, ""},
      {"exclude the T4 by UUID: GPU-b next", {}, {"GPU-c"}, {}, {1}, ""},
      {"exclude the T4 by model: GPU-b next", {}, {}, {"Tesla T4"}, {1}, ""},
      {"allow list names no device here",
       {"GPU-z"},
       {},
       {},
       {},
       "no device left for any device: 3 devices not allowed by gpupack.io/gpu-uuids"},
      {"every device excluded, by two rules",
       {},
       {"GPU-a", "GPU-b"},
       {"Tesla T4"},
       {},
       "no device left for any device: 1 device of a model excluded by gpupack.io/gpu-model-exclude, "
       "2 devices excluded by gpupack.io/gpu-uuids-exclude"},
  };
  const Policy policy = Binpack();
  for (const RuleCase& c : cases) {
    SCOPED_TRACE(c.name);
    PodRequest pod = Pod(1, 8000);
    pod.gpu_uuids = c.uuids;
    pod.excluded_gpu_uuids = c.excluded_uuids;
    pod.excluded_gpu_models = c.excluded_models;
    const NodeEvaluation e = policy.Evaluate(node, pod);
    if (c.message.empty()) {
      ASSERT_TRUE(e.verdict.fits()) << e.verdict.Message();
      EXPECT_EQ(Slots(e), c.slots);
    } else {
      EXPECT_EQ(e.verdict.reason, RejectReason::kExcludedByRule);
      EXPECT_TRUE(e.verdict.unresolvable);  // evicting pods cannot change a rule
      EXPECT_EQ(e.verdict.Message(), c.message);
    }
  }
}

TEST(DeviceRules, MigInstancesFollowTheirParentsUuid) {
  Device mig = Gpu("MIG-1", 40000);
  mig.kind = DeviceKind::kMig;
  mig.parent_uuid = "GPU-p";
  mig.mig_profile = "3g.40gb";
  const Node node = NodeOf({Gpu("GPU-a", 80000), mig});
  PodRequest pinned = Pod(1, 8000);
  pinned.gpu_uuids = {"GPU-p"};  // the parent GPU's UUID admits its instances
  NodeEvaluation e = Binpack().Evaluate(node, pinned);
  ASSERT_TRUE(e.verdict.fits()) << e.verdict.Message();
  EXPECT_EQ(Slots(e), std::vector<int>{1});
  PodRequest excluded = Pod(1, 8000);
  excluded.excluded_gpu_uuids = {"GPU-p"};  // and excluding the parent excludes them
  e = Binpack().Evaluate(node, excluded);
  ASSERT_TRUE(e.verdict.fits()) << e.verdict.Message();
  EXPECT_EQ(Slots(e), std::vector<int>{0});
}

TEST(DeviceRules, TooFewDevicesLeftNamesTheRule) {
  const Node node = NodeOf({Gpu("GPU-a", 80000), Gpu("GPU-b", 80000)});
  PodRequest pod = Pod(2, 8000);
  pod.excluded_gpu_uuids = {"GPU-b"};
  const NodeEvaluation e = Binpack().Evaluate(node, pod);
  EXPECT_EQ(e.verdict.reason, RejectReason::kTooFewMatchingDevices);
  EXPECT_EQ(
      e.verdict.Message(),
      "needs 2 distinct devices, node has 1 matching any device (1 device excluded by gpupack.io/gpu-uuids-exclude)");
}

TEST(DeviceRules, KindAndModelMismatchKeepsItsOwnReason) {
  // A pod that asks for a model the node lacks is told so, not that a rule refused it.
  const Node node = NodeOf({Gpu("GPU-a", 16000, 0, "Tesla T4")});
  PodRequest pod = Pod(1, 8000);
  pod.gpu_models = {"H100"};
  pod.gpu_uuids = {"GPU-a"};
  const NodeEvaluation e = Binpack().Evaluate(node, pod);
  EXPECT_EQ(e.verdict.reason, RejectReason::kNoMatchingDevice);
  EXPECT_EQ(e.verdict.Message(), "no device matches any device, model H100");
}

// ---- the administrator's exclusion ----

TEST(AdminExclusion, ExcludedDeviceTakesNothingNewButKeepsItsShares) {
  Node node = NodeOf({Gpu("GPU-a", 80000, 10000), Gpu("GPU-b", 80000)});
  node.devices[0].excluded = true;
  const PlacementOptions options;
  EXPECT_EQ(DeviceFreeMiB(node.devices[0], options), 0);  // 80000 − 10000 would be free otherwise
  EXPECT_EQ(node.devices[0].shares.size(), 1u);           // the running pod stays
  const Policy policy = Binpack();
  const NodeSummary sum = policy.Summarize(node);
  EXPECT_EQ(sum.total_free, 80000);  // GPU-b only
  // Binpack would pick GPU-a (70000 free, the fuller); excluded, GPU-b it is. The unconstrained
  // fast path and a constrained pod (here: a model list) agree.
  PodRequest pod = Pod(1, 8000);
  EXPECT_EQ(Slots(policy.Evaluate(node, sum, pod)), std::vector<int>{1});
  pod.gpu_models = {"A100"};
  EXPECT_EQ(Slots(policy.Evaluate(node, sum, pod)), std::vector<int>{1});
  // A whole-device pod cannot take it either, and CanHost sees one device.
  TypicalSpec two_whole;
  two_whole.device_count = 2;
  EXPECT_FALSE(CanHost(node, two_whole, options));
  node.devices[1].excluded = true;
  const NodeEvaluation e = policy.Evaluate(node, Pod(1, 8000));
  EXPECT_EQ(e.verdict.reason, RejectReason::kExcludedByRule);
  EXPECT_TRUE(e.verdict.unresolvable);
  EXPECT_EQ(e.verdict.Message(),
            "no device left for any device: 2 devices taken out of the pool by the administrator "
            "(node annotation gpupack.io/excluded-devices)");
}

// ---- the spread key ----

TEST(SpreadKey, ReplicasNeverShareADevice) {
  Node node = NodeOf({Gpu("GPU-a", 80000), Gpu("GPU-b", 80000)});
  PodRequest first = Pod(1, 8000);
  first.uid = "uid-1";
  first.spread_key = "web";
  const Policy policy = Binpack();
  NodeEvaluation e = policy.Evaluate(node, first);
  ASSERT_TRUE(e.verdict.fits());
  ASSERT_TRUE(ApplyPlacement(node, first, e.placement, policy.options()).ok());
  EXPECT_EQ(node.devices[0].shares[0].spread_key, "web");
  // Binpack would stack the second replica on GPU-a (72000 free) — the key sends it to GPU-b.
  PodRequest second = first;
  second.uid = "uid-2";
  e = policy.Evaluate(node, second);
  ASSERT_TRUE(e.verdict.fits()) << e.verdict.Message();
  EXPECT_EQ(Slots(e), std::vector<int>{1});
  ASSERT_TRUE(ApplyPlacement(node, second, e.placement, policy.options()).ok());
  // A third replica finds both devices taken by the key; another key or none shares freely.
  PodRequest third = first;
  third.uid = "uid-3";
  e = policy.Evaluate(node, third);
  EXPECT_EQ(e.verdict.reason, RejectReason::kExcludedByRule);
  EXPECT_EQ(e.verdict.Message(),
            "no device left for any device: 2 devices hold a pod with the same gpupack.io/spread-key \"web\"");
  PodRequest other = third;
  other.spread_key = "db";
  EXPECT_TRUE(policy.Evaluate(node, other).verdict.fits());
  // The pod's own shares (a repeated evaluation of a reserved pod) do not count against it.
  EXPECT_TRUE(policy.Evaluate(node, first).verdict.fits());
}

TEST(SpreadKey, NodeScopeAvoidsTheWholeNode) {
  Node node = NodeOf({Gpu("GPU-a", 80000), Gpu("GPU-b", 80000)});
  node.devices[0].shares.push_back(DeviceShare{"uid-1", "default/web-1", "main", 8000, false, "web"});
  PodRequest pod = Pod(1, 8000);
  pod.spread_key = "web";
  EXPECT_TRUE(Binpack().Evaluate(node, pod).verdict.fits());  // device scope: GPU-b is free of the key
  pod.spread_across_nodes = true;
  const NodeEvaluation e = Binpack().Evaluate(node, pod);
  EXPECT_EQ(e.verdict.reason, RejectReason::kExcludedByRule);
  EXPECT_TRUE(e.verdict.unresolvable);
  EXPECT_EQ(e.verdict.Message(),
            "node already runs default/web-1 with the same gpupack.io/spread-key \"web\" and gpupack.io/spread-scope "
            "is node");
}

// ---- per-pod policy ----

TEST(PodPolicy, DeviceAndNodePoliciesOverrideTheClustersSeparately) {
  // Free: slot 0 = 1000 − 600 = 400, slot 1 = 1000. A 300 MiB pod.
  const Node node = NodeOf({Gpu("GPU-a", 1000, 600), Gpu("GPU-b", 1000)});
  const Policy policy = Binpack();
  struct Case {
    const char* name;
    std::optional<PolicyKind> node_policy, device_policy;
    int slot;
    double cost;
  };
  const Case cases[] = {
      // Best fit: slot 0 (400 → 100). Node cost = free after = 100 + 1000 = 1100.
      {"cluster binpack", std::nullopt, std::nullopt, 0, 1100},
      // Worst fit: slot 1 (1000 → 700); free after 400 + 700 = 1100, same node cost.
      {"device spread", std::nullopt, PolicyKind::kSpread, 1, 1100},
      // Spread at node level ranks by −free after: −1100; devices still best fit.
      {"node spread", PolicyKind::kSpread, std::nullopt, 0, -1100},
      {"both spread", PolicyKind::kSpread, PolicyKind::kSpread, 1, -1100},
      {"explicit binpack = the cluster's", PolicyKind::kBinpack, PolicyKind::kBinpack, 0, 1100},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    PodRequest pod = Pod(1, 300);
    pod.node_policy = c.node_policy;
    pod.device_policy = c.device_policy;
    const NodeEvaluation e = policy.Evaluate(node, pod);
    ASSERT_TRUE(e.verdict.fits());
    EXPECT_EQ(Slots(e), std::vector<int>{c.slot});
    EXPECT_DOUBLE_EQ(e.cost, c.cost);
    EXPECT_DOUBLE_EQ(policy.Score(node, policy.Summarize(node), pod).cost, c.cost);  // Score agrees
  }
}

TEST(PodPolicy, FgdNodeCostOfAnotherDevicePolicysPick) {
  // FGD's score, placement_test's worked example (docs/design.md "Sources"): free GPUs [1000, 1000,
  // 500, 200], 16 CPUs; M = {(4 CPU, 1×500) .5; (8 CPU, 1 whole) .3; (32 CPU, none) .2}.
  // FGD picks GPU#2 (ΔF = −250); worst fit picks GPU#0 (1000 → 500), whose ΔF is +50.
  Node node = NodeOf({Gpu("GPU-0", 1000), Gpu("GPU-1", 1000), Gpu("GPU-2", 1000, 500), Gpu("GPU-3", 1000, 800)});
  node.cpu_milli = 16000;
  const Policy fgd(PolicyKind::kFgd,
                   TypicalWorkload{{Spec(4000, 1, 500, .5), Spec(8000, 1, 0, .3), Spec(32000, 0, 0, .2)}}, {});
  PodRequest pod = Pod(1, 500);
  pod.cpu_milli = 4000;
  NodeEvaluation e = fgd.Evaluate(node, pod);
  EXPECT_EQ(Slots(e), std::vector<int>{2});
  EXPECT_DOUBLE_EQ(e.cost, -250);
  pod.device_policy = PolicyKind::kSpread;
  e = fgd.Evaluate(node, pod);
  EXPECT_EQ(Slots(e), std::vector<int>{0});
  EXPECT_DOUBLE_EQ(e.cost, 50);
  // And a binpack node policy on the FGD cluster: the FGD pick, costed as free after
  // (1000 + 1000 + 0 + 200 = 2200), with no FGD-only keys.
  pod.device_policy.reset();
  pod.node_policy = PolicyKind::kBinpack;
  e = fgd.Evaluate(node, pod);
  EXPECT_EQ(Slots(e), std::vector<int>{2});
  EXPECT_DOUBLE_EQ(e.cost, 2200);
  EXPECT_DOUBLE_EQ(e.fill_cost, 0);
}

}  // namespace
}  // namespace gpupack::placement

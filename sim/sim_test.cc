// Long file: the simulator's table tests, with the arithmetic written out beside each case.
// Unit tests of the simulator on small synthetic clusters, with the arithmetic written out.
#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "api/pod_annotations.h"
#include "api/testing/pod_annotation_cases.h"
#include "placement/placement.h"
#include "sim/cluster_state.h"
#include "sim/compute_family.h"
#include "sim/extender_policy.h"
#include "sim/inputs.h"
#include "sim/policy.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "testing/builders.h"
#include "translate/cluster_file.h"

namespace gpupack::sim {
namespace {

// "p" + std::to_string(i) trips GCC 12's -Wrestrict false positive at -O2; append instead.
std::string Numbered(const char* prefix, int i) { return std::string(prefix).append(std::to_string(i)); }

using builders::NamedPod;
using builders::Spec;

// A node as the trace describes one: GPUs of 1000 MiB (the trace's milli-GPUs) of `model`, GPU g
// already holding used_per_gpu[g] for another pod, `cpu_milli` of CPU and 1 TiB of host memory.
model::Node TraceNode(const std::string& name, int64_t cpu_milli, std::vector<MiB> used_per_gpu,
                      const std::string& model = "G2") {
  model::Node n = builders::GpuNode(name, static_cast<int>(used_per_gpu.size()), 1000, model);
  n.cpu_milli = cpu_milli;
  n.memory_bytes = int64_t{1} << 40;
  for (size_t g = 0; g < used_per_gpu.size(); ++g)
    if (used_per_gpu[g] > 0) n.devices[g].shares.push_back(builders::OtherPodShare(used_per_gpu[g]));
  return n;
}

// The FGD worked example (placement_test; docs/design.md "Sources"): free GPUs [1000, 1000, 500, 200], 16 free
// CPUs; M = {a: 4 CPU × 0.5 GPU, p=.5; b: 8 CPU × 1 GPU, p=.3; c: CPU-only 32 CPU, p=.2}.
struct WorkedExample {
  std::vector<model::Node> nodes{TraceNode("n", 16000, {0, 0, 500, 800})};
  placement::TypicalWorkload m{{Spec(4000, 1, 500, 0.5), Spec(8000, 1, 0, 0.3), Spec(32000, 0, 0, 0.2)}};
};

TEST(ClusterState, FragmentationMatchesWorkedExample) {
  WorkedExample ex;
  ClusterState s(ex.nodes, ex.m);
  // F(a) = 200 (GPU#3 too small); F(b) = 500 + 200 (not whole-free); F(c) = 2700 (CPU-only).
  // F = .5·200 + .3·700 + .2·2700 = 100 + 210 + 540 = 850.
  EXPECT_DOUBLE_EQ(s.NodeFragmentation(0), 850);
  EXPECT_DOUBLE_EQ(s.fragmentation(), 850);
  Demand pod = *s.DemandOf(NamedPod("p", 1, 500, 4000));
  const int gpu2[] = {2}, gpu0[] = {0};
  // On GPU#2 (500 → 0): .5·200 + .3·200 + .2·2200 = 600, Δ = −250.
  EXPECT_DOUBLE_EQ(s.FragmentationAfter(0, pod, gpu2), 600);
  // On GPU#0 (1000 → 500): .5·200 + .3·1200 + .2·2200 = 900, Δ = +50.
  EXPECT_DOUBLE_EQ(s.FragmentationAfter(0, pod, gpu0), 900);
  EXPECT_EQ(placement::FgdScoreLevel(600 - 850, 1000), 56);
  EXPECT_EQ(placement::FgdScoreLevel(900 - 850, 1000), 48);
}

TEST(ClusterState, ApplyUpdatesTotalsIncrementally) {
  WorkedExample ex;
  ClusterState s(ex.nodes, ex.m);
  EXPECT_EQ(s.total_capacity(), 4000);
  EXPECT_EQ(s.allocated(), 1300);
  Demand pod = *s.DemandOf(NamedPod("p", 1, 500, 4000));
  s.Apply(Choice{0, {2}}, pod);
  EXPECT_EQ(s.allocated(), 1800);
  EXPECT_EQ(s.idle(), 2200);
  EXPECT_DOUBLE_EQ(s.fragmentation(), 600);
  EXPECT_EQ(s.nodes()[0].cpu_free, 12000);
  // A whole-GPU pod takes a device exclusively; then only one empty GPU is left for spec b.
  Demand whole = *s.DemandOf(NamedPod("w", 1, 0, 8000));
  EXPECT_TRUE(s.Fits(0, whole));
  s.Apply(Choice{0, {0}}, whole);
  EXPECT_EQ(s.allocated(), 2800);
  // CPU left 4000: spec b (8 CPU) now lacks CPU (all 1200 idle is a fragment for it), spec a fits.
  // F = .5·200 + .3·1200 + .2·1200 = 700.
  EXPECT_DOUBLE_EQ(s.fragmentation(), 700);
  EXPECT_FALSE(s.Fits(0, whole));  // CPU 4000 < 8000
}

TEST(ClusterState, ReportedUsageCountsOnlyBeyondTheCapsLikeThePlacementCore) {
  // One 1000 MiB GPU reporting 100 MiB used: free 900. After a 300 MiB pod the caps (300) cover
  // the 100 used, so free is 1000 − 300 = 700, not 900 − 300 = 600, and a 700 MiB pod fits,
  // as placement::DeviceFreeMiB says (the extender over HTTP decides with that).
  std::vector<model::Node> nodes{TraceNode("n", 16000, {0})};
  nodes[0].devices[0].used_mib = 100;
  ClusterState s(nodes, placement::TypicalWorkload{{Spec(1000, 1, 700, 1.0)}});
  EXPECT_EQ(s.idle(), 900);
  Demand small = *s.DemandOf(NamedPod("small", 1, 300, 1000));
  Demand large = *s.DemandOf(NamedPod("large", 1, 700, 1000));
  const int gpu0[] = {0};
  // F after the small pod: 700 free, usable by the 700 MiB spec: 0; the total free it sees is 700.
  EXPECT_DOUBLE_EQ(s.FragmentationAfter(0, small, gpu0), 0);
  s.Apply(Choice{0, {0}}, small);
  EXPECT_EQ(s.nodes()[0].devices[0].free, 700);
  EXPECT_EQ(s.idle(), 700);
  EXPECT_EQ(s.allocated(), 300);
  ASSERT_TRUE(s.Fits(0, large));
  model::Node with_small = nodes[0];
  with_small.devices[0].shares.push_back(model::DeviceShare{"small", "default/small", "main", 300, false});
  EXPECT_EQ(placement::DeviceFreeMiB(with_small.devices[0], placement::PlacementOptions{}), 700);
  s.Apply(Choice{0, {0}}, large);
  EXPECT_EQ(s.idle(), 0);
  // A whole-GPU pod never lands on a device with usage (not empty), in the core as here.
  std::vector<model::Node> used{TraceNode("u", 16000, {0})};
  used[0].devices[0].used_mib = 1;
  ClusterState u(used, placement::TypicalWorkload{{Spec(1000, 1, 0, 1.0)}});
  EXPECT_FALSE(u.Fits(0, *u.DemandOf(NamedPod("whole", 1, 0, 1000))));
}

TEST(ClusterState, FitChecksCpuMemoryModelsAndDeviceCounts) {
  std::vector<model::Node> nodes{TraceNode("t4", 8000, {0, 900}, "T4")};
  nodes[0].memory_bytes = 1000;
  ClusterState s(nodes, placement::TypicalWorkload{});
  model::PodRequest p = NamedPod("p", 1, 100, 1000);
  EXPECT_TRUE(s.Fits(0, *s.DemandOf(p)));
  p.memory_bytes = 1001;
  EXPECT_FALSE(s.Fits(0, *s.DemandOf(p)));
  p.memory_bytes = 0;
  p.gpu_models = {"V100M16", "V100M32"};
  EXPECT_FALSE(s.Fits(0, *s.DemandOf(p)));
  p.gpu_models = {"P100", "T4"};
  EXPECT_TRUE(s.Fits(0, *s.DemandOf(p)));
  EXPECT_FALSE(s.Fits(0, *s.DemandOf(NamedPod("two", 2, 0, 0))));   // only one empty GPU
  EXPECT_TRUE(s.Fits(0, *s.DemandOf(NamedPod("two", 2, 100, 0))));  // 100 fits on both
  EXPECT_FALSE(s.Fits(0, *s.DemandOf(NamedPod("cpu", 0, 0, 9000))));
}

struct Picked {
  int node;
  std::vector<int> slots;
};

Picked PickWith(const std::string& policy, const std::vector<model::Node>& nodes, const placement::TypicalWorkload& m,
                const model::PodRequest& pod, std::vector<int> rank = {}) {
  ClusterState s(nodes, m);
  if (rank.empty()) {
    for (size_t i = 0; i < nodes.size(); ++i) rank.push_back(static_cast<int>(i));
  }
  auto p = MakePolicy(policy, m);
  EXPECT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE((*p)->Start(s, nodes, rank).ok());
  SimPod sp{&pod, *s.DemandOf(pod), pod.name};
  Rng rng(1);
  auto choice = (*p)->Choose(s, sp, rng);
  EXPECT_TRUE(choice.ok());
  if (!choice->has_value()) return {-1, {}};
  return {(**choice).node, (**choice).slots};
}

TEST(Policy, FgdAndGpupackPickTheExactFitOfTheWorkedExample) {
  WorkedExample ex;
  model::PodRequest pod = NamedPod("p", 1, 500, 4000);
  EXPECT_EQ(PickWith("fgd", ex.nodes, ex.m, pod).slots, std::vector<int>{2});
  EXPECT_EQ(PickWith("gpupack", ex.nodes, ex.m, pod).slots, std::vector<int>{2});
  EXPECT_EQ(PickWith("bestfit", ex.nodes, ex.m, pod).slots, std::vector<int>{2});
}

TEST(Policy, NodeChoiceFollowsEachDefinition) {
  // a: 2 GPUs, one half used; b: 2 empty GPUs. CPU 64 each (the normaliser is the max, 64000).
  std::vector<model::Node> nodes{TraceNode("a", 64000, {500, 0}), TraceNode("b", 64000, {0, 0})};
  placement::TypicalWorkload m{{Spec(1000, 1, 500, 1.0)}};
  model::PodRequest half = NamedPod("half", 1, 500, 1000);
  // BestFit: raw_a = .5·63/64 + .5·(1500−500)/2000 = .742 → 25; raw_b = .5·63/64 + .5·1500/2000 = .867 → 13.
  EXPECT_EQ(PickWith("bestfit", nodes, m, half).node, 0);
  // DotProd: a: (64/64)(1/64)+(1500/2000)(500/2000) = .203 → 89; b: .0156+.25 = .266 → 86. Smaller dot wins.
  EXPECT_EQ(PickWith("dotprod", nodes, m, half).node, 0);
  // Packing: a fits in its used GPU (case 1: 100 − 50/10 = 95); b is all free (case 3: max(33−2, 2) = 31).
  EXPECT_EQ(PickWith("packing", nodes, m, half).node, 0);
  // Clustering: a has no GPU-pod tag recorded yet (the old share predates the replay): 25 + 25·500/2000 = 31;
  // b: 25 + 0 = 25.
  EXPECT_EQ(PickWith("clustering", nodes, m, half).node, 0);
  // FGD: on a's GPU#0 the half fills it: F_a 500 → 0 (Δ −500, score 62); on b Δ = 0 (score 50).
  EXPECT_EQ(PickWith("fgd", nodes, m, half).node, 0);
  EXPECT_EQ(PickWith("gpupack", nodes, m, half).node, 0);
  // Whole-GPU pods take the first empty GPU by index.
  EXPECT_EQ(PickWith("bestfit", nodes, m, NamedPod("w", 1, 0, 1000)).slots, std::vector<int>{1});
  // Ties go to the seed's node order: two empty nodes, rank puts node 1 first.
  std::vector<model::Node> twins{TraceNode("x", 64000, {0}), TraceNode("y", 64000, {0})};
  EXPECT_EQ(PickWith("fgd", twins, m, half, {1, 0}).node, 1);
  EXPECT_EQ(PickWith("gpupack", twins, m, half, {1, 0}).node, 1);
  EXPECT_EQ(PickWith("bestfit", twins, m, half, {0, 1}).node, 0);
}

TEST(Policy, LevelsTieNoiseSizedCostDifferences) {
  // M = {2 CPU × 500 MiB}. A 20 MiB pod into a's 30 MiB fragment: ΔF = −20; onto an empty GPU of
  // b: ΔF = 0 (980 still holds a 500). Exact costs prefer a; on FGD's levels both score
  // int(100·σ(0.02)) = 50 = int(100·σ(0)), so the fgd baseline's node order (b first) decides.
  // gpupack-pinned (M as its workload) ranks by the fill level second, which prefers a: there F̂ falls by 20 (level −1),
  // on b it rises by 480 (two copies of 500 fit the fresh GPU before, one after; level 0).
  std::vector<model::Node> nodes{TraceNode("a", 64000, {0, 970}), TraceNode("b", 64000, {0, 0})};
  placement::TypicalWorkload m{{Spec(2000, 1, 500, 1.0)}};
  model::PodRequest pod = NamedPod("s", 1, 20, 0);
  EXPECT_EQ(PickWith("gpupack-pinned", nodes, m, pod, {1, 0}).node, 0);
  EXPECT_EQ(PickWith("gpupack-pinned", nodes, m, pod, {1, 0}).slots, std::vector<int>{1});
  EXPECT_EQ(PickWith("fgd", nodes, m, pod, {1, 0}).node, 1);
  // Twins tie on both keys: the extender's fixed node order decides, whatever the seed's order.
  std::vector<model::Node> twins{TraceNode("b", 64000, {0, 0}), TraceNode("b2", 64000, {0, 0})};
  const int first = PickWith("gpupack-pinned", twins, m, pod, {0, 1}).node;
  EXPECT_EQ(PickWith("gpupack-pinned", twins, m, pod, {1, 0}).node, first);
}

// The capacity reservation (docs/placement.md) decides a tie that FGD and the fill level leave to
// the node order. Four 1-GPU G2 nodes and one 1-GPU T4 node, 64 cores each, 1000 MiB GPUs;
// M = {any: 1 CPU × 500, p=.9; pinned to T4: the same, p=.05; pinned to G2: the same, p=.05}.
// A 500 MiB pod pinned nowhere:
//   ΔF on a G2 node: the T4 shape cannot use its 1000 free, then 500: .05·(500 − 1000) = −25;
//   on the T4 node the same for the G2 shape: −25. Both FGD level int(100·σ(.025)) = 50.
//   ΔF̂ likewise −25 on both (the CPU feeds 64 copies): fill level ⌊2·(−25)/1000⌋ = −1 on both.
//   The reservation: demand .9·500 + .05·500 + .05·500 = 500; the T4 shape's hosts hold 1000 of
//   5000 MiB (⅕ ≤ ½), so r = (25/500) · 5000/1000 = .25, and the T4 node costs .25·500 = 125 more:
//   fill level ⌊2·(−25 + 125)/1000⌋ = 0. The G2 nodes' set holds ⅘ of the cluster: no price.
// So the pod goes to a G2 node although the node order puts the T4 node first; with the T4 node
// replaced by a fifth G2 node of the same name, the node order picks it.
TEST(Policy, CapacityReservationKeepsThePinnedModelsNodeForItsPods) {
  std::vector<std::string> g2_names = {"g0", "g1", "g2", "g3"};
  std::string t4_name;
  for (int i = 0; t4_name.empty(); ++i) {
    const std::string candidate = Numbered("t", i);
    bool first = true;
    for (const auto& g : g2_names)
      first = first && placement::NodeTieBreakRank(candidate, 0) < placement::NodeTieBreakRank(g, 0);
    if (first) t4_name = candidate;
  }
  std::vector<model::Node> nodes;
  for (const auto& g : g2_names) nodes.push_back(TraceNode(g, 64000, {0}, "G2"));
  nodes.push_back(TraceNode(t4_name, 64000, {0}, "T4"));
  placement::TypicalSpec on_t4 = Spec(1000, 1, 500, .05), on_g2 = Spec(1000, 1, 500, .05);
  on_t4.gpu_models = {"T4"};
  on_g2.gpu_models = {"G2"};
  placement::TypicalWorkload m{{Spec(1000, 1, 500, .9), on_t4, on_g2}};
  model::PodRequest pod = NamedPod("free", 1, 500, 1000);
  const int picked = PickWith("gpupack-pinned", nodes, m, pod).node;
  EXPECT_GE(picked, 0);
  EXPECT_LT(picked, 4) << "a G2 node, not the T4 node the node order puts first";
  nodes.back() = TraceNode(t4_name, 64000, {0}, "G2");
  EXPECT_EQ(PickWith("gpupack-pinned", nodes, m, pod).node, 4);
}

// The completion loss (docs/placement.md; placement/completion_test.cc has the arithmetic):
// M = {650 MiB p=.1, 320 MiB p=.2, 470 MiB p=.2, whole GPU p=.5}, 1000 MiB GPUs, prices 650 → 2/3,
// 470 → 1/2, 320 → 1/3. A 320 MiB pod next to a 470 gives up the 530 MiB a 470 would have taken
// (1/2 device) for a 210 MiB rest nothing takes; on an empty GPU it gives up 1/3 and a 650 can
// still join it. FGD takes the half-used GPU (it keeps the empty one whole); gpupack does not.
TEST(Policy, CompletionLossKeepsASliceForThePodsThatCompleteIt) {
  std::vector<model::Node> nodes{TraceNode("half", 64000, {470}), TraceNode("empty", 64000, {0})};
  placement::TypicalWorkload m{
      {Spec(4000, 1, 650, .1), Spec(4000, 1, 320, .2), Spec(4000, 1, 470, .2), Spec(4000, 1, 0, .5)}};
  model::PodRequest pod = NamedPod("p", 1, 320, 4000);
  EXPECT_EQ(PickWith("fgd", nodes, m, pod, {0, 1}).node, 0);
  EXPECT_EQ(PickWith("gpupack-pinned", nodes, m, pod, {0, 1}).node, 1);
  EXPECT_EQ(PickWith("gpupack-pinned", nodes, m, pod, {1, 0}).node, 1);
  // Next to a 650 the pod completes the GPU: the same loss as the empty GPU (1/3), and the
  // levels after it prefer the fuller GPU.
  nodes.push_back(TraceNode("completes", 64000, {650}));
  EXPECT_EQ(PickWith("gpupack-pinned", nodes, m, pod, {1, 0, 2}).node, 2);
}

// Replays `pods` in order through `policy` on `nodes` as the replayer does (Choose, then Apply and
// Committed when it placed the pod); the slots each pod got, empty where it got none.
std::vector<std::vector<int>> ReplayInOrder(const std::string& policy, const std::vector<model::Node>& nodes,
                                            const std::vector<model::PodRequest>& pods) {
  ClusterState s(nodes, {});
  std::vector<int> rank(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) rank[i] = static_cast<int>(i);
  auto p = MakePolicy(policy, {});
  EXPECT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE((*p)->Start(s, nodes, rank).ok());
  Rng rng(1);
  std::vector<std::vector<int>> slots;
  for (const model::PodRequest& pod : pods) {
    SimPod sp{&pod, *s.DemandOf(pod), pod.name};
    auto choice = (*p)->Choose(s, sp, rng);
    EXPECT_TRUE(choice.ok()) << choice.status();
    slots.emplace_back();
    if (!choice.ok() || !choice->has_value()) continue;
    s.Apply(**choice, sp.demand);
    (*p)->Committed(sp, **choice);
    slots.back() = (**choice).slots;
  }
  return slots;
}

TEST(Policy, APodNoNodeHasHostRoomForIsNotLearned) {
  // kube-scheduler calls no extender for a pod that its own CPU and memory fit leaves no node
  // for, so the extender's learner never hears of it, and the in-process policy must not either.
  // One node, two GPUs of 1000, 1 TiB of host memory. The first 320 takes GPU 0. Five pods of 600
  // that ask 2 TiB of host memory come next: no node has room. Then the second 320. The policy
  // has seen only 320s and stacks it on GPU 0 (the 360 left there still takes a 320; GPU 1 stays
  // whole). Had it learned the 600s (5 of 7 pods), it would spread the 320s: stacked, the 360 left
  // takes no 600, while 680 on each GPU takes one each.
  const std::vector<model::Node> nodes{TraceNode("n", 8000, {0, 0})};
  std::vector<model::PodRequest> pods{NamedPod("first", 1, 320, 1000)};
  for (int i = 0; i < 5; ++i) {
    pods.push_back(NamedPod(Numbered("wide", i), 1, 600, 1000));
    pods.back().memory_bytes = int64_t{2} << 40;
  }
  pods.push_back(NamedPod("second", 1, 320, 1000));
  const std::vector<std::vector<int>> slots = ReplayInOrder("gpupack", nodes, pods);
  EXPECT_EQ(slots.front(), std::vector<int>{0});
  for (int i = 1; i <= 5; ++i) EXPECT_TRUE(slots[i].empty()) << "wide" << i - 1 << " has no host memory to land on";
  EXPECT_EQ(slots.back(), std::vector<int>{0}) << "the policy learned the pods the extender never hears of";
  // The same order with the wide pods left out gives the same slots.
  const std::vector<std::vector<int>> alone = ReplayInOrder("gpupack", nodes, {pods.front(), pods.back()});
  EXPECT_EQ(alone.back(), slots.back());
}

TEST(Policy, NothingFitsGivesNoChoice) {
  std::vector<model::Node> nodes{TraceNode("a", 1000, {0})};
  for (const auto& name : PolicyNames()) {
    EXPECT_EQ(PickWith(name, nodes, {}, NamedPod("big", 1, 0, 2000)).node, -1) << name;
  }
  EXPECT_FALSE(MakePolicy("knapsack", {}).ok());
}

// Three sharing pods of 200, 500 and 800 milli-GPU and a whole-GPU pod. ρ = 1 keeps each pod's
// memory and adds its compute (⌊milli / 10⌋ %); ρ = −1 hands the largest compute the smallest
// memory; the whole-GPU pod is untouched.
TEST(ComputeFamily, CorrelationOneKeepsTheTraceAndMinusOneReversesIt) {
  auto pods = [] {
    return std::vector<model::PodRequest>{NamedPod("a", 1, 200), NamedPod("b", 1, 500), NamedPod("c", 1, 800),
                                          NamedPod("w", 1, 0)};
  };
  std::vector<model::PodRequest> same = pods();
  ApplyComputeFamily(same, 1.0, 1);
  std::vector<model::PodRequest> reversed = pods();
  ApplyComputeFamily(reversed, -1.0, 1);
  const model::MiB kept[] = {200, 500, 800}, flipped[] = {800, 500, 200};
  const int compute[] = {20, 50, 80};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(same[i].containers[0].mem_per_device_mib, kept[i]);
    EXPECT_EQ(same[i].containers[0].compute_pct, compute[i]);
    EXPECT_EQ(reversed[i].containers[0].mem_per_device_mib, flipped[i]);
    EXPECT_EQ(reversed[i].containers[0].compute_pct, compute[i]);
  }
  EXPECT_EQ(same[3].containers[0].compute_pct, 0);
  EXPECT_EQ(reversed[3].containers[0].mem_per_device_mib, 0);
}

TEST(Inputs, AlibabaNodesModelEachGpuWith1000MiB) {
  auto nodes =
      ParseAlibabaNodes("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,8000,1024,0,\n", "x.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].cpu_milli, 64000);
  EXPECT_EQ((*nodes)[0].memory_bytes, int64_t{262144} << 20);
  ASSERT_EQ((*nodes)[0].devices.size(), 2u);
  EXPECT_EQ((*nodes)[0].devices[1].capacity_mib, 1000);
  EXPECT_EQ((*nodes)[0].devices[1].model, "P100");
  EXPECT_TRUE((*nodes)[1].devices.empty());
}

TEST(Inputs, ClusterYamlRoundTripsThroughTheClusterFileParser) {
  auto nodes = ParseAlibabaNodes("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,1024,2,T4\nn1,8000,512,0,\n", "x.csv");
  ASSERT_TRUE(nodes.ok());
  auto back = translate::ParseClusterYaml(ClusterYaml(*nodes));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].cpu_milli, 64000);
  EXPECT_EQ((*back)[0].memory_bytes, int64_t{1024} << 20);
  ASSERT_EQ((*back)[0].devices.size(), 2u);
  EXPECT_EQ((*back)[0].devices[1].capacity_mib, 1000);
  EXPECT_EQ((*back)[0].devices[1].uuid, (*nodes)[0].devices[1].uuid);
  EXPECT_TRUE((*back)[1].devices.empty());
}

TEST(Inputs, ClusterYamlKeepsWhatThePlacementReads) {
  // A GPU reporting 1 GiB used (the shipped example's t4 nodes), an unhealthy one, a hard-isolated
  // one, labels, and a MIG GPU with an instance's usage, id and placement: all survive.
  auto nodes = translate::ParseClusterYaml(
      "nodes:\n"
      "  - name: a\n"
      "    labels: {zone: b, tier: gold}\n"
      "    gpus:\n"
      "      - {model: Tesla T4, memory: 16Gi, used: 1Gi}\n"
      "      - {model: Tesla T4, memory: 16Gi, healthy: false}\n"
      "      - {model: L4, memory: 24Gi, hardIsolation: true}\n"
      "      - {model: A100, memory: 80Gi, mig: [{profile: 3g.40gb, memory: 40Gi, used: 2Gi, gpuInstanceId: 2,"
      " placement: {start: 4, size: 4}}]}\n");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  auto back = translate::ParseClusterYaml(ClusterYaml(*nodes));
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << ClusterYaml(*nodes);
  ASSERT_EQ(back->size(), 1u);
  const model::Node& n = (*back)[0];
  EXPECT_EQ(n.labels, (std::map<std::string, std::string>{{"tier", "gold"}, {"zone", "b"}}));
  ASSERT_EQ(n.devices.size(), 4u);
  EXPECT_EQ(n.devices[0].used_mib, 1024);
  EXPECT_FALSE(n.devices[1].healthy);
  EXPECT_TRUE(n.devices[2].hard_isolation);
  EXPECT_EQ(n.devices[3].used_mib, 2048);
  EXPECT_EQ(n.devices[3].gpu_instance_id, 2);
  EXPECT_EQ(n.devices[3].placement_start, 4);
  EXPECT_EQ(n.devices[3].placement_size, 4);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(n.devices[i].uuid, (*nodes)[0].devices[i].uuid);
}

TEST(Inputs, AlibabaErrorsNameFileLineAndColumn) {
  auto bad = ParseAlibabaNodes("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,2x,2,P100\n", "nodes.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "nodes.csv:2:10: memory_mib: \"2x\" is not a non-negative integer");
  // 20 digits, past int64's 9,223,372,036,854,775,807: refused by its length (at most 15 digits)
  // before any arithmetic (found by fuzz/alibaba_csv_fuzz.cc as a signed overflow under UBSan).
  auto huge =
      ParseAlibabaNodes("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,16384111111111111111,2,P100\n", "nodes.csv");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().message(),
            "nodes.csv:2:10: memory_mib: \"16384111111111111111\" is not a non-negative integer");
  auto missing = ParseAlibabaPods("name,cpu_milli,num_gpu\np,1,1\n", "pods.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "pods.csv:1:1: missing column \"memory_mib\"");
  auto short_row = ParseAlibabaPods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,2,1\n", "pods.csv");
  ASSERT_FALSE(short_row.ok());
  EXPECT_EQ(short_row.status().message(), "pods.csv:2:8: missing value for column \"gpu_milli\"");
  auto dup = ParseAlibabaNodes("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,1,T4\nn,1,1,1,T4\n", "n.csv");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().message(), "n.csv:3:1: duplicate node \"n\" (first on line 2)");
}

TEST(Inputs, AlibabaPodsBecomeSharesWholeDevicesOrCpuOnly) {
  auto pods = ParseAlibabaPods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"
      "share,3152,1024,1,810,,LS\n"
      "whole,8000,2048,8,1000,V100M16|V100M32,LS\n"
      "cpu,12500,4096,0,0,,BE\n",
      "p.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 3u);
  EXPECT_EQ((*pods)[0].containers[0].device_count, 1);
  EXPECT_EQ((*pods)[0].containers[0].mem_per_device_mib, 810);
  EXPECT_EQ((*pods)[0].memory_bytes, int64_t{1024} << 20);
  EXPECT_EQ((*pods)[1].containers[0].device_count, 8);
  EXPECT_EQ((*pods)[1].containers[0].mem_per_device_mib, 0);
  EXPECT_EQ((*pods)[1].gpu_models, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_TRUE((*pods)[2].containers.empty());
  // The multigpu files have only five columns.
  auto five = ParseAlibabaPods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,1000\n", "m.csv");
  ASSERT_TRUE(five.ok()) << five.status();
  EXPECT_TRUE((*five)[0].gpu_models.empty());
  auto zero = ParseAlibabaPods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,0\n", "z.csv");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(), "z.csv:2:9: gpu_milli: 0 for a pod with num_gpu 1");
}

TEST(Inputs, WorkloadYamlExpandsCountsAndSplitsMemory) {
  auto pods = ParseWorkloadYaml(
      "pods:\n"
      "  - {name: infer, gpuMemory: 10Gi, gpus: 1, cpu: \"4\", memory: 16Gi, count: 3}\n"
      "  - {name: train, gpus: 2, cpu: \"16\"}\n"
      "  - {name: pair, gpuMemory: 20Gi, gpus: 2, gpuModel: A100|H100}\n"
      "  - {name: small, gpuMemory: 5Gi, migProfile: 1g.10gb}\n"
      "  - {name: web, cpu: 500m}\n",
      "w.yaml");
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 7u);
  EXPECT_EQ((*pods)[0].name, "infer-0");
  EXPECT_EQ((*pods)[2].name, "infer-2");
  EXPECT_EQ((*pods)[0].containers[0].mem_per_device_mib, 10240);
  EXPECT_EQ((*pods)[0].cpu_milli, 4000);
  EXPECT_EQ((*pods)[0].memory_bytes, int64_t{16} << 30);
  EXPECT_EQ((*pods)[3].containers[0].device_count, 2);
  EXPECT_EQ((*pods)[3].containers[0].mem_per_device_mib, 0);
  EXPECT_EQ((*pods)[4].containers[0].mem_per_device_mib, 10240);  // 20Gi over 2 devices
  EXPECT_EQ((*pods)[4].gpu_models, (std::vector<std::string>{"A100", "H100"}));
  EXPECT_EQ((*pods)[5].mig_profile, "1g.10gb");
  EXPECT_TRUE((*pods)[6].containers.empty());
  EXPECT_EQ((*pods)[6].cpu_milli, 500);
}

TEST(Inputs, WorkloadYamlErrorsNameLineAndColumn) {
  auto unknown = ParseWorkloadYaml("pods:\n  - {name: a, gpuMem: 1Gi}\n", "w.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "w.yaml:2:15: unknown key \"gpuMem\"");
  auto quantity = ParseWorkloadYaml("pods:\n  - name: a\n    gpuMemory: 10GB\n", "w.yaml");
  ASSERT_FALSE(quantity.ok());
  EXPECT_NE(quantity.status().message().find("w.yaml:3:16: "), std::string::npos) << quantity.status();
  EXPECT_NE(quantity.status().message().find("gpuMemory"), std::string::npos);
  auto dup = ParseWorkloadYaml("pods:\n  - {name: a}\n  - {name: a}\n", "w.yaml");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("duplicate pod name \"a\""), std::string::npos);
  EXPECT_FALSE(ParseWorkloadYaml("pods: [\n", "w.yaml").ok());
  EXPECT_FALSE(ParseWorkloadYaml("nodes: []\n", "w.yaml").ok());
}

// Accepted before: a key given twice (one silently won), a pod name Kubernetes refuses, and a node
// list with no nodes (a replay then reported a 100 % unallocated nothing).
TEST(Inputs, RefusesDuplicateKeysBadNamesAndEmptyClusters) {
  auto twice = ParseWorkloadYaml("pods:\n  - name: a\n    gpus: 1\n    gpus: 2\n", "w.yaml");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "w.yaml: line 4: key \"gpus\" appears twice in one mapping (first on line 3)");
  auto bad_name = ParseWorkloadYaml("pods:\n  - {name: \"Bad Name!\", gpus: 1}\n", "w.yaml");
  ASSERT_FALSE(bad_name.ok());
  EXPECT_EQ(bad_name.status().message().rfind("w.yaml:2:12: name: \"Bad Name!\" is not a valid Kubernetes name", 0), 0u)
      << bad_name.status();
  auto no_nodes = ParseAlibabaNodes("sn,cpu_milli,memory_mib,gpu,model\n", "nodes.csv");
  ASSERT_FALSE(no_nodes.ok());
  EXPECT_EQ(no_nodes.status().message(), "nodes.csv: the node list has a header but no nodes");
}

// The trace's gpu_spec names (V100M16, V100M32) are matched as whole names, not substrings.
TEST(ClusterState, PinnedPodsMatchWholeModelNames) {
  model::Node a10 = TraceNode("a10", 64000, {0});
  a10.devices[0].model = "A10";
  model::Node a100 = TraceNode("a100", 64000, {100});  // fuller, so bestfit would prefer it
  a100.devices[0].model = "A100";
  ReplayOptions opts;
  opts.tune = 0;
  opts.shuffle = false;
  model::PodRequest pinned = NamedPod("p", 1, 500, 1);
  pinned.gpu_models = {"A10"};
  model::PodRequest on_a100 = NamedPod("q", 1, 600, 1);
  on_a100.gpu_models = {"A100"};
  auto r = Replayer::Create({a100, a10}, {pinned, on_a100}, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  auto policy = MakePolicy("bestfit", r->typical());
  auto run = r->RunSeed(**policy, 1);
  ASSERT_TRUE(run.ok()) << run.status();
  // p fits only the A10, q then has 900 MiB on the A100. Substring matching put p on the A100
  // (A10 is in A100, and bestfit prefers the fuller device), leaving q 400 MiB.
  EXPECT_EQ(run->failed, 0);
}

TEST(Replay, InflationAppendsCopiesUntilTheNextWouldPassTheTarget) {
  // 2 GPUs = 2000 MiB; target 1.3 × 2000 = 2600. Two 500 pods (1000) + copies of 500:
  // 1500, 2000, 2500; a fourth would make 3000 > 2600. So 5 arrivals.
  std::vector<model::Node> nodes{TraceNode("n", 64000, {0, 0})};
  auto r = Replayer::Create(nodes, {NamedPod("a", 1, 500, 1), NamedPod("b", 1, 500, 1)}, ReplayOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  Rng rng(42);
  EXPECT_EQ(r->Arrivals(rng).size(), 5u);
}

TEST(Replay, InflationChecksThePerDeviceRequestLikeTheArtifact) {
  // 4 GPUs, target 5200. Two 2-GPU pods = 4000; a drawn copy is tested with 1000 (per device):
  // 5000 ≤ 5200, so it is appended and the total overshoots to 6000; the next test fails.
  std::vector<model::Node> nodes{TraceNode("n", 64000, {0, 0, 0, 0})};
  auto r = Replayer::Create(nodes, {NamedPod("a", 2, 0, 1), NamedPod("b", 2, 0, 1)}, ReplayOptions{});
  ASSERT_TRUE(r.ok());
  Rng rng(7);
  EXPECT_EQ(r->Arrivals(rng).size(), 3u);
}

TEST(Replay, DeflationRemovesPodsUntilAtOrBelowTheTarget) {
  // 2 GPUs, target 2600; six whole-GPU pods (6000) shrink to two (2000).
  std::vector<model::Node> nodes{TraceNode("n", 64000, {0, 0})};
  std::vector<model::PodRequest> pods;
  for (int i = 0; i < 6; ++i) pods.push_back(NamedPod(Numbered("p", i), 1, 0, 1));
  auto r = Replayer::Create(nodes, pods, ReplayOptions{});
  ASSERT_TRUE(r.ok());
  Rng rng(3);
  std::vector<int> arrivals = r->Arrivals(rng);
  EXPECT_EQ(arrivals.size(), 2u);
  // Shuffling is a permutation: no pod appears twice.
  EXPECT_NE(arrivals[0], arrivals[1]);
}

// gpupack-overhead charges each process on a device its family's overhead (A100: 512 MiB) once.
// One 16384 MiB A100, five 4096 MiB pods in file order:
//   gpupack: 4 × 4096 = 16384 fits exactly, the fifth fails;
//   gpupack-overhead: before pod k+1 the device has 16384 − k·4096 − k·512 − 512 (its own) free:
//   k = 0: 15872, k = 1: 11264, k = 2: 6656 ≥ 4096, k = 3: 2048 < 4096: 3 placed, 2 fail.
TEST(Replay, OverheadVariantChargesEachProcessItsFamilyOverhead) {
  model::Node a100 = builders::GpuNode("a100", 1, 16384, "NVIDIA A100-SXM4-80GB");
  a100.cpu_milli = 64000;
  a100.memory_bytes = int64_t{1} << 40;
  std::vector<model::PodRequest> pods;
  for (int i = 0; i < 5; ++i) pods.push_back(NamedPod(Numbered("p", i).c_str(), 1, 4096, 1));
  ReplayOptions opts;
  opts.tune = 0;
  opts.shuffle = false;
  auto r = Replayer::Create({a100}, pods, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& [name, placed] : {std::pair{"gpupack", 4}, std::pair{"gpupack-overhead", 3}}) {
    auto policy = MakePolicy(name, r->typical());
    ASSERT_TRUE(policy.ok()) << policy.status();
    auto run = r->RunSeed(**policy, 1);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->pods - run->failed, placed) << name;
  }
}

TEST(Replay, CurveIsDiscretisedByArrivedPercent) {
  // One node, 2 GPUs, two whole-GPU pods in file order, no inflation.
  // Pod 1: arrived 50 %, allocated 50 % → unallocated 50. Pod 2: arrived 100 %, unallocated 0.
  std::vector<model::Node> nodes{TraceNode("n", 64000, {0, 0})};
  ReplayOptions opts;
  opts.tune = 0;
  opts.shuffle = false;
  auto r = Replayer::Create(nodes, {NamedPod("a", 1, 0, 1), NamedPod("b", 1, 0, 1)}, opts);
  ASSERT_TRUE(r.ok());
  auto policy = MakePolicy("fgd", r->typical());
  auto run = r->RunSeed(**policy, 1);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->pods, 2);
  EXPECT_EQ(run->failed, 0);
  ASSERT_EQ(run->curve.size(), 101u);
  EXPECT_DOUBLE_EQ(run->curve[50].unallocated_pct, 50);
  EXPECT_DOUBLE_EQ(run->curve[49].unallocated_pct, 50);  // empty x: mean over 48..50
  EXPECT_DOUBLE_EQ(run->curve[51].unallocated_pct, 50);  // mean over 50..52
  EXPECT_DOUBLE_EQ(run->curve[75].unallocated_pct, 50);  // wider gap: the last value holds
  EXPECT_DOUBLE_EQ(run->curve[99].unallocated_pct, 0);
  EXPECT_DOUBLE_EQ(run->curve[100].unallocated_pct, 0);
  // Idle 1000 of which the typical whole-GPU pod can use all: frag rate 0 at 50 %.
  EXPECT_DOUBLE_EQ(run->curve[50].frag_rate_pct, 0);
}

TEST(Replay, FailedPodsCountAsArrivedButNotAllocated) {
  // 1 GPU; pods 600, 600 in order: the second fails. Arrived 60 % then 120 %; unallocated 40 both times.
  std::vector<model::Node> nodes{TraceNode("n", 64000, {0})};
  ReplayOptions opts;
  opts.tune = 0;
  opts.shuffle = false;
  auto r = Replayer::Create(nodes, {NamedPod("a", 1, 600, 1), NamedPod("b", 1, 600, 1)}, opts);
  ASSERT_TRUE(r.ok());
  auto policy = MakePolicy("gpupack", r->typical());
  auto run = r->RunSeed(**policy, 1);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->failed, 1);
  ASSERT_EQ(run->curve.size(), 121u);
  EXPECT_NEAR(run->curve[60].unallocated_pct, 40, 1e-9);
  EXPECT_NEAR(run->curve[120].unallocated_pct, 40, 1e-9);
}

TEST(Replay, SeedsReproduceAndDiffer) {
  std::vector<model::Node> nodes;
  for (int i = 0; i < 6; ++i) nodes.push_back(TraceNode(Numbered("n", i), 32000, {0, 0}));
  std::vector<model::PodRequest> pods;
  for (int i = 0; i < 20; ++i) pods.push_back(NamedPod(Numbered("p", i), 1, 100 + 37 * i % 900, 4000));
  auto r = Replayer::Create(nodes, pods, ReplayOptions{});
  ASSERT_TRUE(r.ok());
  auto make = [&]() { return MakePolicy("random", r->typical()); };
  auto a = r->Run("random", make, {1, 2});
  auto b = r->Run("random", make, {1, 2});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->seeds.size(), 2u);
  EXPECT_EQ(a->seeds[0].pods, b->seeds[0].pods);
  for (size_t x = 0; x < a->seeds[0].curve.size(); ++x) {
    EXPECT_EQ(a->seeds[0].curve[x].unallocated_pct, b->seeds[0].curve[x].unallocated_pct);
  }
  Rng r1(1), r2(2);
  EXPECT_NE(r->Arrivals(r1), r->Arrivals(r2));
}

// The early window: 10 nodes × 2 GPUs of 1000 MiB, 20 whole-GPU pods, fill_pods 4. The first 4
// pods ask 4 × 1000 = 4000 MiB, so the seed's cluster is its first 2 nodes in random order (4
// GPUs, 4000 MiB); the order then plays while arrived < 1.3 × 4000 = 5200: 6 pods (5000 < 5200
// admits the sixth), 4 bound, 2 failed, nothing unallocated at arrived 100 %.
TEST(Replay, FillPodsReplaysOnAClusterTheFirstPodsFill) {
  std::vector<model::Node> nodes;
  for (int i = 0; i < 10; ++i) nodes.push_back(TraceNode(Numbered("n", i), 64000, {0, 0}));
  std::vector<model::PodRequest> pods;
  for (int i = 0; i < 20; ++i) pods.push_back(NamedPod(Numbered("p", i), 1, 0, 1));
  ReplayOptions opts;
  opts.fill_pods = 4;
  auto r = Replayer::Create(nodes, pods, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  auto policy = MakePolicy("gpupack", r->typical());
  auto run = r->RunSeed(**policy, 5);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->pods, 6);
  EXPECT_EQ(run->failed, 2);
  ASSERT_GT(run->curve.size(), 100u);
  EXPECT_DOUBLE_EQ(run->curve[100].unallocated_pct, 0);
}

// gpupack on the early window of `pods` in file order, seed 42: fill_pods is all of them, so the
// cluster is the nodes they fill, and tune 1 plays each once.
StatusOr<SeedRun> RunFirstPods(const std::vector<model::Node>& nodes, const std::vector<model::PodRequest>& pods,
                               bool burst) {
  ReplayOptions opts;
  opts.shuffle = false;
  opts.tune = 1;
  opts.fill_pods = static_cast<int>(pods.size());
  opts.burst = burst;
  GPUPACK_ASSIGN_OR_RETURN(Replayer replayer, Replayer::Create(nodes, pods, opts));
  GPUPACK_ASSIGN_OR_RETURN(std::unique_ptr<SimPolicy> policy, MakePolicy("gpupack", replayer.typical()));
  return replayer.RunSeed(*policy, 42);
}

// A burst: an 8-GPU node and a 2-GPU node (10 GPUs of 1000 MiB), and in file order two 1-GPU
// pods, then an 8-GPU pod; fill_pods 3 asks 10 × 1000 MiB, so the cluster is both nodes, and
// tune 1 plays the 3 pods. One at a time, the learner's first refresh knows a 1-GPU pod and the
// prior, whose 2-GPU shape a 1-GPU pod on the 2-GPU node would strand (ΔF > 0; on the 8-GPU node
// 0): both 1-GPU pods go to the 8-GPU node and the 8-GPU pod fails. As a burst, the first refresh
// also counts the two pods waiting: the 8-GPU shape is a third of what was seen, a 1-GPU pod on
// the 8-GPU node would strand its 7 other GPUs for it, so both take the 2-GPU node and all 3 fit.
TEST(Replay, ABurstIsLearnedFromThePodsWaitingAtTheFirstRefresh) {
  std::vector<model::Node> nodes{TraceNode("big", 128000, std::vector<MiB>(8, 0)), TraceNode("small", 128000, {0, 0})};
  std::vector<model::PodRequest> pods{NamedPod("a", 1, 0, 4000), NamedPod("b", 1, 0, 4000), NamedPod("c", 8, 0, 4000)};
  for (bool burst : {false, true}) {
    SCOPED_TRACE(burst ? "burst" : "one at a time");
    auto run = RunFirstPods(nodes, pods, burst);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->pods, 3);
    EXPECT_EQ(run->failed, burst ? 0 : 1);
  }
}

// Room for a pod not seen yet: an 8-GPU node "large" and a 4-GPU node "medium" (12 GPUs of 1000
// MiB, 128 cores each), and in file order two 1-GPU pods, then an 8-GPU pod, one at a time;
// fill_pods 3 asks 10 × 1000 MiB, so the cluster is both nodes, and tune 1 plays the 3 pods. A
// 1-GPU pod costs the same on either empty node (each keeps room for the prior's shapes), and the
// node order puts "large" first: it took both, and the 8-GPU pod failed. While few pods are seen,
// nodes with fewer GPUs go first among equals (Decision::fewer_gpus_first): both take "medium",
// and the 8-GPU pod fits on "large".
TEST(Replay, WhileFewPodsAreSeenNodesWithFewerGpusGoFirstAmongEquals) {
  std::vector<model::Node> nodes{TraceNode("large", 128000, std::vector<MiB>(8, 0)),
                                 TraceNode("medium", 128000, std::vector<MiB>(4, 0))};
  ASSERT_LT(placement::NodeTieBreakRank("large", 0), placement::NodeTieBreakRank("medium", 0));
  std::vector<model::PodRequest> pods{NamedPod("a", 1, 0, 4000), NamedPod("b", 1, 0, 4000), NamedPod("c", 8, 0, 4000)};
  auto run = RunFirstPods(nodes, pods, /*burst=*/false);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->pods, 3);
  EXPECT_EQ(run->failed, 0);
}

TEST(Replay, StatisticsAreMedianMeanAndSampleSd) {
  Stat s = Summarize({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_NEAR(s.sd, std::sqrt(5.0 / 3.0), 1e-12);
  EXPECT_DOUBLE_EQ(Summarize({7}).sd, 0);
  EXPECT_DOUBLE_EQ(Summarize({3, 1, 2}).median, 2);
}

TEST(Replay, SeedListsParse) {
  EXPECT_EQ(*ParseSeeds("42-44,50"), (std::vector<uint64_t>{42, 43, 44, 50}));
  EXPECT_EQ(*ParseSeeds("7"), std::vector<uint64_t>{7});
  EXPECT_FALSE(ParseSeeds("44-42").ok());
  EXPECT_FALSE(ParseSeeds("a").ok());
  EXPECT_FALSE(ParseSeeds("1,,2").ok());
}

TEST(Report, JsonFollowsTheContract) {
  std::vector<model::Node> nodes{TraceNode("n", 64000, {0, 0})};
  ReplayOptions opts;
  opts.tune = 0;
  auto r = Replayer::Create(nodes, {NamedPod("a", 1, 0, 1), NamedPod("b", 1, 0, 1)}, opts);
  ASSERT_TRUE(r.ok());
  auto run = r->Run("fgd", [&]() { return MakePolicy("fgd", r->typical()); }, {42, 43});
  ASSERT_TRUE(run.ok());
  nlohmann::json j = RunJson(*run);
  EXPECT_EQ(j["policy"], "fgd");
  EXPECT_EQ(j["seeds"], nlohmann::json::array({42, 43}));
  EXPECT_EQ(j["pods"], 2);
  ASSERT_EQ(j["curve"].size(), 101u);
  EXPECT_EQ(j["curve"][100]["arrivedPct"], 100);
  EXPECT_EQ(j["curve"][100]["unallocatedGpuPct"]["median"], 0.0);
  EXPECT_TRUE(j["curve"][100]["fragRatePct"].contains("sd"));
  EXPECT_TRUE(j["seconds"].is_number());
  EXPECT_EQ(j["failedPods"], nlohmann::json::array({0, 0}));
  const std::string html = HtmlReport({*run}, "t");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("<polyline fill=\"none\" stroke=\"#d62728\""), std::string::npos);
  EXPECT_NE(FormatTable({*run}).find("fgd"), std::string::npos);
}

TEST(Extender, PodJsonCarriesTheGpupackLimits) {
  model::PodRequest p = NamedPod("p", 1, 810, 3152);
  p.gpu_models = {"T4", "P100"};
  nlohmann::json j = PodJson(p, "p-tuned-1");
  EXPECT_EQ(j["metadata"]["name"], "p-tuned-1");
  EXPECT_EQ(j["spec"]["containers"][0]["resources"]["limits"]["gpupack.io/gpu-memory"], "810Mi");
  EXPECT_EQ(j["spec"]["containers"][0]["resources"]["limits"]["gpupack.io/gpu"], "1");
  EXPECT_EQ(j["spec"]["containers"][0]["resources"]["requests"]["cpu"], "3152m");
  EXPECT_EQ(j["metadata"]["annotations"]["gpupack.io/gpu-model"], "T4|P100");
  nlohmann::json whole = PodJson(NamedPod("w", 2, 0, 1000), "w");
  EXPECT_FALSE(whole["spec"]["containers"][0]["resources"]["limits"].contains("gpupack.io/gpu-memory"));
  EXPECT_FALSE(MakeExtenderPolicy("ftp://x", 1).ok());
}

TEST(Policy, PodNodePolicyOverridesTheRankingOfGpupack) {
  // As NodeChoiceFollowsEachDefinition: a = [500 used, 0], b = [0, 0]; a half-GPU pod. gpupack
  // (FGD) fills a's half-used GPU. A spread node policy ranks by free memory left: a keeps
  // 0 + 1000 = 1000, b 500 + 1000 = 1500, so b; binpack keeps a.
  std::vector<model::Node> nodes{TraceNode("a", 64000, {500, 0}), TraceNode("b", 64000, {0, 0})};
  placement::TypicalWorkload m{{Spec(1000, 1, 500, 1.0)}};
  model::PodRequest half = NamedPod("half", 1, 500, 1000);
  EXPECT_EQ(PickWith("gpupack", nodes, m, half).node, 0);
  half.node_policy = model::PolicyKind::kSpread;
  EXPECT_EQ(PickWith("gpupack", nodes, m, half).node, 1);
  half.node_policy = model::PolicyKind::kBinpack;
  EXPECT_EQ(PickWith("gpupack", nodes, m, half).node, 0);
  // A spread device policy on a's node would take its empty GPU#1 instead of filling GPU#0.
  half.node_policy.reset();
  half.device_policy = model::PolicyKind::kSpread;
  const Picked spread_devices = PickWith("gpupack", {nodes[0]}, m, half);
  EXPECT_EQ(spread_devices.slots, std::vector<int>{1});
}

TEST(Inputs, WorkloadYamlCarriesThePodControls) {
  auto pods = ParseWorkloadYaml(
      "pods:\n"
      "  - {name: web, gpuMemory: 4Gi, count: 2, spreadKey: web, spreadScope: node, nodePolicy: spread,"
      " devicePolicy: binpack, gpuModelExclude: T4, gpuUuids: \"GPU-a,GPU-b\", gpuUuidsExclude: GPU-c}\n",
      "w.yaml");
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 2u);
  for (const model::PodRequest& p : *pods) {
    EXPECT_EQ(p.spread_key, "web");
    EXPECT_TRUE(p.spread_across_nodes);
    EXPECT_EQ(p.node_policy, model::PolicyKind::kSpread);
    EXPECT_EQ(p.device_policy, model::PolicyKind::kBinpack);
    EXPECT_EQ(p.excluded_gpu_models, std::vector<std::string>{"T4"});
    EXPECT_EQ(p.gpu_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
    EXPECT_EQ(p.excluded_gpu_uuids, std::vector<std::string>{"GPU-c"});
  }
  auto bad = ParseWorkloadYaml("pods:\n  - {name: a, gpus: 1, nodePolicy: tight}\n", "w.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "w.yaml:2:36: annotation gpupack.io/node-policy: \"tight\" is not binpack, spread, fgd or default");
}

// The workload entry `{name: a, KEY: "VALUE", ...}` that sets `set` under the rows' workload keys;
// `value_column` gets the (1-based) column of the last one's value in table order, the one a
// refused case refuses. False when a row of `set` has no workload key. The pod asks for 8Gi on
// one device, as the shared cases assume.
bool WorkloadEntry(const api::testing::Annotations& set, std::string* line, int* value_column) {
  *line = "  - {name: a, gpuMemory: 8Gi";
  size_t found = 0;
  for (const api::PodAnnotation& row : api::PodAnnotations()) {
    auto it = set.find(std::string(row.name));
    if (it == set.end() || row.workload_key.empty()) continue;
    *line += ", " + std::string(row.workload_key) + ": ";
    *value_column = static_cast<int>(line->size()) + 1;
    *line += "\"" + it->second + "\"";
    ++found;
  }
  *line += "}\n";
  return found == set.size();
}

// The workload file reads its annotation keys through the table's rows, as the pod parser reads a
// pod's annotations: every shared case holds for it, and a refusal comes with the parser's message
// after the position of the refused value. Before, the simulator read deviceKind, migProfile,
// gpuModel and isolation itself, and took "A100||H100", a profile "small" and migProfile beside
// deviceKind gpu.
TEST(Inputs, WorkloadYamlReadsTheAnnotationsAsThePodParserDoes) {
  std::string line;
  int column = 0;
  for (const api::testing::AcceptedCase& c : api::testing::kAcceptedCases) {
    if (!WorkloadEntry(c.set, &line, &column)) continue;
    SCOPED_TRACE(line);
    auto pods = ParseWorkloadYaml("pods:\n" + line, "w.yaml");
    ASSERT_TRUE(pods.ok()) << pods.status();
    EXPECT_EQ(api::WritePodAnnotations((*pods)[0]), c.written);
  }
  for (const api::testing::RefusedCase& c : api::testing::kRefusedCases) {
    if (!WorkloadEntry(c.set, &line, &column)) continue;
    SCOPED_TRACE(line);
    auto pods = ParseWorkloadYaml("pods:\n" + line, "w.yaml");
    ASSERT_FALSE(pods.ok());
    EXPECT_EQ(pods.status().message(), "w.yaml:2:" + std::to_string(column) + ": " + c.message);
  }
}

}  // namespace
}  // namespace gpupack::sim

#include "placement/reservation.h"

#include <gtest/gtest.h>

#include "placement/placement.h"
#include "testing/builders.h"

namespace gpupack::placement {
namespace {

// ---- builders (testing/builders.h) ----
using builders::Spec;

// Node `name` with `gpus` GPUs of 1000 MiB of `model`, each already holding `used_per_gpu` MiB of
// another pod's, and `cpu_milli` of CPU.
Node MakeNode(std::string name, int gpus, std::string model, int64_t cpu_milli, MiB used_per_gpu = 0) {
  Node n = builders::GpuNode(name, gpus, 1000, model);
  n.cpu_milli = cpu_milli;
  if (used_per_gpu > 0)
    for (Device& d : n.devices) d.shares.push_back(builders::OtherPodShare(used_per_gpu));
  return n;
}
CapacityReservation Build(const std::vector<TypicalSpec>& specs, const std::vector<Node>& nodes) {
  CapacityReservation::Builder builder(TypicalWorkload{specs}, PlacementOptions{});
  for (const Node& n : nodes) builder.AddNode(n);
  return std::move(builder).Build();
}

// Six 8-GPU A100 nodes (96 cores), two 2-GPU T4 nodes (104 cores), one 8-GPU A100 node with 128
// cores; 1000-MiB GPUs: capacity 48000 + 4000 + 8000 = 60000 MiB.
std::vector<Node> MixedCluster(MiB a100_used = 0, MiB t4_used = 0) {
  std::vector<Node> nodes;
  for (int i = 0; i < 6; ++i) nodes.push_back(MakeNode("a" + std::to_string(i), 8, "A100", 96000, a100_used));
  for (int i = 0; i < 2; ++i) nodes.push_back(MakeNode("t" + std::to_string(i), 2, "T4", 104000, t4_used));
  nodes.push_back(MakeNode("g0", 8, "A100", 128000));
  return nodes;
}
// Demand (weight × devices × MiB; whole devices count the common 1000 MiB):
//   any:  .6 × 1 × 500  = 300   hosts: every node           (capacity share 1, above ½: no reservation)
//   t4:   .2 × 1 × 500  = 100   hosts: the T4 nodes         (4000 / 60000 = 1/15)
//   big:  .0125 × 8 × 1000 = 100  hosts: g0 (120 cores)     (8000 / 60000 = 2/15)
//   cpu:  no devices, no demand.
// Total 500: shares any .6, t4 .2, big .2. Neither small set holds the other.
std::vector<TypicalSpec> MixedWorkload() {
  return {Spec(4000, 1, 500, .6), Spec(4000, 1, 500, .2, {"T4"}), Spec(120000, 8, 0, .0125), Spec(8000, 0, 0, .1875)};
}

TEST(CapacityReservation, TightnessComparesConfinedDemandWithTheFreeCapacityOfItsHosts) {
  const std::vector<Node> nodes = MixedCluster();
  CapacityReservation r = Build(MixedWorkload(), nodes);
  // Empty cluster, 60000 free: r_t4 = .2 · 60000 / 4000 = 3; r_big = .2 · 60000 / 8000 = 1.5.
  ASSERT_EQ(r.reserving().size(), 2u);
  EXPECT_DOUBLE_EQ(r.reserving()[0].tightness, 3.0);
  EXPECT_DOUBLE_EQ(r.reserving()[0].capacity_share, 4000.0 / 60000);
  EXPECT_EQ(r.reserving()[0].spec.gpu_models, std::vector<std::string>{"T4"});
  EXPECT_DOUBLE_EQ(r.reserving()[1].tightness, 1.5);
  EXPECT_EQ(r.reserving()[1].spec.device_count, 8);
  EXPECT_DOUBLE_EQ(r.Tightness(nodes[0]), 0);    // an A100 node with 96 cores hosts no reserving shape
  EXPECT_DOUBLE_EQ(r.Tightness(nodes[6]), 3.0);  // T4
  EXPECT_DOUBLE_EQ(r.Tightness(nodes[8]), 1.5);  // g0
}

// More shapes than a typical workload holds: MixedWorkload's "any" shape split into 100 shapes of
// .006 each (different CPU, all hostable everywhere), then the T4 and big shapes last. Shapes with
// the same host set price as one set, so nothing is cut and the arithmetic is the test above's.
TEST(CapacityReservation, AnyNumberOfShapesPriceByTheirHostSets) {
  std::vector<TypicalSpec> specs;
  for (int i = 0; i < 100; ++i) specs.push_back(Spec(1000 + i, 1, 500, .006));
  for (const TypicalSpec& s : MixedWorkload()) {
    if (s.gpu_models.empty() && s.device_count == 1) continue;  // the "any" shape, split above
    specs.push_back(s);
  }
  const std::vector<Node> nodes = MixedCluster();
  CapacityReservation r = Build(specs, nodes);
  ASSERT_EQ(r.reserving().size(), 2u);
  EXPECT_DOUBLE_EQ(r.reserving()[0].tightness, 3.0);
  EXPECT_EQ(r.reserving()[0].spec.gpu_models, std::vector<std::string>{"T4"});
  EXPECT_DOUBLE_EQ(r.reserving()[1].tightness, 1.5);
  EXPECT_DOUBLE_EQ(r.Tightness(nodes[6]), 3.0);
  EXPECT_DOUBLE_EQ(r.Tightness(nodes[8]), 1.5);
}

TEST(CapacityReservation, ThePriceFallsAsOtherPodsKeepOffTheHostsAndRisesAsTheyFill) {
  // A100 nodes half used (6 × 4000 free), T4 nodes half used (2 × 1000 free), g0 empty (8000):
  // 34000 free. r_t4 = .2 · 34000 / 2000 = 3.4 (its hosts filled like the rest);
  // r_big = .2 · 34000 / 8000 = .85 (its host kept empty while the rest filled).
  const std::vector<Node> nodes = MixedCluster(500, 500);
  CapacityReservation r = Build(MixedWorkload(), nodes);
  EXPECT_DOUBLE_EQ(r.Tightness(nodes[6]), 3.4);
  EXPECT_DOUBLE_EQ(r.Tightness(nodes[8]), 0.85);
}

TEST(CapacityReservation, AShapeConfinedInsideALargerSetCountsTowardsIt) {
  // Ten 8-GPU A100 nodes (80000), two 2-GPU T4 (4000), two 2-GPU V100 (4000): 88000 MiB.
  std::vector<Node> nodes;
  for (int i = 0; i < 10; ++i) nodes.push_back(MakeNode("a" + std::to_string(i), 8, "A100", 96000));
  for (int i = 0; i < 2; ++i) nodes.push_back(MakeNode("t" + std::to_string(i), 2, "T4", 64000));
  for (int i = 0; i < 2; ++i) nodes.push_back(MakeNode("v" + std::to_string(i), 2, "V100", 64000));
  // any .7 × 500 = 350; t4 .1 × 500 = 50; t4-or-v100 .2 × 500 = 100: total 500.
  // H_t4 = T4 (4000): confined = t4 alone, .1 → r = .1 · 88000 / 4000 = 2.2.
  // H_tv = T4 ∪ V100 (8000): confined = t4 + tv = .3 → r = .3 · 88000 / 8000 = 3.3.
  CapacityReservation r =
      Build({Spec(4000, 1, 500, .7), Spec(4000, 1, 500, .1, {"T4"}), Spec(4000, 1, 500, .2, {"T4", "V100"})}, nodes);
  ASSERT_EQ(r.reserving().size(), 2u);
  EXPECT_DOUBLE_EQ(r.reserving()[0].tightness, 3.3);
  EXPECT_DOUBLE_EQ(r.reserving()[1].tightness, 2.2);
  EXPECT_DOUBLE_EQ(r.Tightness(nodes[10]), 3.3);  // T4: the larger of its two sets
  EXPECT_DOUBLE_EQ(r.Tightness(nodes[12]), 3.3);  // V100
  EXPECT_DOUBLE_EQ(r.Tightness(nodes[0]), 0);
}

TEST(CapacityReservation, NothingToReserve) {
  // Unconstrained shapes only: every host set is the whole cluster.
  EXPECT_TRUE(Build({Spec(4000, 1, 500, .5), Spec(8000, 1, 0, .5)}, MixedCluster()).reserving().empty());
  // CPU-only shapes have no device demand; an empty workload or cluster has nothing to price.
  EXPECT_TRUE(Build({Spec(8000, 0, 0, 1)}, MixedCluster()).reserving().empty());
  EXPECT_TRUE(Build({}, MixedCluster()).reserving().empty());
  EXPECT_TRUE(Build(MixedWorkload(), {}).reserving().empty());
  // The T4 nodes full: nothing left to keep for t4 (it fails wherever it goes); big still reserves,
  // against 48000 + 8000 free: .2 · 56000 / 8000 = 1.4.
  CapacityReservation full_t4 = Build(MixedWorkload(), MixedCluster(0, 1000));
  ASSERT_EQ(full_t4.reserving().size(), 1u);
  EXPECT_DOUBLE_EQ(full_t4.reserving()[0].tightness, 1.4);
  // A shape no node can host (a model the cluster lacks) is confined nowhere: adding one with the
  // weight of t4 changes the shares (.6/.2/.2 of 500 become .5/.1667/.1667 of 600) but adds
  // nothing to H_t4's confined demand: r_t4 = (100/600) · 60000 / 4000 = 2.5, not (200/600) · 15 = 5.
  std::vector<TypicalSpec> with_unhostable = MixedWorkload();
  with_unhostable.push_back(Spec(4000, 1, 500, .2, {"H100"}));
  EXPECT_DOUBLE_EQ(Build(with_unhostable, MixedCluster()).Tightness(MixedCluster()[6]), 2.5);
  // A default-constructed reservation prices nothing.
  EXPECT_DOUBLE_EQ(CapacityReservation().Tightness(MixedCluster()[6]), 0);
}

TEST(CapacityReservation, ANodeThatJoinsAfterTheBuildIsPricedLikeItsPeers) {
  CapacityReservation r = Build(MixedWorkload(), MixedCluster());
  // Another hardware type (4 T4 GPUs, 48 cores): CanHost decides, t4 fits: r_t4 = 3.
  EXPECT_DOUBLE_EQ(r.Tightness(MakeNode("t9", 4, "T4", 48000)), 3.0);
  // 128 cores and 8 A100s, named differently: same type as g0.
  EXPECT_DOUBLE_EQ(r.Tightness(MakeNode("g9", 8, "A100", 128000)), 1.5);
  // 8 A100s but only 100 cores: hosts neither reserving shape.
  EXPECT_DOUBLE_EQ(r.Tightness(MakeNode("a9", 8, "A100", 100000)), 0);
}

TEST(CapacityReservation, UnhealthyDevicesNeitherHostNorCount) {
  std::vector<Node> nodes = MixedCluster();
  nodes[7].devices[0].healthy = false;
  nodes[7].devices[1].healthy = false;  // t1 is gone: T4 capacity 2000, total 58000
  CapacityReservation r = Build(MixedWorkload(), nodes);
  // r_t4 = .2 · 58000 / 2000 = 5.8; t1 hosts nothing.
  EXPECT_DOUBLE_EQ(r.Tightness(nodes[6]), 5.8);
  EXPECT_DOUBLE_EQ(r.Tightness(nodes[7]), 0);
}

// The price of a placement: the node's tightness × the device memory the pod takes, under FGD.
TEST(CapacityReservation, EvaluatePricesTheMemoryThePodTakes) {
  const std::vector<Node> nodes = MixedCluster();
  Policy fgd(PolicyKind::kFgd, TypicalWorkload{MixedWorkload()}, {}, Build(MixedWorkload(), nodes));
  const PodRequest half = builders::NamedPod("half", 1, 500, 4000);
  PodRequest whole = half;
  whole.containers[0].mem_per_device_mib = 0;
  // T4 (tightness 3): 3 × 500 = 1500 and 3 × 1000 = 3000; g0 (1.5): 750; an A100 node: 0.
  EXPECT_DOUBLE_EQ(fgd.Score(nodes[6], fgd.Summarize(nodes[6]), half).reservation_cost, 1500);
  EXPECT_DOUBLE_EQ(fgd.Score(nodes[6], fgd.Summarize(nodes[6]), whole).reservation_cost, 3000);
  EXPECT_DOUBLE_EQ(fgd.Evaluate(nodes[8], half).reservation_cost, 750);
  EXPECT_DOUBLE_EQ(fgd.Evaluate(nodes[0], half).reservation_cost, 0);
  // The second key adds it to ΔF̂ in half devices: on T4, ⌊2 · (ΔF̂ + 1500) / 1000⌋ ≥ 3 levels
  // above the same ΔF̂ without the price.
  const NodeScore t4 = fgd.Score(nodes[6], fgd.Summarize(nodes[6]), half);
  EXPECT_EQ(FillLevel(t4.fill_cost + t4.reservation_cost, 1000) - FillLevel(t4.fill_cost, 1000), 3);
  // Binpack and spread rank by their own cost only.
  Policy binpack(PolicyKind::kBinpack, TypicalWorkload{MixedWorkload()}, {}, Build(MixedWorkload(), nodes));
  EXPECT_DOUBLE_EQ(binpack.Evaluate(nodes[6], half).reservation_cost, 0);
}

}  // namespace
}  // namespace gpupack::placement

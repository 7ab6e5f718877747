#include "placement/workload.h"

#include <set>

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace gpupack::placement {
namespace {

using builders::Pod;
using builders::Spec;

TEST(TypicalWorkload, KeepsThePopularSpecsUpToCoverage) {
  // 10 pods: A×5, B×3, C×1, D×1. With 80% coverage: A (50%), B (80%) → stop. Weights 5/8, 3/8.
  std::vector<TypicalSpec> pods;
  for (int i = 0; i < 5; ++i) pods.push_back(Spec(1000, 1, 500));
  for (int i = 0; i < 3; ++i) pods.push_back(Spec(2000, 1, 0));
  pods.push_back(Spec(3000, 0, 0));
  pods.push_back(Spec(4000, 2, 0));
  TypicalWorkload w = TypicalWorkloadFromPods(pods, 0.8);
  ASSERT_EQ(w.specs.size(), 2u);
  EXPECT_EQ(w.specs[0].mem_per_device_mib, 500);
  EXPECT_DOUBLE_EQ(w.specs[0].weight, 5.0 / 8);
  EXPECT_DOUBLE_EQ(w.specs[1].weight, 3.0 / 8);
}

TEST(TypicalWorkload, EqualCountsPutTheLargerSpecFirst) {
  // C and D both 1 pod: D (4000 CPU) sorts before C (3000 CPU); 95% of 2 pods needs both.
  TypicalWorkload w = TypicalWorkloadFromPods({Spec(3000, 0, 0), Spec(4000, 2, 0)}, 0.95);
  ASSERT_EQ(w.specs.size(), 2u);
  EXPECT_EQ(w.specs[0].cpu_milli, 4000);
}

TEST(TypicalWorkload, PriorIsRelativeToTheDevice) {
  TypicalWorkload w = DefaultPriorWorkload(81920);
  double sum = 0;
  bool has_half = false, has_cpu_only = false;
  for (const auto& s : w.specs) {
    sum += s.weight;
    has_half |= s.mem_per_device_mib == 40960;
    has_cpu_only |= s.device_count == 0;
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_TRUE(has_half);
  EXPECT_TRUE(has_cpu_only);
}

// The evidence rule: half-life 10 pods (r = 2^-0.1, 1 − r = 0.066967), prior worth 10 pods at
// the steady state, every spec kept. The prior's share is 10·0.066967 / (1 + 10·0.066967) =
// 0.66967 / 1.66967 = 40.1 %, the same after one pod as after 110.
TEST(WorkloadLearner, PriorKeepsAFixedShareAndOldObservationsDecay) {
  TypicalWorkload prior{{Spec(0, 1, 0)}};
  prior.specs[0].weight = 1;
  WorkloadLearner learner(prior, 10, 10, 10, 1.0);
  TypicalWorkload cold = learner.Snapshot();
  ASSERT_EQ(cold.specs.size(), 1u);
  EXPECT_EQ(cold.specs[0].mem_per_device_mib, 0);
  EXPECT_NEAR(learner.prior_share(), 0.401, 0.001);
  learner.Observe(Pod(1, 3000));
  double first = 0;
  for (const auto& s : learner.Snapshot().specs) first += s.mem_per_device_mib == 3000 ? s.weight : 0;
  EXPECT_NEAR(first, 1 - 0.401, 0.001) << "one pod already outweighs the prior";

  for (int i = 0; i < 99; ++i) learner.Observe(Pod(1, 3000));
  for (int i = 0; i < 10; ++i) learner.Observe(Pod(1, 8192));
  TypicalWorkload w = learner.Snapshot();
  // The prior keeps 40 %. The last 10 pods (8 GiB) weigh (1 − 2^-1) = 50 % of the observed mass
  // (≈ Σ 2^(-i/10) over 110 pods ≈ 14.9), the 100 older ones the rest.
  double w8 = 0, w3 = 0, wp = 0;
  for (const auto& s : w.specs) {
    if (s.mem_per_device_mib == 8192) w8 = s.weight;
    if (s.mem_per_device_mib == 3000) w3 = s.weight;
    if (s.mem_per_device_mib == 0) wp = s.weight;
  }
  EXPECT_NEAR(wp, 0.40, 0.01);
  EXPECT_NEAR(w8, 0.30, 0.01);
  EXPECT_NEAR(w3, 0.30, 0.01);
}

// The heavier prior while pods of whole GPUs come: half-life 10 pods (r = 2^-0.1, 1 − r =
// 0.066967), the prior worth 1 pod, or 10 while whole-GPU pods come:
//   1 pod:   0.066967 / 1.066967 = 6.28 %;   10 pods: 0.66967 / 1.66967 = 40.1 %.
// A pod of 3000 MiB keeps the light share; a pod of one whole GPU makes the decayed whole count
// 1 ≥ ½; after 9 more shares it is r^9 = 0.536, after 11 r^11 = 0.467 < ½.
// A whole MIG instance does not count: it is a slice of a GPU.
TEST(WorkloadLearner, ThePriorWeighsMoreWhilePodsOfWholeGpusCome) {
  TypicalWorkload prior{{Spec(0, 1, 0)}};
  prior.specs[0].weight = 1;
  WorkloadLearner learner(prior, 10, 1, 10, 1.0);
  learner.Observe(Pod(1, 3000));
  EXPECT_NEAR(learner.prior_share(), 0.0628, 0.0001);
  PodRequest mig = Pod(1, 0);
  mig.device_kind = DeviceKindPreference::kMig;
  mig.mig_profile = "1g.10gb";
  learner.Observe(mig);
  EXPECT_NEAR(learner.prior_share(), 0.0628, 0.0001) << "a whole MIG instance is not a whole GPU";
  learner.Observe(Pod(1, 0));
  EXPECT_NEAR(learner.prior_share(), 0.401, 0.001);
  double prior_weight = 0;
  for (const auto& s : learner.Snapshot().specs)
    prior_weight += s.mem_per_device_mib == 0 && s.cpu_milli == 0 ? s.weight : 0;
  EXPECT_GT(prior_weight, 0.401) << "the blend uses the heavier share (the whole-GPU pod adds to the prior's shape)";
  for (int i = 0; i < 9; ++i) learner.Observe(Pod(1, 3000));
  EXPECT_NEAR(learner.prior_share(), 0.401, 0.001) << "r^9 = 0.536: still within a half-life";
  learner.Observe(Pod(1, 3000));
  learner.Observe(Pod(1, 3000));
  EXPECT_NEAR(learner.prior_share(), 0.0628, 0.0001) << "r^11 = 0.467: a half-life without one";
}

// The hedge for pods pinned to a GPU model. Half-life 1,000 pods (r = 2^(−1/1000)), no prior, full
// coverage; the cluster's device memory is 40 % A100, 30 % T4, 20 % V100, 10 % L4. Three unpinned
// pods of 4000 MiB: no pod names a model, so no hedge. A fourth pinned to T4 makes the pinned count
// 1 ≥ ½; the decayed count is m = 1 + r + r² + r³ = 3.99584. T4 is named by a pod seen, so its pods
// stand for themselves; A100, V100 and L4 (each under half the memory) get a whole-GPU shape each
// of 0.4 · (1/m) / 3 = 0.033368 against the observations' 1, which normalise to 0.033368 / 1.100104
// = 0.030332. With the cluster half A100 (not rare, then), V100 alone gets 0.4 · (1/m) = 0.100104,
// 0.100104 / 1.100104 = 0.090995. The hedge holds while the decayed count is under 200: after 220
// more pods (m = 207.5) it is gone, though pinned pods still come.
TEST(WorkloadLearner, HedgesForPodsPinnedToARareModelWhileFewPodsAreSeen) {
  WorkloadLearner learner(TypicalWorkload{}, 1000, 0, 0, 1.0);
  learner.SetClusterModels({{"A100", 0.4}, {"NVIDIA T4", 0.3}, {"V100", 0.2}, {"L4", 0.1}});
  auto hedge_weight = [&](const std::string& model) {
    double weight = 0;
    for (const TypicalSpec& s : learner.Snapshot().specs) {
      if (s.whole_device() && s.device_count == 1 && s.gpu_models == std::vector<std::string>{model})
        weight += s.weight;
    }
    return weight;
  };
  for (int i = 0; i < 3; ++i) learner.Observe(Pod(1, 4000, 1000));
  EXPECT_EQ(hedge_weight("V100"), 0) << "no pod has named a model";
  PodRequest pinned = Pod(1, 4000, 1000);
  pinned.gpu_models = {"T4"};
  learner.Observe(pinned);
  EXPECT_NEAR(learner.observed_mass(), 3.99584, 1e-5);
  EXPECT_EQ(hedge_weight("NVIDIA T4"), 0) << "a model a pod seen has named (\"T4\" matches \"NVIDIA T4\")";
  EXPECT_NEAR(hedge_weight("V100"), 0.030332, 1e-6);
  EXPECT_NEAR(hedge_weight("L4"), 0.030332, 1e-6);
  EXPECT_NEAR(hedge_weight("A100"), 0.030332, 1e-6);
  learner.SetClusterModels({{"A100", 0.5}, {"NVIDIA T4", 0.3}, {"V100", 0.2}});
  EXPECT_EQ(hedge_weight("A100"), 0) << "a model with half the memory is not rare";
  EXPECT_NEAR(hedge_weight("V100"), 0.090995, 1e-6);
  for (int i = 0; i < 220; ++i) learner.Observe(i % 4 == 0 ? pinned : Pod(1, 4000, 1000));
  EXPECT_GE(learner.observed_mass(), WorkloadLearner::kHedgePods);
  EXPECT_EQ(hedge_weight("V100"), 0) << "enough pods seen: the observations speak";
}

// The hedge for pods that take a whole node. Half-life 1,000 pods (r = 2^(−1/1000)), no prior,
// full coverage; the cluster's largest nodes are two kinds of 8 GPUs (96 cores and 384 GiB, 128
// cores and 768 GiB). Three one-GPU pods: none asks for several GPUs, so no hedge. A fourth asking
// for two whole GPUs makes that count 1 ≥ ½, m = 3.99584: each kind's shape (its 8 GPUs whole, its
// CPU and memory) weighs 0.5 · (1/m) · (1 − m/200) / 2 = 0.061315 against the observations' 1,
// normalised 0.061315 / 1.122630 = 0.054617; with one kind 0.122630 / 1.122630 = 0.109235. After
// 96 more one-GPU pods m = 96.6465 and the two-GPU pod counts 0.935623: 0.5 · (0.935623 / m) ·
// (1 − m/200) / 2 = 0.0012507, normalised 0.0012476. At m ≥ 200 it is gone.
TEST(WorkloadLearner, HedgesForPodsThatTakeAWholeNodeWhileFewPodsAreSeen) {
  WorkloadLearner learner(TypicalWorkload{}, 1000, 0, 0, 1.0);
  const int64_t gib = int64_t{1} << 30;
  learner.SetLargestNodes({{8, 96000, 384 * gib}, {8, 128000, 768 * gib}});
  auto hedge_weight = [&](int64_t cpu_milli) {
    double weight = 0;
    for (const TypicalSpec& s : learner.Snapshot().specs) {
      if (s.whole_device() && s.device_count == 8 && s.cpu_milli == cpu_milli) weight += s.weight;
    }
    return weight;
  };
  for (int i = 0; i < 3; ++i) learner.Observe(Pod(1, 0, 12000));
  EXPECT_EQ(hedge_weight(96000), 0) << "no pod has asked for several GPUs";
  learner.Observe(Pod(2, 0, 16000));
  EXPECT_NEAR(learner.observed_mass(), 3.99584, 1e-5);
  EXPECT_NEAR(hedge_weight(96000), 0.054617, 1e-6);
  EXPECT_NEAR(hedge_weight(128000), 0.054617, 1e-6);
  for (const TypicalSpec& s : learner.Snapshot().specs) {
    if (s.device_count == 8) {
      EXPECT_EQ(s.memory_bytes, s.cpu_milli == 96000 ? 384 * gib : 768 * gib);
    }
  }
  learner.SetLargestNodes({{8, 128000, 768 * gib}});
  EXPECT_EQ(hedge_weight(96000), 0);
  EXPECT_NEAR(hedge_weight(128000), 0.109235, 1e-6);
  learner.SetLargestNodes({{8, 96000, 384 * gib}, {8, 128000, 768 * gib}});
  for (int i = 0; i < 96; ++i) learner.Observe(Pod(1, 0, 12000));
  EXPECT_NEAR(learner.observed_mass(), 96.6465, 1e-4);
  EXPECT_NEAR(hedge_weight(96000), 0.0012476, 1e-7) << "fading as the pods seen near 200";
  for (int i = 0; i < 120; ++i) learner.Observe(i % 10 == 0 ? Pod(2, 0, 16000) : Pod(1, 0, 12000));
  EXPECT_GE(learner.observed_mass(), WorkloadLearner::kHedgePods);
  EXPECT_EQ(hedge_weight(96000), 0) << "enough pods seen: the observations speak";
}

// Coverage keeps the heaviest specs until their share reaches it: with weights .5/.3/.15/.05
// (no prior), 0.9 keeps three (.5 + .3 = .8 < .9 ≤ .95) and renormalises them to sum 1.
TEST(WorkloadLearner, CoverageDropsTheRarestShapes) {
  WorkloadLearner learner(TypicalWorkload{}, 1e9, 0, 0, 0.9);
  const std::pair<MiB, int> counts[] = {{100, 50}, {200, 30}, {300, 15}, {400, 5}};
  for (const auto& [mem, n] : counts) {
    for (int i = 0; i < n; ++i) learner.Observe(Pod(1, mem));
  }
  TypicalWorkload w = learner.Snapshot();
  ASSERT_EQ(w.specs.size(), 3u);
  EXPECT_EQ(w.specs[0].mem_per_device_mib, 100);
  EXPECT_EQ(w.specs[2].mem_per_device_mib, 300);
  EXPECT_NEAR(w.specs[0].weight, .5 / .95, 1e-6);
  EXPECT_NEAR(w.specs[2].weight, .15 / .95, 1e-6);
  // Full coverage keeps the rare one too.
  WorkloadLearner all(TypicalWorkload{}, 1e9, 0, 0, 1.0);
  for (const auto& [mem, n] : counts) {
    for (int i = 0; i < n; ++i) all.Observe(Pod(1, mem));
  }
  EXPECT_EQ(all.Snapshot().specs.size(), 4u);
}

// The cut counts whole pods, larger shapes first among equals, as FGD's typical set does; the
// decay does not decide among shapes seen equally often. An 8-GPU pod (88 cores) comes first, then
// 19 one-GPU pods of 19 CPU sizes, 1000 + 100·i millicores for i = 0..18 (half-life 1,000 pods, no
// prior). Each weighs 1/20 within 2 % (the 8-GPU pod, the oldest, 2^(−19/1000) = 0.987 of the
// newest) and counts as one pod. At coverage 0.88, 17 shapes cover about 0.85 and 18 about 0.90,
// so 18 stay: the 8-GPU pod and the 17 largest one-GPU pods, the cut dropping the two smallest
// (1000 and 1100 millicores). Ranked by weight alone, it dropped the two oldest: the 8-GPU pod
// and the 1000-millicore one.
TEST(WorkloadLearner, CoverageCountsWholePodsAndKeepsTheLargerShapeOfEqualCounts) {
  WorkloadLearner learner(TypicalWorkload{}, 1000, 0, 0, 0.88);
  learner.Observe(Pod(8, 0, 88000));
  for (int i = 0; i < 19; ++i) learner.Observe(Pod(1, 0, 1000 + 100 * i));
  const TypicalWorkload w = learner.Snapshot();
  ASSERT_EQ(w.specs.size(), 18u);
  std::set<int64_t> cpus;
  for (const auto& s : w.specs) cpus.insert(s.cpu_milli);
  EXPECT_TRUE(cpus.contains(88000)) << "the 8-GPU pod, seen once like every other, is the largest";
  EXPECT_FALSE(cpus.contains(1000));
  EXPECT_FALSE(cpus.contains(1100));
  EXPECT_TRUE(cpus.contains(1200));
  // Normalised and heaviest first: the newest pod (2800 millicores) leads.
  EXPECT_EQ(w.specs.front().cpu_milli, 2800);
  double sum = 0;
  for (const auto& s : w.specs) sum += s.weight;
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

// A snapshot keeps at most kMaxTypicalSpecs shapes, the heaviest: a shape seen once among 70 seen
// twice each is cut even at full coverage. EveryShape keeps it, weights summing to 1: 70 · 2 + 1 =
// 141 pods (no prior; a half-life of 10⁹ pods decays them by less than 10⁻⁷), so the rare one
// weighs 1/141.
TEST(WorkloadLearner, EveryShapeKeepsWhatTheSnapshotCuts) {
  WorkloadLearner learner(TypicalWorkload{}, 1e9, 0, 0, 1.0);
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 70; ++i) learner.Observe(Pod(1, 100 + i));
  }
  learner.Observe(Pod(1, 5000));
  auto has_rare = [](const TypicalWorkload& w) {
    for (const auto& s : w.specs) {
      if (s.mem_per_device_mib == 5000) return true;
    }
    return false;
  };
  const TypicalWorkload snapshot = learner.Snapshot(1.0);
  EXPECT_EQ(snapshot.specs.size(), static_cast<size_t>(kMaxTypicalSpecs));
  EXPECT_FALSE(has_rare(snapshot));
  const TypicalWorkload every = learner.EveryShape();
  ASSERT_EQ(every.specs.size(), 71u);
  EXPECT_TRUE(has_rare(every));
  EXPECT_EQ(every.specs.back().mem_per_device_mib, 5000);  // heaviest first
  EXPECT_NEAR(every.specs.back().weight, 1.0 / 141, 1e-8);
  double sum = 0;
  for (const auto& s : every.specs) sum += s.weight;
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

// Shapes are kept exact: on a 16000 MiB GPU a 12960 MiB pod and a 3040 MiB pod fill it together
// (12960 + 3040 = 16000). Rounded up to 1 GiB buckets they would be 13312 + 3072 = 16384 and no
// longer fit, and every price built from the learned shapes would say so.
TEST(WorkloadLearner, KeepsExactSizesSoShapesThatFitTogetherStillDo) {
  WorkloadLearner learner(TypicalWorkload{}, 1e9, 0, 0, 1.0);
  learner.Observe(Pod(1, 12960));
  learner.Observe(Pod(1, 3040));
  MiB sum = 0;
  for (const auto& s : learner.Snapshot().specs) sum += s.mem_per_device_mib;
  EXPECT_EQ(sum, 16000);
  EXPECT_EQ(SpecOfPod(Pod(1, 12960)).mem_per_device_mib, 12960);
}

// Host memory is a statistic of a shape, not part of it: pods that differ only in memory are one
// shape, whose memory is their decayed mean. Half-life 1 pod: each pod weighs twice the one
// before, so 30 MiB then 60 MiB give (1·30 + 2·60) / 3 = 50 MiB; a 2-device pod is its own shape.
TEST(WorkloadLearner, HostMemoryIsTheShapesMeanNotItsIdentity) {
  WorkloadLearner learner(TypicalWorkload{}, 1, 0, 0, 1.0);
  PodRequest a = Pod(1, 500), b = Pod(1, 500), c = Pod(1, 500);
  a.memory_bytes = int64_t{30} << 20;
  b.memory_bytes = int64_t{60} << 20;
  c.containers[0].device_count = 2;
  c.memory_bytes = int64_t{90} << 20;
  learner.Observe(a);
  learner.Observe(b);
  learner.Observe(c);
  const TypicalWorkload every = learner.EveryShape();
  ASSERT_EQ(every.specs.size(), 2u);
  for (const TypicalSpec& s : every.specs) {
    EXPECT_EQ(s.memory_bytes, (s.device_count == 1 ? int64_t{50} : int64_t{90}) << 20) << s.device_count;
  }
  // The same for FGD's typical set from a fixed list: (30 + 60) / 2 = 45 MiB.
  TypicalSpec x = Spec(1000, 1, 500), y = Spec(1000, 1, 500);
  x.memory_bytes = int64_t{30} << 20;
  y.memory_bytes = int64_t{60} << 20;
  const TypicalWorkload fixed = TypicalWorkloadFromPods({x, y}, 1.0);
  ASSERT_EQ(fixed.specs.size(), 1u);
  EXPECT_EQ(fixed.specs[0].memory_bytes, int64_t{45} << 20);
}

// The number of distinct shapes the learner holds is bounded: 4 × kMaxTypicalSpecs, the lightest
// dropped first. 300 distinct sizes seen once each, then size 7 seen twice: 256 remain, size 7
// (the heaviest) among them.
TEST(WorkloadLearner, BoundsTheDistinctShapes) {
  WorkloadLearner learner(TypicalWorkload{}, 1e9, 0, 0, 1.0);
  for (int i = 0; i < 300; ++i) learner.Observe(Pod(1, 1000 + i));
  learner.Observe(Pod(1, 7));
  learner.Observe(Pod(1, 7));
  const TypicalWorkload every = learner.EveryShape();
  EXPECT_EQ(every.specs.size(), static_cast<size_t>(4 * kMaxTypicalSpecs));
  EXPECT_EQ(every.specs.front().mem_per_device_mib, 7);
}

// SetPrior swaps the prior and keeps the observations: half-life 1 pod (1 − r = 0.5) and a prior
// worth 2 pods give the prior 2·0.5 / (1 + 2·0.5) = one half, the one pod observed the other.
TEST(WorkloadLearner, SetPriorKeepsObservations) {
  TypicalWorkload old_prior{{Spec(0, 1, 0)}};
  old_prior.specs[0].weight = 1;
  WorkloadLearner learner(old_prior, 1, 2, 2, 1.0);
  learner.Observe(Pod(1, 500));
  learner.SetPrior(DefaultPriorWorkload(16000));
  double observed = 0, whole = 0;
  for (const auto& s : learner.EveryShape().specs) {
    if (s.mem_per_device_mib == 500) observed = s.weight;
    if (s.device_count == 1 && s.mem_per_device_mib == 0) whole += s.weight;
  }
  EXPECT_NEAR(observed, 0.5, 1e-6);
  EXPECT_NEAR(whole, 0.5 * 0.30, 1e-6);  // the new prior's 30 % whole devices
}

}  // namespace
}  // namespace gpupack::placement

#include "placement/completion.h"

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "placement/placement.h"
#include "testing/builders.h"

namespace gpupack::placement {
namespace {

// ---- builders (testing/builders.h): n1 has 64 cores, a pod asks for 4 of them ----
using builders::Gpu;
using builders::NodeOf;

TypicalSpec Slice(MiB mem, double weight, int devices = 1) { return builders::Spec(4000, devices, mem, weight); }
TypicalSpec Whole(int devices, double weight) { return Slice(0, weight, devices); }
Node MakeNode(std::vector<Device> devices) { return NodeOf(std::move(devices), 64000); }
PodRequest Pod(MiB mem) { return builders::Pod(1, mem, 4000); }
double PriceOf(const CompletionValue::Table& table, MiB slice) {
  for (const auto& p : table.prices) {
    if (p.slice_mib == slice) return p.devices;
  }
  ADD_FAILURE() << "no price for " << slice;
  return -1;
}

// 1000-MiB devices; demand (weight × devices): 650 → 1, 320 → 2, 470 → 2.
// The cutting-stock LP packs {650, 320} once, {470, 470} once and a third of {320, 320, 320}:
// 2 1/3 devices. Its dual: y650 + y320 ≤ 1, 3·y320 ≤ 1, 2·y470 ≤ 1 are tight, so y320 = 1/3,
// y650 = 2/3, y470 = 1/2, and 1·2/3 + 2·1/3 + 2·1/2 = 2 1/3 matches. {470, 320}: 5/6 ≤ 1.
TypicalWorkload ThreeSlices() { return TypicalWorkload{{Slice(650, 1), Slice(320, 2), Slice(470, 2)}}; }

TEST(CompletionValue, PricesAreTheCuttingStockDual) {
  CompletionValue cv = CompletionValue::Build(ThreeSlices(), {1000});
  ASSERT_EQ(cv.tables().size(), 1u);
  const auto& t = cv.tables()[0];
  EXPECT_EQ(t.capacity_mib, 1000);
  EXPECT_EQ(t.quantum_mib, 10);  // the sizes' gcd: exact
  EXPECT_TRUE(t.exact);
  ASSERT_EQ(t.prices.size(), 3u);
  EXPECT_EQ(t.prices[0].slice_mib, 650);  // largest first
  EXPECT_NEAR(PriceOf(t, 650), 2.0 / 3, 1e-9);
  EXPECT_NEAR(PriceOf(t, 470), 1.0 / 2, 1e-9);
  EXPECT_NEAR(PriceOf(t, 320), 1.0 / 3, 1e-9);
}

TEST(CompletionValue, ValueIsTheBestFillingOfTheFreeSlice) {
  CompletionValue cv = CompletionValue::Build(ThreeSlices(), {1000});
  const int t = cv.TableFor(1000);
  // K in MiB = devices × 1000.
  struct Case {
    MiB free;
    double devices;
    const char* why;
  };
  const Case cases[] = {
      {1000, 1.0, "650 + 320, or 470 + 470"},
      {680, 2.0 / 3, "650 (2/3) beats 320 + 320 (2/3, equal) and 470 (1/2)"},
      {530, 1.0 / 2, "470"},
      {350, 1.0 / 3, "320"},
      {319, 0.0, "nothing fits"},
      {5000, 1.0, "beyond the capacity counts as the capacity"},
      {0, 0.0, "nothing free"},
  };
  for (const Case& c : cases) EXPECT_NEAR(cv.Value(t, c.free), 1000 * c.devices, 1e-6) << c.why;
}

TEST(CompletionValue, LossOfAPickIsTheValueItGivesUp) {
  CompletionValue cv = CompletionValue::Build(ThreeSlices(), {1000});
  const int t = cv.TableFor(1000);
  // A 320 pod. Its own price is 1/3 of a device, so a loss of 1/3 wastes nothing:
  EXPECT_NEAR(cv.Loss(t, 1000, 680), 1000 * (1 - 2.0 / 3), 1e-6);  // empty device: 650 can join
  EXPECT_NEAR(cv.Loss(t, 350, 30), 1000 * (1.0 / 3 - 0), 1e-6);    // next to a 650: completes it
  // Next to a 470: the 530 free was worth a 470 (1/2); what is left (210) is worth nothing.
  EXPECT_NEAR(cv.Loss(t, 530, 210), 1000 * (1.0 / 2 - 0), 1e-6);  // 1/6 of a device wasted
}

TEST(CompletionValue, OnlyFractionalSharesOfAGpuArePriced) {
  TypicalSpec mig = Slice(400, 1);
  mig.mig_profile = "3g.40gb";
  TypicalSpec cpu_only = Slice(0, 1, 0);
  // 400 × 2 devices counts demand 2; the whole-device, MIG, CPU-only and too-large shapes none.
  CompletionValue cv = CompletionValue::Build(
      TypicalWorkload{{Slice(400, 1, 2), Whole(1, 5), mig, cpu_only, Slice(1000, 1), Slice(1200, 1)}}, {1000});
  ASSERT_EQ(cv.tables()[0].prices.size(), 1u);
  EXPECT_EQ(cv.tables()[0].prices[0].slice_mib, 400);
  EXPECT_NEAR(cv.tables()[0].prices[0].devices, 0.5, 1e-9);  // two per device

  EXPECT_TRUE(CompletionValue::Build(TypicalWorkload{{Whole(1, 1)}}, {1000}).tables()[0].prices.empty());
  EXPECT_TRUE(CompletionValue::Build(ThreeSlices(), {}).empty());
  EXPECT_TRUE(CompletionValue().empty());
}

TEST(CompletionValue, OneTablePerCapacityAndTheNearestForANewOne) {
  // A 30000-MiB slice: two fit an 80 GiB device (1/2 each), one a 40 GiB device (1). Its own
  // size is the quantum, exact.
  CompletionValue cv = CompletionValue::Build(TypicalWorkload{{Slice(30000, 1)}}, {81920, 40960, 81920, 0});
  ASSERT_EQ(cv.tables().size(), 2u);
  EXPECT_EQ(cv.tables()[0].capacity_mib, 40960);
  EXPECT_EQ(cv.tables()[0].quantum_mib, 30000);
  EXPECT_TRUE(cv.tables()[1].exact);
  EXPECT_NEAR(cv.tables()[0].prices[0].devices, 1.0, 1e-9);
  EXPECT_NEAR(cv.tables()[1].prices[0].devices, 0.5, 1e-9);
  EXPECT_EQ(cv.TableFor(81920), 1);
  EXPECT_EQ(cv.TableFor(40960), 0);
  EXPECT_EQ(cv.TableFor(49152), 0);  // 48 GiB: nearer 40 than 80
  EXPECT_EQ(cv.TableFor(98304), 1);
  // Exact to the MiB: 29999 free is too small for the slice, 30000 is not.
  EXPECT_EQ(cv.Value(1, 29999), 0);
  EXPECT_NEAR(cv.Value(1, 30000), 0.5 * 81920, 1e-6);
  EXPECT_NEAR(cv.Value(1, 59999), 0.5 * 81920, 1e-6);
  EXPECT_NEAR(cv.Value(1, 60000), 81920, 1e-6);
}

// Two slices that fill a device to the MiB are seen to: the second one's loss is its own price,
// it wastes nothing. A MIG 1g.10gb instance (9728 MiB) with the trace's 0.81 and 0.19 pods
// (7879 + 1848 = 9727 MiB); in quanta of 10 MiB rounded up they were 788 + 185 > 972 and the
// pair looked as if it did not fit. Demand 1 and 6: one device holds the pair and five more
// 1848s fill another, so y1848 = 1/5 and y7879 = 4/5 (1 · 4/5 + 6 · 1/5 = 2 devices).
TEST(CompletionValue, SlicesThatFillADeviceExactlyWasteNothing) {
  const CompletionValue cv = CompletionValue::Build(TypicalWorkload{{Slice(7879, 1), Slice(1848, 6)}}, {9728});
  const auto& t = cv.tables()[0];
  EXPECT_EQ(t.quantum_mib, 1);  // sizes share no factor: the sparse knapsack
  EXPECT_TRUE(t.exact);
  EXPECT_NEAR(PriceOf(t, 7879), 4.0 / 5, 1e-9);
  EXPECT_NEAR(PriceOf(t, 1848), 1.0 / 5, 1e-9);
  EXPECT_NEAR(cv.Loss(0, 9728 - 7879, 9728 - 7879 - 1848), 9728 * PriceOf(t, 1848), 1e-6);
  EXPECT_NEAR(cv.Loss(0, 9728 - 1848, 9728 - 1848 - 7879), 9728 * PriceOf(t, 7879), 1e-6);
  EXPECT_NEAR(cv.Value(0, 1848), 9728 * PriceOf(t, 1848), 1e-6);
  EXPECT_EQ(cv.Value(0, 1847), 0);  // one MiB short
}

// K reference: a dense knapsack over every MiB on the table's own prices.
std::vector<double> DenseReference(const CompletionValue::Table& t) {
  std::vector<double> best(t.capacity_mib + 1, 0.0);
  for (MiB c = 1; c <= t.capacity_mib; ++c) {
    best[c] = best[c - 1];
    for (const auto& p : t.prices) {
      if (p.slice_mib <= c) best[c] = std::max(best[c], best[c - p.slice_mib] + p.devices);
    }
  }
  return best;
}

// Shapes that share a factor count in quanta of it, exactly: whole-GiB slices on a 141 GiB
// device in GiB (141 quanta), K matching the dense knapsack at every MiB. The 0.81 and 0.19 pods
// of a 16000 MiB GPU (gpu_milli × 16 MiB: 12960 and 3040, gcd 160) fill it exactly; demand 1 and
// 3 puts them together once and two 0.19s in 2/5 of a device of five: y = 4/5 and 1/5.
TEST(CompletionValue, SharedFactorsCountInQuantaOfTheirGcd) {
  std::vector<TypicalSpec> gi;
  for (int g : {5, 7, 13, 20, 33, 41, 64, 100}) gi.push_back(Slice(g * 1024, 1.0 / g));
  const CompletionValue big = CompletionValue::Build(TypicalWorkload{gi}, {144384}, /*sparse_budget=*/0);
  const auto& t = big.tables()[0];
  EXPECT_EQ(t.quantum_mib, 1024);  // no sparse search needed
  EXPECT_TRUE(t.exact);
  const std::vector<double> reference = DenseReference(t);
  for (MiB free = 0; free <= t.capacity_mib; free += 97) {
    ASSERT_NEAR(big.Value(0, free), reference[free] * t.capacity_mib, 1e-6) << free;
  }

  const CompletionValue gpu = CompletionValue::Build(TypicalWorkload{{Slice(12960, 1), Slice(3040, 3)}}, {16000});
  const auto& g = gpu.tables()[0];
  EXPECT_EQ(g.quantum_mib, 160);
  EXPECT_NEAR(PriceOf(g, 12960), 4.0 / 5, 1e-9);
  EXPECT_NEAR(PriceOf(g, 3040), 1.0 / 5, 1e-9);
  EXPECT_NEAR(gpu.Loss(0, 3040, 0), 16000 * PriceOf(g, 3040), 1e-6);
}

// The sparse knapsack's steps are K at every MiB: unrelated sizes, against the dense knapsack.
TEST(CompletionValue, StepsAreTheDenseKnapsackAtEveryMiB) {
  const TypicalWorkload w{
      {Slice(3001, 2), Slice(2417, 1), Slice(1733, 3), Slice(1101, 1), Slice(777, 2), Slice(5003, 1), Slice(419, 1)}};
  const CompletionValue cv = CompletionValue::Build(w, {7919});
  const auto& t = cv.tables()[0];
  ASSERT_EQ(t.quantum_mib, 1);
  EXPECT_GT(t.step_mib.size(), 10u);
  const std::vector<double> reference = DenseReference(t);
  for (MiB free = 0; free <= t.capacity_mib; ++free) {
    ASSERT_NEAR(cv.Value(0, free), reference[free] * t.capacity_mib, 1e-6) << free;
  }
  EXPECT_NEAR(cv.Value(0, 100000), reference.back() * t.capacity_mib, 1e-6);
  EXPECT_EQ(cv.Value(0, -5), 0);
}

// Past the sparse budget the table falls back to quanta of 1/1024 of the capacity, sizes and
// free memory rounded down, so slices that fill the device still fit: on 10240 MiB (10-MiB
// quanta) 6143 + 4097 MiB are 614 + 409 ≤ 1024 quanta (rounded up: 615 + 410 > 1024). Demand 1
// and 3: the pair once and two 4097s on another device, so y = 1/2 each.
TEST(CompletionValue, PastTheSparseBudgetTheGridRoundsTowardFitting) {
  const TypicalWorkload w{{Slice(6143, 1), Slice(4097, 3)}};
  EXPECT_EQ(CompletionValue::Build(w, {10240}).tables()[0].quantum_mib, 1);  // within the default budget
  const CompletionValue cv = CompletionValue::Build(w, {10240}, /*sparse_budget=*/2);
  const auto& t = cv.tables()[0];
  ASSERT_EQ(t.quantum_mib, 10);
  EXPECT_FALSE(t.exact);
  EXPECT_NEAR(PriceOf(t, 6140), 1.0 / 2, 1e-9);
  EXPECT_NEAR(PriceOf(t, 4090), 1.0 / 2, 1e-9);
  EXPECT_NEAR(cv.Loss(0, 4097, 0), 10240 * PriceOf(t, 4090), 1e-6);  // completes the device
  // Free memory rounds down to the quantum: 4089 MiB is 408 quanta, too few for the 409 of 4097.
  EXPECT_NEAR(cv.Value(0, 4090), 10240 * PriceOf(t, 4090), 1e-6);
  EXPECT_EQ(cv.Value(0, 4089), 0);
  // A slice smaller than one quantum counts as one: 1024 to a device.
  const CompletionValue tiny = CompletionValue::Build(TypicalWorkload{{Slice(7, 1), Slice(11, 1)}}, {10240}, 2);
  ASSERT_EQ(tiny.tables()[0].quantum_mib, 10);
  ASSERT_EQ(tiny.tables()[0].prices.size(), 1u);  // 7 and 11 MiB both count as 10
  EXPECT_NEAR(PriceOf(tiny.tables()[0], 10), 1.0 / 1024, 1e-9);
}

TEST(CompletionValue, LossLevelsFloorInThousandthsOfAUnitDevice) {
  // 1/16 of a 1000-MiB device is 62.5 MiB: float noise on either side stays on level 62, and a
  // whole level (1/8: 125) stays whole.
  EXPECT_EQ(CompletionLossLevel(62.5 + 1e-9, 1000), 62);
  EXPECT_EQ(CompletionLossLevel(62.5 - 1e-9, 1000), 62);
  EXPECT_EQ(CompletionLossLevel(125 - 1e-9, 1000), 125);
  EXPECT_EQ(CompletionLossLevel(0, 1000), 0);
  EXPECT_EQ(CompletionLossLevel(81920.0 / 3, 81920), 333);
}

// The device choice inside a node: a 320 pod on a node with one device holding a 470 and one
// empty. FGD alone takes the 470's device (it leaves the empty one whole for the whole-device
// pods); the completion loss sends the pod to the empty device, where a 650 can still join it
// (loss 1/3 vs 1/2, from the example above).
TEST(CompletionValue, PolicyPicksTheDeviceThatLosesLeast) {
  const Node node = MakeNode({Gpu(1000, 470), Gpu(1000)});
  std::vector<TypicalSpec> specs = ThreeSlices().specs;
  specs.push_back(Whole(1, 5));
  const Policy fgd(PolicyKind::kFgd, TypicalWorkload{specs}, {});
  const NodeEvaluation without = fgd.Evaluate(node, Pod(320));
  ASSERT_TRUE(without.verdict.fits());
  EXPECT_EQ(without.placement.containers[0].device_slots, std::vector<int>{0});
  EXPECT_EQ(without.completion_loss, 0);

  const Policy complete(PolicyKind::kFgd, TypicalWorkload{specs}, {}, {},
                        CompletionValue::Build(TypicalWorkload{specs}, {1000}));
  const NodeEvaluation with = complete.Evaluate(node, Pod(320));
  ASSERT_TRUE(with.verdict.fits());
  EXPECT_EQ(with.placement.containers[0].device_slots, std::vector<int>{1});
  EXPECT_NEAR(with.completion_loss, 1000.0 / 3, 1e-6);
  const NodeScore score = complete.Score(node, complete.Summarize(node), Pod(320));
  EXPECT_NEAR(score.completion_loss, with.completion_loss, 1e-9);  // Score agrees with Evaluate
  // A whole-device pod takes a device whatever the slices on offer: no loss to rank by.
  EXPECT_EQ(complete.Evaluate(node, Pod(0)).completion_loss, 0);
}

}  // namespace
}  // namespace gpupack::placement

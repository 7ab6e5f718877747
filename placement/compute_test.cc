// The compute dimension (docs/placement.md, "Compute"): the proportional share, the fit and its
// verdict, the two-dimensional fragmentation and device pick, and the ledger, with the sums
// written out.
#include <gtest/gtest.h>

#include "placement/compute_cost.h"
#include "placement/placement.h"
#include "testing/builders.h"

namespace gpupack::placement {
namespace {

using builders::Gpu;
using builders::Mig;
using builders::NodeOf;
using builders::Pod;
using builders::Spec;

// A pod of one container asking `mem` MiB and `compute` % on each of `devices` devices.
PodRequest ComputePod(int devices, MiB mem, int compute) {
  PodRequest pod = Pod(devices, mem);
  pod.containers[0].compute_pct = compute;
  return pod;
}

// A device holding another pod's share of `mem` MiB that reserves `compute` %.
Device GpuWithShare(MiB capacity, MiB mem, int compute) {
  Device d = Gpu(capacity, mem);
  d.shares[0].compute_pct = compute;
  return d;
}

TypicalSpec ComputeSpec(MiB mem, int compute, double weight) {
  TypicalSpec s = Spec(0, 1, mem, weight);
  s.compute_pct = compute;
  return s;
}

Policy Fgd(std::vector<TypicalSpec> specs) { return Policy(PolicyKind::kFgd, TypicalWorkload{std::move(specs)}, {}); }

TEST(Compute, ProportionalShareIsTheMemoryShareRoundedDown) {
  struct Case {
    MiB mem, capacity;
    int pct;
  };
  const Case cases[] = {
      {20480, 81920, 25},                     // 100 · 20480 / 81920 = 25
      {1000, 81920, 1},                       // 100 · 1000 / 81920 = 1.22 → 1
      {500, 81920, 0},                        // 0.61 → 0: under 1 % of the memory reserves no compute
      {81920, 81920, 100}, {4864, 9728, 50},  // half a 1g.10gb MIG instance: half of the instance's SMs
      {100, 0, 0},                            // no capacity
  };
  for (const Case& c : cases) EXPECT_EQ(model::ProportionalComputePct(c.mem, c.capacity), c.pct) << c.mem;
  // Memory-only shares never sum over 100 %: three thirds of 1000 MiB plus one MiB are
  // 33 + 33 + 33 = 99 %.
  EXPECT_EQ(3 * model::ProportionalComputePct(333, 1000), 99);
}

// The memory bound a free compute share sets on the specs without a share of their own agrees
// with the share itself at every percent and every memory below the capacity: for 1000 MiB and
// 30 %, ⌊100 · 309 / 1000⌋ = 30 fits and ⌊100 · 310 / 1000⌋ = 31 does not, so the bound is
// (31 · 1000 − 1) / 100 = 309.
TEST(Compute, FreeComputeBoundsTheMemoryOfProportionalShares) {
  EXPECT_EQ(model::LargestMemoryWithinComputePct(30, 1000), 309);
  EXPECT_EQ(model::LargestMemoryWithinComputePct(0, 81920), 819);  // 100 · 819 / 81920 = 0.9998
  for (const MiB capacity : {MiB{1000}, MiB{9728}, MiB{16000}, MiB{81920}}) {
    for (int pct = 0; pct <= model::kDeviceComputePct; ++pct) {
      const MiB bound = model::LargestMemoryWithinComputePct(pct, capacity);
      for (MiB mem = 1; mem<capacity; mem += capacity> 1000 ? 7 : 1) {
        ASSERT_EQ(model::ProportionalComputePct(mem, capacity) <= pct, mem <= bound)
            << mem << " MiB of " << capacity << " at " << pct << " %";
      }
    }
  }
}

// gpupack.io/isolation: hard asks a GPU to hold the memory cap (R615 cgroup limits) and, for a
// container that asks for compute, the compute cap (an MPS v3 namespace) as boundaries; a MIG
// instance under hard isolation is taken whole, its SMs with it.
TEST(Compute, HardIsolationRefusesGpusWhoseComputeCapIsNoBoundary) {
  PodRequest hard_compute = ComputePod(1, 8192, 30);
  hard_compute.hard_isolation = true;
  PodRequest hard_memory = Pod(1, 8192);
  hard_memory.hard_isolation = true;
  Device memory_capped = Gpu(81920);
  memory_capped.hard_isolation = true;  // cgroup-dmem, compute enforcement none or mps-client
  Device both = memory_capped;
  both.hard_compute_isolation = true;  // mps-namespace
  Policy policy = Fgd({});
  const NodeEvaluation refused = policy.Evaluate(NodeOf({memory_capped}), hard_compute);
  EXPECT_EQ(refused.verdict.reason, RejectReason::kNoMatchingDevice);
  EXPECT_TRUE(refused.verdict.unresolvable);
  EXPECT_EQ(refused.verdict.Message(), "no device matches any device, hard isolation of memory and compute");
  EXPECT_TRUE(policy.Evaluate(NodeOf({both}), hard_compute).verdict.fits());
  // Memory-only asks need only the memory cap; compute asks without hard isolation need nothing.
  EXPECT_TRUE(policy.Evaluate(NodeOf({memory_capped}), hard_memory).verdict.fits());
  EXPECT_TRUE(policy.Evaluate(NodeOf({Gpu(81920)}), ComputePod(1, 8192, 30)).verdict.fits());
  // The whole MIG instance: 100 % of its own SMs, a hardware partition.
  NodeEvaluation on_mig = policy.Evaluate(NodeOf({Mig("3g.40gb", 40960)}), hard_compute);
  ASSERT_TRUE(on_mig.verdict.fits()) << on_mig.verdict.Message();
  EXPECT_TRUE(on_mig.placement.containers[0].exclusive);
}

TEST(Compute, FitNeedsTheShareFreeAndSaysWhatIsLargest) {
  // 80 GiB GPU holding 8 GiB at 70 %: 72 GiB but only 30 % free. 10 GiB at 40 % does not fit.
  Node node = NodeOf({GpuWithShare(81920, 8192, 70)});
  Policy fgd = Fgd({Spec(0, 1, 10240, 1)});
  NodeEvaluation e = fgd.Evaluate(node, ComputePod(1, 10240, 40));
  EXPECT_EQ(e.verdict.reason, RejectReason::kInsufficientDeviceCompute);
  EXPECT_FALSE(e.verdict.unresolvable);
  EXPECT_EQ(e.verdict.Message(), "needs 40 % compute, largest free share 30 %");
  // 30 % fits: 70 + 30 = 100.
  EXPECT_TRUE(fgd.Evaluate(node, ComputePod(1, 10240, 30)).verdict.fits());
  // Two devices at 40 %, on two such GPUs.
  Node two = NodeOf({GpuWithShare(81920, 8192, 70), GpuWithShare(81920, 8192, 80)});
  EXPECT_EQ(fgd.Evaluate(two, ComputePod(2, 10240, 40)).verdict.Message(),
            "needs 40 % compute on each of 2 devices, largest free share 30 %");
}

TEST(Compute, MemoryOnlyPodReservesItsMemoryShare) {
  // GPU 0 holds 8 GiB at 90 %: 10 % free. A memory-only 20 GiB pod reserves 25 % (20480 / 81920),
  // so it fits only GPU 1, although GPU 0 has more memory free for best fit, and under a policy
  // that knows nothing of compute.
  Node node = NodeOf({GpuWithShare(81920, 8192, 90), Gpu(81920, 40960)});
  Policy binpack(PolicyKind::kBinpack, TypicalWorkload{{Spec(0, 1, 0, 1)}}, {});
  NodeEvaluation e = binpack.Evaluate(node, Pod(1, 20480));
  ASSERT_TRUE(e.verdict.fits()) << e.verdict.Message();
  EXPECT_EQ(e.placement.containers[0].device_slots, std::vector<int>{1});
  EXPECT_EQ(e.placement.containers[0].compute_pct, std::vector<int>{25});
  // 80 GiB: on GPU 0 only 10 % is left. The memory is there, the compute is not.
  Node one = NodeOf({GpuWithShare(81920, 8192, 90)});
  EXPECT_EQ(binpack.Evaluate(one, Pod(1, 40960)).verdict.Message(), "needs 50 % compute, largest free share 10 %");
}

TEST(Compute, ShareAppliesWithinAMigInstance) {
  // A 1g.10gb instance of 9728 MiB with another pod's 4864 MiB at 50 % of the instance's SMs:
  // 60 % does not fit, 50 % does.
  Device mig = Mig("1g.10gb", 9728);
  mig.shares.push_back(builders::OtherPodShare(4864));
  mig.shares[0].compute_pct = 50;
  Node node = NodeOf({mig});
  Policy fgd = Fgd({Spec(0, 1, 4864, 1)});
  EXPECT_EQ(fgd.Evaluate(node, ComputePod(1, 4864, 60)).verdict.Message(),
            "needs 60 % compute, largest free share 50 %");
  EXPECT_TRUE(fgd.Evaluate(node, ComputePod(1, 4864, 50)).verdict.fits());
}

// The paper's worked example (placement_test.cc, FgdScore.WorkedExampleFromThePaperArtifact) with
// the pod asking for its memory's share as compute: nothing is short of compute, so the
// two-dimensional F is the one-dimensional one, ΔF = −250 on GPU#2.
TEST(Compute, TwoDimensionalFragmentationIsTheMemoryOneWhenComputeIsAmple) {
  Node node = NodeOf({Gpu(1000), Gpu(1000), Gpu(1000, 500), Gpu(1000, 800)}, 16000);
  Policy fgd = Fgd({Spec(4000, 1, 500, .5), Spec(8000, 1, 0, .3), Spec(32000, 0, 0, .2)});
  PodRequest pod = ComputePod(1, 500, 50);
  pod.cpu_milli = 4000;
  NodeEvaluation e = fgd.Evaluate(node, pod);
  ASSERT_TRUE(e.verdict.fits());
  EXPECT_DOUBLE_EQ(e.cost, -250);
  EXPECT_EQ(e.placement.containers[0].device_slots, std::vector<int>{2});
  EXPECT_EQ(e.placement.containers[0].compute_pct, std::vector<int>{50});
}

// Free memory on a device without compute is a fragment. Two 1000-MiB GPUs: GPU 0 holds 500 MiB at
// 90 % (500 MiB, 10 % free), GPU 1 is empty. M = {a: 1×500 MiB at 50 %, p=.5; b: 1×200 MiB, its
// memory's share 20 %, p=.5}.
//   Now: a cannot use GPU 0 (10 < 50), b neither (10 < 20); both use GPU 1:
//        F = .5·500 + .5·500 = 500 (in one dimension it would be 0).
//   Pod 1×200 MiB at 10 % on GPU 0 (→ 300 MiB, 0 %): R = 300 + 1000; a and b still only use GPU 1:
//        F = .5·300 + .5·300 = 300, ΔF = −200.
//   On GPU 1 (→ 800 MiB, 90 %): both still use GPU 1 (800 ≥ 500, 90 ≥ 50): F = .5·500 + .5·500 = 500,
//        ΔF = 0.
// So the pod goes where the compute is already short, and fills that fragment.
TEST(Compute, MemoryOnADeviceWithoutComputeIsAFragment) {
  Node node = NodeOf({GpuWithShare(1000, 500, 90), Gpu(1000)});
  Policy fgd = Fgd({ComputeSpec(500, 50, .5), Spec(0, 1, 200, .5)});
  NodeEvaluation e = fgd.Evaluate(node, ComputePod(1, 200, 10));
  ASSERT_TRUE(e.verdict.fits()) << e.verdict.Message();
  EXPECT_DOUBLE_EQ(e.cost, -200);
  EXPECT_EQ(e.placement.containers[0].device_slots, std::vector<int>{0});
  EXPECT_EQ(e.placement.containers[0].compute_pct, std::vector<int>{10});
  // Score computes the same costs without the placement. The fill fragmentation measures memory
  // alone: a could use GPU 0's 500 MiB and cannot use the 300 left, b can use both, so
  // ΔF̂ = .5 · 300 = 150. This policy has no completion value: no loss.
  NodeScore score = fgd.Score(node, fgd.Summarize(node), ComputePod(1, 200, 10));
  EXPECT_DOUBLE_EQ(score.cost, -200);
  EXPECT_DOUBLE_EQ(score.fill_cost, 150);
  EXPECT_DOUBLE_EQ(score.completion_loss, 0);
}

// A pod that names a compute share is ranked by the same keys as one that does not (RankOf): the
// completion loss, the fill fragmentation, then FGD's ΔF, here the two-dimensional one.
// completion_test.cc's three slices on 1000-MiB GPUs, each asking its memory's share of compute:
// {650 MiB at 65 %, p = .2; 320 at 32 %, p = .4; 470 at 47 %, p = .4}, priced y650 = 2/3,
// y470 = 1/2, y320 = 1/3 of a device. GPU 0 holds a 650 (350 MiB and 35 % free), GPU 1 a 470
// (530 MiB, 53 % free). The pod: 320 MiB at 32 %.
//   GPU 0 (→ 30 MiB, 3 %): it completes the device: loss K(350) − K(30) = 1/3 − 0 of 1000 MiB.
//   GPU 1 (→ 210 MiB, 21 %): loss K(530) − K(210) = 1/2 − 0: 1/6 of a device wasted.
// On GPU 0, R goes 880 → 560. F, two-dimensional: 650 fits no device before or after
// (.2 · 880 → .2 · 560); 320 fits both devices before (0), only GPU 1 after (.4 · 30); 470 fits
// only GPU 1 before and after (.4 · 350 → .4 · 30): ΔF = (112 + 12 + 12) − (176 + 0 + 140) = −180.
// With compute at the memory's share, F̂ has the same usable devices: ΔF̂ = −180.
TEST(Compute, TwoDimensionalPicksRankByCompletionAndFillFirst) {
  const TypicalWorkload workload{{ComputeSpec(650, 65, 1), ComputeSpec(320, 32, 2), ComputeSpec(470, 47, 2)}};
  Policy fgd(PolicyKind::kFgd, workload, {}, {}, CompletionValue::Build(workload, {1000}));
  Node node = NodeOf({GpuWithShare(1000, 650, 65), GpuWithShare(1000, 470, 47)});
  NodeEvaluation e = fgd.Evaluate(node, ComputePod(1, 320, 32));
  ASSERT_TRUE(e.verdict.fits()) << e.verdict.Message();
  EXPECT_EQ(e.placement.containers[0].device_slots, std::vector<int>{0});
  EXPECT_NEAR(e.completion_loss, 1000.0 / 3, 1e-6);
  EXPECT_DOUBLE_EQ(e.cost, -180);
  EXPECT_NEAR(e.fill_cost, -180, 1e-9);
  // The other pick loses half a device: on a node with only GPU 1's state, the pod costs 500.
  NodeEvaluation on_gpu1 = fgd.Evaluate(NodeOf({GpuWithShare(1000, 470, 47)}), ComputePod(1, 320, 32));
  EXPECT_NEAR(on_gpu1.completion_loss, 500, 1e-6);
}

// The devices of `node` as its summary `sum` has them.
std::array<ComputeDevice, kMaxDevicesPerNode> DevicesOf(const NodeSummary& sum, const Node& node) {
  std::array<ComputeDevice, kMaxDevicesPerNode> devices;
  for (size_t g = 0; g < node.devices.size(); ++g)
    devices[g] = ComputeDeviceOf(sum.devices()[g], node.devices[g].capacity_mib);
  return devices;
}

// The two-dimensional tallies start from the node's summary where it has them: its
// one-dimensional ones where memory alone decides (compute slack, no spec with a share of its own),
// else the two-dimensional ones it keeps when some spec names a share. Either start gives the same
// F and the same ΔF for every device and change as counting them, on nodes of twins, part-used,
// empty, short of CPU and (with shares) short of compute.
void ExpectTheSummaryTalliesCounted(const Policy& policy, const std::vector<Node>& nodes) {
  const Columns cols = Columns::Of(policy.workload().specs);
  for (const Node& node : nodes) {
    const NodeSummary sum = policy.Summarize(node);
    ASSERT_TRUE(ComputeFragmentation::SummaryHasTallies(cols, sum));
    const std::array<ComputeDevice, kMaxDevicesPerNode> devices = DevicesOf(sum, node);
    const int n = static_cast<int>(node.devices.size());
    ComputeFragmentation counted, copied;
    counted.Start(cols, devices.data(), n, sum.cpu_short, nullptr);
    copied.Start(cols, devices.data(), n, sum.cpu_short, &sum);
    EXPECT_DOUBLE_EQ(copied.Value(), counted.Value());
    for (int g = 0; g < n; ++g) {
      for (const MiB take : {MiB{0}, MiB{100}, devices[g].free}) {
        for (const int compute : {10, 40, devices[g].free_compute}) {
          if (take > devices[g].free || compute > devices[g].free_compute) continue;
          EXPECT_DOUBLE_EQ(copied.Delta(g, devices[g].free - take, devices[g].free_compute - compute),
                           counted.Delta(g, devices[g].free - take, devices[g].free_compute - compute))
              << "device " << g << " less " << take << " MiB and " << compute << " %";
        }
      }
    }
  }
}

TEST(Compute, TalliesFromTheSummaryAreTheCountedOnes) {
  const std::vector<Node> nodes = {
      NodeOf({Gpu(1000), Gpu(1000), Gpu(1000, 300), Gpu(1000, 300), Gpu(1000, 800)}, 16000),
      NodeOf({Gpu(1000, 600), Gpu(1000, 100), Gpu(1000)}, 3000),
      NodeOf({Gpu(1000, 1000), Gpu(1000, 550)}),
  };
  Policy memory_only = Fgd({Spec(2000, 1, 200, .3), Spec(1000, 1, 450, .2), Spec(4000, 1, 700, .1),
                            Spec(8000, 2, 0, .2), Spec(16000, 0, 0, .2)});
  for (const Node& node : nodes) {
    const NodeSummary sum = memory_only.Summarize(node);
    EXPECT_TRUE(sum.compute_slack);
    EXPECT_FALSE(sum.has_compute_tallies());
    // Memory alone decides here: F is the one-dimensional one.
    ComputeFragmentation copied;
    copied.Start(Columns::Of(memory_only.workload().specs), DevicesOf(sum, node).data(),
                 static_cast<int>(node.devices.size()), sum.cpu_short, &sum);
    EXPECT_DOUBLE_EQ(copied.Value(), sum.fragmentation);
  }
  ExpectTheSummaryTalliesCounted(memory_only, nodes);

  Policy with_shares = Fgd({ComputeSpec(200, 60, .3), Spec(1000, 1, 450, .2), ComputeSpec(700, 10, .1),
                            Spec(8000, 2, 0, .2), Spec(16000, 0, 0, .2)});
  std::vector<Node> compute_short = nodes;
  compute_short.push_back(NodeOf({GpuWithShare(1000, 300, 70), GpuWithShare(1000, 100, 95), Gpu(1000)}, 8000));
  for (const Node& node : compute_short) EXPECT_TRUE(with_shares.Summarize(node).has_compute_tallies());
  ExpectTheSummaryTalliesCounted(with_shares, compute_short);
}

// Out of the pool, a device is never a compute pod's pick, though the two-dimensional pick reads
// only the summary for it: unhealthy or excluded, it has no free memory and is not empty, so
// neither a share nor a whole device fits there.
TEST(Compute, DevicesOutOfThePoolAreNeverPicked) {
  Node node = NodeOf({Gpu(1000), Gpu(1000), Gpu(1000)});
  node.devices[0].healthy = false;
  node.devices[1].excluded = true;
  // A shape with a share of its own: every evaluation is two-dimensional, the whole-device one too.
  Policy fgd = Fgd({ComputeSpec(200, 30, .5), Spec(0, 1, 0, .5)});
  NodeEvaluation shared = fgd.Evaluate(node, ComputePod(1, 200, 30));
  ASSERT_TRUE(shared.verdict.fits()) << shared.verdict.Message();
  EXPECT_EQ(shared.placement.containers[0].device_slots, std::vector<int>{2});
  NodeEvaluation whole = fgd.Evaluate(node, ComputePod(1, 0, 0));
  ASSERT_TRUE(whole.verdict.fits()) << whole.verdict.Message();
  EXPECT_EQ(whole.placement.containers[0].device_slots, std::vector<int>{2});
  EXPECT_FALSE(fgd.Evaluate(node, ComputePod(2, 200, 30)).verdict.fits());
}

TEST(Compute, SummaryKnowsWhenMemoryAloneDecides) {
  // Memory-only shares (no share, or one at its memory's share) leave the compute slack; a share
  // above its memory's share does not: 8192 MiB is 10 % of 81920, free 90 % ≥ ⌊100 · 73728 / 81920⌋
  // = 90 holds exactly, 11 % reserved leaves 89 < 90.
  Policy fgd = Fgd({Spec(0, 1, 8192, 1)});
  EXPECT_TRUE(fgd.Summarize(NodeOf({Gpu(81920, 8192)})).compute_slack);
  EXPECT_TRUE(fgd.Summarize(NodeOf({GpuWithShare(81920, 8192, 10)})).compute_slack);
  EXPECT_FALSE(fgd.Summarize(NodeOf({GpuWithShare(81920, 8192, 11)})).compute_slack);
}

TEST(Compute, LedgerKeepsSharesWithinTheDevice) {
  Node node = NodeOf({GpuWithShare(81920, 8192, 70)});
  Policy fgd = Fgd({Spec(0, 1, 8192, 1)});
  const PodRequest pod = ComputePod(1, 8192, 30);
  NodeEvaluation e = fgd.Evaluate(node, pod);
  ASSERT_TRUE(e.verdict.fits());
  ASSERT_TRUE(ApplyPlacement(node, pod, e.placement, {}).ok());
  EXPECT_EQ(node.devices[0].shares.back().compute_pct, 30);
  EXPECT_EQ(model::AllocatedComputePct(node.devices[0]), 100);
  EXPECT_TRUE(CheckLedgerInvariant(node).ok());
  // The same placement again would make 130 %: refused, the node unchanged.
  Status again = ApplyPlacement(node, pod, e.placement, {});
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.message(), "device GPU-81920-8192 on n1 has 0 % compute free, placement needs 30 %");
  EXPECT_EQ(node.devices[0].shares.size(), 2u);
  // A ledger changed by hand past 100 % breaks the invariant.
  node.devices[0].shares[0].compute_pct = 71;
  EXPECT_EQ(CheckLedgerInvariant(node).message(), "device GPU-81920-8192 on n1: compute shares 101 % exceed 100 %");
}

TEST(Compute, WholeDeviceReservesAllOfIt) {
  Node node = NodeOf({Gpu(81920)});
  Policy fgd = Fgd({Spec(0, 1, 0, 1)});
  const PodRequest pod = Pod(1, 0);
  NodeEvaluation e = fgd.Evaluate(node, pod);
  ASSERT_TRUE(e.verdict.fits());
  EXPECT_EQ(e.placement.containers[0].compute_pct, std::vector<int>{100});
  ASSERT_TRUE(ApplyPlacement(node, pod, e.placement, {}).ok());
  EXPECT_EQ(model::AllocatedComputePct(node.devices[0]), 100);
}

TEST(Compute, LearnedShapesCarryTheShare) {
  const TypicalSpec spec = SpecOfPod(ComputePod(1, 10240, 30));
  EXPECT_EQ(spec.compute_pct, 30);
  EXPECT_EQ(spec.mem_per_device_mib, 10240);
  EXPECT_FALSE(SameShape(spec, SpecOfPod(Pod(1, 10240))));
  EXPECT_TRUE(SameShape(spec, SpecOfPod(ComputePod(1, 10240, 30))));
}

}  // namespace
}  // namespace gpupack::placement

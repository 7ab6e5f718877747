// Long file: the table tests of the engine's fit, FGD and fill arithmetic, each with its sums written
// out; one file so a reader checks the numbers against docs/placement.md in one place.
#include "placement/placement.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "placement/columns.h"
#include "testing/builders.h"

namespace gpupack::placement {
namespace {

// ---- builders: each case reads as data (testing/builders.h) ----
using builders::Gpu;
using builders::Mig;
using builders::NodeOf;
using builders::Pod;
using builders::Spec;
Policy Fgd(std::vector<TypicalSpec> specs) { return Policy(PolicyKind::kFgd, TypicalWorkload{std::move(specs)}, {}); }
Policy Simple(PolicyKind kind) { return Policy(kind, TypicalWorkload{{Spec(0, 1, 0, 1)}}, {}); }

// FGD's score as the paper's artifact computes it (fgd_score.go, docs/design.md "Sources"),
// worked by hand in MiB with 1000-MiB GPUs (1 milli-GPU = 1 MiB).
// Node free GPUs [1000, 1000, 500, 200], 16 free CPUs.
// M = {a: (4 CPU, 1×500) p=.5; b: (8 CPU, 1 whole) p=.3; c: CPU-only 32 CPU p=.2}.
TEST(FgdScore, WorkedExampleFromThePaperArtifact) {
  Node node = NodeOf({Gpu(1000), Gpu(1000), Gpu(1000, 500), Gpu(1000, 800)}, 16000);
  Policy fgd = Fgd({Spec(4000, 1, 500, .5), Spec(8000, 1, 0, .3), Spec(32000, 0, 0, .2)});
  NodeSummary sum = fgd.Summarize(node);
  // F(a) = 200 (GPU#3 < 500); F(b) = 500 + 200 = 700 (not empty); F(c) = 2700 (CPU-only: all idle).
  // F(M) = .5·200 + .3·700 + .2·2700 = 100 + 210 + 540 = 850.
  EXPECT_DOUBLE_EQ(sum.fragmentation, 850);
  EXPECT_EQ(sum.total_free, 2700);

  // Pod (4 CPU, 500 MiB) on GPU#2 (500 → 0): F = .5·200 + .3·200 + .2·2200 = 600, Δ = −250.
  // On GPU#0 (1000 → 500) it would be .5·200 + .3·1200 + .2·2200 = 900, Δ = +50.
  NodeEvaluation e = fgd.Evaluate(node, sum, Pod(1, 500, 4000));
  ASSERT_TRUE(e.verdict.fits()) << e.verdict.Message();
  EXPECT_DOUBLE_EQ(e.cost, -250);
  ASSERT_EQ(e.placement.containers.size(), 1u);
  EXPECT_EQ(e.placement.containers[0].device_slots, std::vector<int>{2});

  // Without GPU#2 (now held by someone else) the best is an empty GPU: Δ = +50 as computed above
  // (GPU#3 cannot hold 500, and both empty GPUs are equivalent; the first index wins).
  Node without2 = NodeOf({Gpu(1000), Gpu(1000), Gpu(1000, 1000), Gpu(1000, 800)}, 16000);
  NodeSummary sum2 = fgd.Summarize(without2);
  // F(M) = .5·200 + .3·200 + .2·2200 = 600 before; after GPU#0 → 500: .5·200 + .3·700 + .2·1700 = 650.
  EXPECT_DOUBLE_EQ(sum2.fragmentation, 600);
  NodeEvaluation e2 = fgd.Evaluate(without2, sum2, Pod(1, 500, 4000));
  ASSERT_TRUE(e2.verdict.fits());
  EXPECT_DOUBLE_EQ(e2.cost, 50);
  EXPECT_EQ(e2.placement.containers[0].device_slots, std::vector<int>{0});
}

// FGD's level int(100·σ(−ΔF/1 GPU)) (fgd_score.go, docs/design.md "Sources"): Δ=+1 GPU → 26, Δ=0 → 50,
// Δ=−1 GPU → 73, −3 → 95, −5 → 99; the worked example's −250 → int(100·σ(0.25)) = 56,
// +50 → int(100·σ(−0.05)) = 48.
TEST(FgdScore, IntegerLevelsMatchThePaper) {
  EXPECT_EQ(FgdScoreLevel(1000, 1000), 26);
  EXPECT_EQ(FgdScoreLevel(0, 1000), 50);
  EXPECT_EQ(FgdScoreLevel(-1000, 1000), 73);
  EXPECT_EQ(FgdScoreLevel(-3000, 1000), 95);
  EXPECT_EQ(FgdScoreLevel(-5000, 1000), 99);
  EXPECT_EQ(FgdScoreLevel(-250, 1000), 56);
  EXPECT_EQ(FgdScoreLevel(50, 1000), 48);
  // The unit scales it: −20480 MiB on 81920 MiB devices is −0.25 device.
  EXPECT_EQ(FgdScoreLevel(-20480, 81920), 56);
}

TEST(FgdScore, TieBreakRankIsAFixedOrderPerSalt) {
  EXPECT_EQ(NodeTieBreakRank("gpu-a1", 0), NodeTieBreakRank("gpu-a1", 0));
  EXPECT_NE(NodeTieBreakRank("gpu-a1", 0), NodeTieBreakRank("gpu-a2", 0));
  EXPECT_NE(NodeTieBreakRank("gpu-a1", 0), NodeTieBreakRank("gpu-a1", 1));
  // Roughly uniform: of 1000 names about half rank below the midpoint.
  int low = 0;
  for (int i = 0; i < 1000; ++i) low += NodeTieBreakRank("node-" + std::to_string(i), 0) < (uint64_t{1} << 63);
  EXPECT_GT(low, 430);
  EXPECT_LT(low, 570);
}

TEST(FgdScore, CpuShortageMakesEveryIdleDeviceAFragment) {
  // 8 CPUs free; spec b needs 8 CPUs and a whole GPU. A CPU-only pod taking 4 CPUs turns b from
  // satisfied (F(b) = 0: both GPUs empty) into lacking CPU (F(b) = R = 2000): Δ = .5 · 2000 = 1000.
  Node node = NodeOf({Gpu(1000), Gpu(1000)}, 8000);
  Policy fgd = Fgd({Spec(8000, 1, 0, .5), Spec(1000, 1, 0, .5)});
  NodeEvaluation e = fgd.Evaluate(node, Pod(0, 0, 4000));
  ASSERT_TRUE(e.verdict.fits());
  EXPECT_DOUBLE_EQ(e.cost, 1000);
}

struct RejectCase {
  const char* name;
  Node node;
  PodRequest pod;
  RejectReason reason;
  bool unresolvable;
  const char* message;
};

// docs/annotations.md. gpu-model used to match substrings: A10 landed on A100s.
TEST(ModelMatch, WholeWordsCaseInsensitiveOrAGlob) {
  struct Case {
    const char* wanted;
    const char* model;
    bool matches;
  };
  const Case cases[] = {
      {"A100", "NVIDIA A100-SXM4-80GB", true},                   // one word of it
      {"a100", "NVIDIA A100-SXM4-80GB", true},                   // case-insensitively
      {"A100-SXM4", "NVIDIA A100-SXM4-80GB", true},              // a run of words, split at '-'
      {"NVIDIA A100", "NVIDIA A100-SXM4-80GB", true},            // split at ' '
      {"NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", true},  // the whole model
      {"A10", "NVIDIA A100-SXM4-80GB", false},                   // not a word of it
      {"A10", "NVIDIA A10", true},
      {"A100-SXM", "NVIDIA A100-SXM4-80GB", false},   // SXM is not SXM4
      {"SXM4 A100", "NVIDIA A100-SXM4-80GB", false},  // words in order
      {"T4", "Tesla T4", true},
      {"V100M16", "V100M32", false},                  // the Alibaba trace's names
      {"*A100*80GB", "NVIDIA A100-SXM4-80GB", true},  // a glob covers the whole model
      {"A100*", "NVIDIA A100-SXM4-80GB", false},
      {"nvidia a100*", "NVIDIA A100-SXM4-80GB", true},
      {"*H100*", "NVIDIA A100-SXM4-80GB", false},
      {"*", "anything", true},
      {"", "NVIDIA A100-SXM4-80GB", false},
      {" - ", "NVIDIA A100-SXM4-80GB", false},  // no word at all
  };
  for (const Case& c : cases) EXPECT_EQ(GpuModelMatches(c.wanted, c.model), c.matches) << c.wanted << " vs " << c.model;

  PodRequest a10 = Pod(1, 1000);
  a10.gpu_models = {"A10"};
  const NodeEvaluation on_a100 = Simple(PolicyKind::kFgd).Evaluate(NodeOf({Gpu(81920)}), a10);
  EXPECT_EQ(on_a100.verdict.reason, RejectReason::kNoMatchingDevice) << on_a100.verdict.Message();
  EXPECT_TRUE(Simple(PolicyKind::kFgd).Evaluate(NodeOf({Gpu(24576, 0, "NVIDIA A10")}), a10).verdict.fits());
}

TEST(Fit, PreciseReasons) {
  PodRequest mig_pod = Pod(1, 5000);
  mig_pod.mig_profile = "1g.10gb";
  PodRequest h100 = Pod(1, 1000);
  h100.gpu_models = {"H100"};
  PodRequest hard = Pod(1, 1000);
  hard.hard_isolation = true;
  Node stale = NodeOf({Gpu(81920)});
  stale.stale_reason = "GPUNode heartbeat 312s old > TTL 120s";
  Node cpu_node = NodeOf({Gpu(81920)}, 2000);
  Node unenforced = NodeOf({Gpu(81920)});
  unenforced.memory_unenforced_reason = "MemoryEnforced is False (MemoryLimitsMissing): memory-limits: driver too old";
  const RejectCase cases[] = {
      {"largest free slice too small", NodeOf({Gpu(16384, 10240), Gpu(16384, 12288)}), Pod(1, 8192),
       RejectReason::kInsufficientDeviceMemory, false,
       "largest free device has 6144 MiB, pod needs 8192 MiB per device"},
      {"whole devices", NodeOf({Gpu(16384), Gpu(16384, 1)}), Pod(2, 0), RejectReason::kInsufficientEmptyDevices, false,
       "needs 2 empty devices, node has 1"},
      {"no MIG of that profile", NodeOf({Mig("3g.40gb", 40960)}), mig_pod, RejectReason::kNoMatchingDevice, true,
       "no device matches MIG profile 1g.10gb"},
      {"wrong model", NodeOf({Gpu(81920)}), h100, RejectReason::kNoMatchingDevice, true,
       "no device matches any device, model H100"},
      {"device too small", NodeOf({Gpu(16384)}), Pod(1, 20480), RejectReason::kDeviceTooSmall, true,
       "largest matching device has 16384 MiB in total, pod needs 20480 MiB per device"},
      {"too few devices", NodeOf({Gpu(16384)}), Pod(2, 1024), RejectReason::kTooFewMatchingDevices, true,
       "needs 2 distinct devices, node has 1 matching any device"},
      {"two devices with room", NodeOf({Gpu(16384), Gpu(16384, 16000), Gpu(16384, 16000)}), Pod(2, 1024),
       RejectReason::kInsufficientDevices, false, "needs 2 devices with 1024 MiB free, node has 1"},
      {"no devices", NodeOf({}), Pod(1, 1024), RejectReason::kNoDevices, true, "node has no GPU devices"},
      {"stale", stale, Pod(1, 1024), RejectReason::kNodeStale, true,
       "node inventory is stale: GPUNode heartbeat 312s old > TTL 120s"},
      {"cpu", cpu_node, Pod(1, 1024, 4000), RejectReason::kInsufficientCpu, false,
       "insufficient cpu: pod needs 4000m, node has 2000m free"},
      {"hard isolation needs an enforcing node", NodeOf({Gpu(81920)}), hard, RejectReason::kNoMatchingDevice, true,
       "no device matches any device, hard isolation"},
      {"hard isolation told why the node does not enforce", unenforced, hard, RejectReason::kNoMatchingDevice, true,
       "no device matches any device, hard isolation; MemoryEnforced is False (MemoryLimitsMissing): memory-limits: "
       "driver too old"},
      {"a soft pod is not told", unenforced, Pod(1, 90000), RejectReason::kDeviceTooSmall, true,
       "largest matching device has 81920 MiB in total, pod needs 90000 MiB per device"},
  };
  for (const auto& c : cases) {
    for (PolicyKind kind : {PolicyKind::kFgd, PolicyKind::kBinpack, PolicyKind::kSpread}) {
      NodeEvaluation e = Simple(kind).Evaluate(c.node, c.pod);
      EXPECT_EQ(e.verdict.reason, c.reason) << c.name;
      EXPECT_EQ(e.verdict.unresolvable, c.unresolvable) << c.name;
      EXPECT_EQ(e.verdict.Message(), c.message) << c.name;
      EXPECT_TRUE(e.placement.containers.empty()) << c.name;
    }
  }
}

TEST(Fit, DeviceChoiceByPolicy) {
  // Free: 16384, 4096, 10240. A 4096 MiB pod: binpack takes the exact fit (slot 1), spread the
  // emptiest (slot 0).
  Node node = NodeOf({Gpu(16384), Gpu(16384, 12288), Gpu(16384, 6144)});
  EXPECT_EQ(Simple(PolicyKind::kBinpack).Evaluate(node, Pod(1, 4096)).placement.containers[0].device_slots,
            std::vector<int>{1});
  EXPECT_EQ(Simple(PolicyKind::kSpread).Evaluate(node, Pod(1, 4096)).placement.containers[0].device_slots,
            std::vector<int>{0});
  // Binpack cost = free MiB left on the node: 16384 + 0 + 10240 = 26624.
  EXPECT_DOUBLE_EQ(Simple(PolicyKind::kBinpack).Evaluate(node, Pod(1, 4096)).cost, 26624);
}

TEST(Fit, MultiDeviceContainersGetDistinctDevices) {
  Node node = NodeOf({Gpu(16384), Gpu(16384), Gpu(16384)});
  NodeEvaluation e = Simple(PolicyKind::kBinpack).Evaluate(node, Pod(2, 8192));
  ASSERT_TRUE(e.verdict.fits());
  auto slots = e.placement.containers[0].device_slots;
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_NE(slots[0], slots[1]);
}

TEST(Fit, MultiContainerPodsFitJointly) {
  // Two containers of 10 GiB each on one 16 GiB GPU and one 12 GiB-free GPU: each alone fits
  // anywhere, together they need both devices.
  Node node = NodeOf({Gpu(16384), Gpu(16384, 4096)});
  PodRequest pod = Pod(1, 10240);
  pod.containers.push_back(ContainerRequest{"sidecar", 1, false, 1, 10240});
  NodeEvaluation e = Simple(PolicyKind::kBinpack).Evaluate(node, pod);
  ASSERT_TRUE(e.verdict.fits());
  ASSERT_EQ(e.placement.containers.size(), 2u);
  EXPECT_NE(e.placement.containers[0].device_slots[0], e.placement.containers[1].device_slots[0]);
  // A third 10 GiB container cannot fit.
  pod.containers.push_back(ContainerRequest{"third", 2, false, 1, 10240});
  NodeEvaluation e3 = Simple(PolicyKind::kBinpack).Evaluate(node, pod);
  EXPECT_EQ(e3.verdict.reason, RejectReason::kInsufficientDeviceMemory);
  EXPECT_EQ(e3.verdict.Message(), "largest free device has 6144 MiB, pod needs 10240 MiB per device");
}

TEST(Fit, InitContainerReusesThePodsDevices) {
  Node node = NodeOf({Gpu(16384)});
  PodRequest pod = Pod(1, 8192);
  pod.containers.push_back(ContainerRequest{"warmup", 0, true, 1, 4096});
  NodeEvaluation e = Simple(PolicyKind::kBinpack).Evaluate(node, pod);
  ASSERT_TRUE(e.verdict.fits());
  ASSERT_EQ(e.placement.containers.size(), 2u);
  EXPECT_TRUE(e.placement.containers[1].init);
  EXPECT_TRUE(e.placement.containers[1].within_pod_devices);
  ASSERT_TRUE(ApplyPlacement(node, pod, e.placement, {}).ok());
  // Only the app container's 8192 MiB is booked.
  EXPECT_EQ(DeviceFreeMiB(node.devices[0], {}), 8192);
}

TEST(Fit, InitContainerLargerThanTheAppGetsItsOwnDevice) {
  Node node = NodeOf({Gpu(16384), Gpu(16384)});
  PodRequest pod = Pod(1, 2048);
  pod.containers.push_back(ContainerRequest{"big-init", 0, true, 1, 12288});
  NodeEvaluation e = Simple(PolicyKind::kBinpack).Evaluate(node, pod);
  ASSERT_TRUE(e.verdict.fits());
  EXPECT_FALSE(e.placement.containers[1].within_pod_devices);
}

TEST(Fit, MigAndKindPreferences) {
  Node node = NodeOf({Gpu(81920), Mig("1g.10gb", 9728), Mig("3g.40gb", 40192)});
  PodRequest pod = Pod(1, 5000);
  pod.mig_profile = "1g.10gb";
  NodeEvaluation e = Simple(PolicyKind::kBinpack).Evaluate(node, pod);
  ASSERT_TRUE(e.verdict.fits());
  EXPECT_EQ(e.placement.containers[0].device_slots, std::vector<int>{1});
  PodRequest gpu_only = Pod(1, 5000);
  gpu_only.device_kind = DeviceKindPreference::kGpu;
  EXPECT_EQ(Simple(PolicyKind::kBinpack).Evaluate(node, gpu_only).placement.containers[0].device_slots,
            std::vector<int>{0});
  // Hard isolation on MIG takes the instance exclusively.
  PodRequest hard = Pod(1, 5000);
  hard.hard_isolation = true;
  hard.device_kind = DeviceKindPreference::kMig;
  NodeEvaluation h = Simple(PolicyKind::kBinpack).Evaluate(node, hard);
  ASSERT_TRUE(h.verdict.fits());
  EXPECT_TRUE(h.placement.containers[0].exclusive);
  ASSERT_TRUE(ApplyPlacement(node, hard, h.placement, {}).ok());
  EXPECT_EQ(DeviceFreeMiB(node.devices[h.placement.containers[0].device_slots[0]], {}), 0);
}

TEST(Accounting, FreeMemoryCountsCapsReserveAndForeignUse) {
  Device d = Gpu(16384, 4096);
  PlacementOptions o;
  o.reserve_mib_per_device = 512;
  // 16384 − 512 reserve − 4096 caps = 11776.
  EXPECT_EQ(DeviceFreeMiB(d, o), 11776);
  // Live use 6000 MiB: 6000 − 4096 caps − 512 reserve = 1392 MiB foreign → 10384 free.
  d.used_mib = 6000;
  EXPECT_EQ(DeviceFreeMiB(d, o), 10384);
  o.count_foreign_usage = false;
  EXPECT_EQ(DeviceFreeMiB(d, o), 11776);
  d.healthy = false;
  EXPECT_EQ(DeviceFreeMiB(d, o), 0);
}

TEST(Accounting, ApplyRefusesToOverbookAndLeavesTheNodeUnchanged) {
  Node node = NodeOf({Gpu(16384)});
  Policy p = Simple(PolicyKind::kBinpack);
  PodRequest a = Pod(1, 12288);
  NodeEvaluation e = p.Evaluate(node, a);
  ASSERT_TRUE(e.verdict.fits());
  // Someone else took 8 GiB meanwhile: the stale placement must be refused.
  node.devices[0].shares.push_back(DeviceShare{"x", "ns/x", "c", 8192, false});
  Status s = ApplyPlacement(node, a, e.placement, {});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(node.devices[0].shares.size(), 1u);
  EXPECT_TRUE(CheckLedgerInvariant(node).ok());
  EXPECT_EQ(RemovePod(node, "x"), 1);
  ASSERT_TRUE(ApplyPlacement(node, a, e.placement, {}).ok());
  EXPECT_TRUE(CheckLedgerInvariant(node).ok());
  node.devices[0].shares.push_back(DeviceShare{"y", "ns/y", "c", 8192, false});
  EXPECT_EQ(CheckLedgerInvariant(node).code(), StatusCode::kInternal);
}

TEST(Accounting, WholeDeviceIsExclusive) {
  Node node = NodeOf({Gpu(16384)});
  PodRequest whole = Pod(1, 0);
  NodeEvaluation e = Simple(PolicyKind::kFgd).Evaluate(node, whole);
  ASSERT_TRUE(e.verdict.fits());
  EXPECT_EQ(e.placement.containers[0].mem_per_device_mib, 16384);
  ASSERT_TRUE(ApplyPlacement(node, whole, e.placement, {}).ok());
  EXPECT_EQ(Simple(PolicyKind::kFgd).Evaluate(node, Pod(1, 1)).verdict.reason, RejectReason::kInsufficientDeviceMemory);
}

TEST(Policy, ScoreAgreesWithEvaluate) {
  Node node = NodeOf({Gpu(1000), Gpu(1000), Gpu(1000, 500), Gpu(1000, 800)}, 16000);
  Policy fgd = Fgd({Spec(4000, 1, 500, .5), Spec(8000, 1, 0, .3), Spec(32000, 0, 0, .2)});
  NodeSummary sum = fgd.Summarize(node);
  for (MiB mem : {100, 200, 500, 900, 0}) {
    NodeEvaluation e = fgd.Evaluate(node, sum, Pod(1, mem, 4000));
    NodeScore s = fgd.Score(node, sum, Pod(1, mem, 4000));
    EXPECT_EQ(e.verdict.reason, s.verdict.reason) << mem;
    EXPECT_DOUBLE_EQ(e.cost, s.cost) << mem;
  }
  EXPECT_EQ(fgd.Score(node, sum, Pod(1, 1200)).verdict.reason, RejectReason::kDeviceTooSmall);
}

// Property: FGD's device choice is the argmin of the exact fragmentation over every device
// the pod could take, computed the slow way (apply the share, re-summarise the node).
TEST(FgdScore, DeviceChoiceIsTheExactArgminOnRandomNodes) {
  std::mt19937_64 rng(7);
  Policy fgd = Fgd({Spec(2000, 1, 100, .2), Spec(4000, 1, 250, .15), Spec(1000, 1, 500, .15), Spec(8000, 1, 0, .2),
                    Spec(16000, 2, 0, .1), Spec(6000, 1, 810, .1), Spec(12000, 0, 0, .1)});
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<Device> devices;
    const int g = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < g; ++i)
      devices.push_back(Gpu(1000, static_cast<MiB>(rng() % 4) * static_cast<MiB>(rng() % 300)));
    Node node = NodeOf(devices, 4000 + static_cast<int64_t>(rng() % 28) * 1000);
    const MiB mem = static_cast<MiB>(50 + rng() % 900);
    PodRequest pod = Pod(1, mem, static_cast<int64_t>(rng() % 4) * 1000);
    NodeSummary sum = fgd.Summarize(node);
    NodeEvaluation e = fgd.Evaluate(node, sum, pod);
    double best_exact = 1e300;
    for (int slot = 0; slot < g; ++slot) {
      if (DeviceFreeMiB(node.devices[slot], {}) < mem) continue;
      Node after = node;
      after.devices[slot].shares.push_back(DeviceShare{"x", "ns/x", "c", mem, false});
      after.requested_cpu_milli += pod.cpu_milli;
      best_exact = std::min(best_exact, fgd.Summarize(after).fragmentation - sum.fragmentation);
    }
    if (best_exact == 1e300) {
      EXPECT_FALSE(e.verdict.fits());
      continue;
    }
    ASSERT_TRUE(e.verdict.fits()) << e.verdict.Message();
    EXPECT_NEAR(e.cost, best_exact, 1e-6) << "trial " << trial;
  }
}

// The fill fragmentation F̂ (NodeEvaluation::fill_cost), arithmetic written out.
// 1000-MiB GPUs; M = {a: 4 CPU, 1×300, p=.5; b: 12 CPU, 1 whole, p=.3; c: CPU-only, p=.2}.
TEST(FillFragmentation, CountsTheMemoryEachSpecCouldNotUse) {
  Policy fgd = Fgd({Spec(4000, 1, 300, .5), Spec(12000, 1, 0, .3), Spec(8000, 0, 0, .2)});
  struct Case {
    const char* name;
    std::vector<Device> devices;
    int64_t cpu_milli;
    double fill;
  };
  const Case cases[] = {
      // a: 2000 usable, CPU feeds 9×300 → all used. b: 2 empty, CPU feeds 3 → all used.
      // c: uses no device → 2000.  F̂ = .2·2000 = 400.
      {"two empty GPUs, plenty of CPU", {Gpu(1000), Gpu(1000)}, 36000, 400},
      // 12 CPU: a: CPU feeds 3×300 = 900 → 1100 left. b: CPU feeds 1 → 1000 left.
      // F̂ = .5·1100 + .3·1000 + .2·2000 = 1250: the GPUs the CPU cannot feed count.
      {"two empty GPUs, CPU for one whole pod", {Gpu(1000), Gpu(1000)}, 12000, 1250},
      // A 400-MiB remainder: a: usable (400 ≥ 300) → 0 left; b: no empty device → 400; c: 400.
      // F̂ = .3·400 + .2·400 = 200.
      {"one remainder", {Gpu(1000, 600)}, 36000, 200},
      // Unlimited CPU (-1): a and b use the empty GPU; c: 1000. F̂ = .2·1000 = 200.
      {"unlimited CPU", {Gpu(1000)}, -1, 200},
  };
  for (const Case& c : cases) {
    EXPECT_DOUBLE_EQ(fgd.Summarize(NodeOf(c.devices, c.cpu_milli)).fill_fragmentation, c.fill) << c.name;
  }
}

// The CPU term is what FGD's one-pod look-ahead cannot see: a CPU-heavy half-GPU pod has the
// same ΔF on a node with 12 CPU per GPU and on one with 24, but leaves the first with GPUs its
// CPU cannot feed. M = {W: 12 CPU, 1 whole, p=.6; H: 12 CPU, 1×500, p=.4}; pod: 24 CPU, 1×500.
TEST(FillFragmentation, SeesGpusStrandedByCpuAFewPodsAhead) {
  Policy fgd = Fgd({Spec(12000, 1, 0, .6), Spec(12000, 1, 500, .4)});
  Node lean = NodeOf({Gpu(1000), Gpu(1000), Gpu(1000), Gpu(1000)}, 48000);
  Node rich = NodeOf({Gpu(1000), Gpu(1000), Gpu(1000), Gpu(1000)}, 96000);
  PodRequest pod = Pod(1, 500, 24000);
  NodeEvaluation on_lean = fgd.Evaluate(lean, pod);
  NodeEvaluation on_rich = fgd.Evaluate(rich, pod);
  // FGD: W loses the split GPU's 500 on both (.6·500); H still fits everywhere.
  EXPECT_DOUBLE_EQ(on_lean.cost, 300);
  EXPECT_DOUBLE_EQ(on_rich.cost, 300);
  // lean before: W: CPU feeds 4 → 0 left; H: 4000 usable, CPU feeds 4×500 → 2000 left:
  // F̂ = .4·2000 = 800. after (24 CPU, free 500+3000): W: 3 empty, CPU feeds 2 → 1500 left;
  // H: 3500 usable, CPU feeds 2×500 → 2500 left: F̂ = .6·1500 + .4·2500 = 1900. ΔF̂ = 1100.
  EXPECT_DOUBLE_EQ(on_lean.fill_cost, 1100);
  // rich before: W: CPU feeds 8 → 0; H: CPU feeds 8×500 → 0: F̂ = 0. after (72 CPU): W: 3
  // empty, CPU feeds 6 → 500 left (the split GPU); H: CPU feeds 6×500 = 3000 of 3500 → 500 left:
  // F̂ = .6·500 + .4·500 = 500.
  EXPECT_DOUBLE_EQ(on_rich.fill_cost, 500);
  EXPECT_LT(FillLevel(on_rich.fill_cost, 1000), FillLevel(on_lean.fill_cost, 1000));
}

// Host memory strands GPUs the same way: on the Alibaba trace's G2 nodes (8 GPUs, 96 CPU, 384
// GiB) a whole-GPU pod asks 12 CPU and 48 GiB, so a node whose memory is gone keeps empty GPUs
// that no pod can use. The CPU case above with GiB for CPU: M = {W: 48 GiB, 1 whole, p=.6;
// H: 48 GiB, 1×500, p=.4}; pod: 96 GiB, 1×500; CPU unlimited.
TEST(FillFragmentation, SeesGpusStrandedByHostMemory) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  TypicalSpec w = Spec(0, 1, 0, .6), h = Spec(0, 1, 500, .4);
  w.memory_bytes = h.memory_bytes = 48 * kGiB;
  Policy fgd = Fgd({w, h});
  Node lean = NodeOf({Gpu(1000), Gpu(1000), Gpu(1000), Gpu(1000)});
  lean.memory_bytes = 192 * kGiB;
  Node rich = lean;
  rich.memory_bytes = 384 * kGiB;
  PodRequest pod = Pod(1, 500);
  pod.memory_bytes = 96 * kGiB;
  // Summaries: lean: W: memory feeds 4 → 0 left; H: memory feeds 4×500 of 4000 → 2000 left:
  // F̂ = .4·2000 = 800. rich: memory feeds 8 of each → F̂ = 0.
  EXPECT_DOUBLE_EQ(fgd.Summarize(lean).fill_fragmentation, 800);
  EXPECT_DOUBLE_EQ(fgd.Summarize(rich).fill_fragmentation, 0);
  NodeEvaluation on_lean = fgd.Evaluate(lean, pod);
  NodeEvaluation on_rich = fgd.Evaluate(rich, pod);
  EXPECT_DOUBLE_EQ(on_lean.cost, on_rich.cost);  // FGD sees no difference
  // lean after (96 GiB, free 500 + 3000): W: 3 empty, memory feeds 2 → 1500 left; H: 3500
  // usable, memory feeds 2×500 → 2500 left: F̂ = .6·1500 + .4·2500 = 1900. ΔF̂ = 1100.
  EXPECT_DOUBLE_EQ(on_lean.fill_cost, 1100);
  // rich after (288 GiB): W: memory feeds 6 of 3 empty → 500 left (the split GPU); H: 3000 of
  // 3500 → 500 left: F̂ = .6·500 + .4·500 = 500.
  EXPECT_DOUBLE_EQ(on_rich.fill_cost, 500);
  EXPECT_LT(FillLevel(on_rich.fill_cost, 1000), FillLevel(on_lean.fill_cost, 1000));
  // A shape with no known memory (0, e.g. the cold-start prior's) is never memory-limited.
  Policy blind = Fgd({Spec(0, 1, 0, .6), Spec(0, 1, 500, .4)});
  EXPECT_DOUBLE_EQ(blind.Evaluate(lean, pod).fill_cost, blind.Evaluate(rich, pod).fill_cost);
}

// Property: Score's fill cost is the exact difference of the node's F̂ before and after the
// placement Evaluate chose, on random nodes and pods (CPU-only and multi-device included). Nodes
// with CPU to spare (and unlimited CPU) take the tally-free path, which follows the tallies of
// the first workload's two-device whole spec only; the second workload has no such spec.
TEST(FillFragmentation, ScoreIsTheExactDifferenceOnRandomNodes) {
  std::mt19937_64 rng(11);
  const Policy policies[] = {
      Fgd({Spec(2000, 1, 100, .2), Spec(4000, 1, 250, .15), Spec(1000, 1, 500, .15), Spec(8000, 1, 0, .2),
           Spec(16000, 2, 0, .1), Spec(6000, 1, 810, .1), Spec(12000, 0, 0, .1)}),
      Fgd({Spec(2000, 1, 250, .3), Spec(1000, 1, 500, .2), Spec(8000, 1, 0, .3), Spec(12000, 0, 0, .2)})};
  int checked = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const Policy& fgd = policies[trial % 2];
    std::vector<Device> devices;
    const int g = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < g; ++i)
      devices.push_back(Gpu(1000, static_cast<MiB>(rng() % 4) * static_cast<MiB>(rng() % 300)));
    const int64_t cpu = rng() % 4 == 0 ? -1 : 4000 + static_cast<int64_t>(rng() % 120) * 1000;
    Node node = NodeOf(devices, cpu);
    const int k = static_cast<int>(rng() % 3);
    const MiB mem = rng() % 3 == 0 ? 0 : static_cast<MiB>(50 + rng() % 900);
    PodRequest pod = Pod(k, mem, static_cast<int64_t>(rng() % 4) * 1000);
    NodeSummary sum = fgd.Summarize(node);
    NodeEvaluation e = fgd.Evaluate(node, sum, pod);
    NodeScore score = fgd.Score(node, sum, pod);
    if (!e.verdict.fits()) continue;
    Node after = node;
    ASSERT_TRUE(ApplyPlacement(after, pod, e.placement, {}).ok());
    EXPECT_NEAR(e.fill_cost, fgd.Summarize(after).fill_fragmentation - sum.fill_fragmentation, 1e-6)
        << "trial " << trial;
    EXPECT_DOUBLE_EQ(score.fill_cost, e.fill_cost) << "trial " << trial;
    ++checked;
  }
  EXPECT_GT(checked, 300);
}

// The same property with host memory as well as CPU limiting the copies: nodes with memory to
// spare (or unlimited) take the tally-free path, the others the exact one.
TEST(FillFragmentation, ScoreIsTheExactDifferenceWithHostMemory) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  auto with_memory = [](TypicalSpec s, int64_t gib) {
    s.memory_bytes = gib * (int64_t{1} << 30);
    return s;
  };
  Policy fgd = Fgd({with_memory(Spec(2000, 1, 100, .2), 8), with_memory(Spec(4000, 1, 250, .15), 16),
                    Spec(1000, 1, 500, .15), with_memory(Spec(8000, 1, 0, .2), 48),
                    with_memory(Spec(16000, 2, 0, .1), 96), with_memory(Spec(12000, 0, 0, .2), 4)});
  std::mt19937_64 rng(12);
  int checked = 0, limited = 0;
  for (int trial = 0; trial < 600; ++trial) {
    std::vector<Device> devices;
    const int g = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < g; ++i)
      devices.push_back(Gpu(1000, static_cast<MiB>(rng() % 4) * static_cast<MiB>(rng() % 300)));
    Node node = NodeOf(devices, rng() % 2 == 0 ? -1 : 8000 + static_cast<int64_t>(rng() % 120) * 1000);
    node.memory_bytes = rng() % 4 == 0 ? -1 : static_cast<int64_t>(rng() % 400) * kGiB;
    PodRequest pod = Pod(static_cast<int>(rng() % 3), rng() % 3 == 0 ? 0 : static_cast<MiB>(50 + rng() % 900),
                         static_cast<int64_t>(rng() % 4) * 1000);
    pod.memory_bytes = static_cast<int64_t>(rng() % 64) * kGiB;
    NodeSummary sum = fgd.Summarize(node);
    NodeEvaluation e = fgd.Evaluate(node, sum, pod);
    if (!e.verdict.fits()) continue;
    Node after = node;
    ASSERT_TRUE(ApplyPlacement(after, pod, e.placement, {}).ok());
    EXPECT_NEAR(e.fill_cost, fgd.Summarize(after).fill_fragmentation - sum.fill_fragmentation, 1e-6)
        << "trial " << trial;
    EXPECT_DOUBLE_EQ(fgd.Score(node, sum, pod).fill_cost, e.fill_cost) << "trial " << trial;
    ++checked;
    limited += node.memory_bytes >= 0 && node.memory_bytes - pod.memory_bytes < sum.fill_memory_ample;
  }
  EXPECT_GT(checked, 300);
  EXPECT_GT(limited, 50);  // the exact path ran on memory-limited nodes
}

// F̂ straight from its definition (docs/placement.md), from the node's devices rather than the
// summary's tallies: Σ_m p_m · (R − U(m)), U(m) the device memory copies of m could take, no more
// copies than the free CPU and host memory feed. Healthy devices of one model only.
double FillByDefinition(const Node& node, const std::vector<TypicalSpec>& specs) {
  MiB total = 0;
  for (const Device& d : node.devices) total += DeviceFreeMiB(d, {});
  const int64_t cpu = node.cpu_milli < 0 ? -1 : node.cpu_milli - node.requested_cpu_milli;
  const int64_t memory = node.memory_bytes < 0 ? -1 : node.memory_bytes - node.requested_memory_bytes;
  double f = 0;
  for (const TypicalSpec& s : specs) {
    int64_t fed = int64_t{1} << 40;
    if (cpu >= 0 && s.cpu_milli > 0) fed = std::min(fed, cpu / s.cpu_milli);
    if (memory >= 0 && s.memory_bytes > 0) fed = std::min(fed, memory / s.memory_bytes);
    MiB usable = 0;
    int empty = 0;
    for (const Device& d : node.devices) {
      const MiB free = DeviceFreeMiB(d, {});
      if (s.mem_per_device_mib > 0 && d.capacity_mib >= s.mem_per_device_mib && free >= s.mem_per_device_mib)
        usable += free;
      if (s.mem_per_device_mib == 0 && d.shares.empty()) {
        usable += free;
        ++empty;
      }
    }
    MiB used = 0;
    if (s.device_count > 0 && s.mem_per_device_mib > 0) {
      used = std::min<MiB>(usable, fed * s.device_count * s.mem_per_device_mib);
    } else if (s.device_count > 0 && empty > 0) {
      used = usable * (std::min<int64_t>(empty / s.device_count, fed) * s.device_count) / empty;
    }
    f += s.weight * static_cast<double>(total - used);
  }
  return f;
}

// The lane loops of F̂ against its definition, before and after a pod, on random nodes and
// workloads: odd and even counts of fractional and whole specs (so the last lane group is part
// padding), specs without CPU or host memory, multi-device whole specs, devices too small for
// some specs, and unlimited CPU or host memory.
TEST(FillFragmentation, MatchesItsDefinitionOnRandomNodes) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  std::mt19937_64 rng(13);
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<TypicalSpec> specs;
    const int fractional = 1 + static_cast<int>(rng() % 7), whole = static_cast<int>(rng() % 4);
    for (int i = 0; i < fractional + whole + static_cast<int>(rng() % 2); ++i) {
      const int count = i < fractional ? 1 + static_cast<int>(rng() % 2) : (i < fractional + whole ? 1 + i % 2 : 0);
      TypicalSpec s = Spec(static_cast<int64_t>(rng() % 5) * 2000, count,
                           i < fractional ? static_cast<MiB>(100 + rng() % 1100) : 0, 0.05 + 0.1 * (rng() % 5));
      if (rng() % 2 == 0) s.memory_bytes = static_cast<int64_t>(1 + rng() % 32) * kGiB;
      specs.push_back(s);
    }
    const Policy fgd = Fgd(specs);
    std::vector<Device> devices;
    for (int i = 0, g = 1 + static_cast<int>(rng() % 8); i < g; ++i) {
      devices.push_back(Gpu(1000, static_cast<MiB>(rng() % 4) * static_cast<MiB>(rng() % 300)));
    }
    Node node = NodeOf(devices, rng() % 4 == 0 ? -1 : static_cast<int64_t>(rng() % 40) * 1000);
    node.memory_bytes = rng() % 3 == 0 ? -1 : static_cast<int64_t>(rng() % 200) * kGiB;
    const NodeSummary sum = fgd.Summarize(node);
    ASSERT_NEAR(sum.fill_fragmentation, FillByDefinition(node, fgd.workload().specs), 1e-6) << "trial " << trial;
    PodRequest pod = Pod(1 + static_cast<int>(rng() % 2), rng() % 3 == 0 ? 0 : static_cast<MiB>(50 + rng() % 900),
                         static_cast<int64_t>(rng() % 3) * 1000);
    pod.memory_bytes = static_cast<int64_t>(rng() % 16) * kGiB;
    NodeEvaluation e = fgd.Evaluate(node, sum, pod);
    if (!e.verdict.fits()) continue;
    Node after = node;
    ASSERT_TRUE(ApplyPlacement(after, pod, e.placement, {}).ok());
    EXPECT_NEAR(sum.fill_fragmentation + e.fill_cost, FillByDefinition(after, fgd.workload().specs), 1e-6)
        << "trial " << trial;
    ++checked;
  }
  EXPECT_GT(checked, 150);
}

// Half-device steps, floored: 0..499 MiB of a 1000-MiB device → 0, 500 → 1, −1 → −1.
TEST(FillFragmentation, LevelsAreHalfDevices) {
  EXPECT_EQ(FillLevel(0, 1000), 0);
  EXPECT_EQ(FillLevel(499, 1000), 0);
  EXPECT_EQ(FillLevel(500, 1000), 1);
  EXPECT_EQ(FillLevel(-1, 1000), -1);
  EXPECT_EQ(FillLevel(-40960, 81920), -1);
}

// FractionalFit's table lookup agrees with a binary search over the sorted slice sizes, for
// workloads whose largest slice makes the buckets 1 MiB wide and wider, at every bucket edge.
TEST(Columns, FractionalFitCountsTheSlicesAFreeAmountHolds) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<TypicalSpec> specs;
    const MiB largest = MiB{1} << (4 + rng() % 14);
    for (int i = 0, n = 1 + static_cast<int>(rng() % 20); i < n; ++i)
      specs.push_back(Spec(1000, 1, 1 + static_cast<MiB>(rng() % static_cast<uint64_t>(largest)), 1));
    std::sort(specs.begin(), specs.end(),
              [](const TypicalSpec& a, const TypicalSpec& b) { return a.mem_per_device_mib < b.mem_per_device_mib; });
    const Columns c = Columns::Of(specs);
    auto by_search = [&](MiB free) {
      return static_cast<int>(std::upper_bound(c.mem.begin(), c.mem.begin() + c.n_fractional, free) - c.mem.begin());
    };
    for (MiB free : {MiB{0}, MiB{1}, largest - 1, largest, largest + 1, 4 * largest}) {
      EXPECT_EQ(c.FractionalFit(free), by_search(free)) << "trial " << trial << " free " << free;
    }
    for (const TypicalSpec& s : specs) {
      for (MiB free : {s.mem_per_device_mib - 1, s.mem_per_device_mib, s.mem_per_device_mib + 1})
        EXPECT_EQ(c.FractionalFit(free), by_search(free)) << "trial " << trial << " free " << free;
    }
    for (int i = 0; i < 50; ++i) {
      const MiB free = static_cast<MiB>(rng() % static_cast<uint64_t>(2 * largest));
      EXPECT_EQ(c.FractionalFit(free), by_search(free)) << "trial " << trial << " free " << free;
    }
  }
}

// Every container is placed and costed, however many the pod has (the pick order once stopped at
// 64). 70 containers of 10 MiB share one 1000-MiB GPU: 300 MiB stay free.
TEST(Fit, EveryContainerOfALargePodIsPlaced) {
  Node node = NodeOf({Gpu(1000)}, -1);
  PodRequest pod = Pod(0, 0);
  for (int i = 0; i < 70; ++i) pod.containers.push_back(ContainerRequest{"c" + std::to_string(i), i, false, 1, 10});
  NodeEvaluation e = Simple(PolicyKind::kBinpack).Evaluate(node, pod);
  ASSERT_TRUE(e.verdict.fits()) << e.verdict.Message();
  EXPECT_EQ(e.placement.containers.size(), 70u);
  EXPECT_DOUBLE_EQ(e.cost, 300);  // binpack: the free memory left on the node
}

TEST(Policy, ParseNames) {
  EXPECT_EQ(*ParsePolicyKind("fgd"), PolicyKind::kFgd);
  EXPECT_EQ(*ParsePolicyKind("spread"), PolicyKind::kSpread);
  EXPECT_EQ(ParsePolicyKind("tetris").status().message(), "unknown policy \"tetris\" (want fgd, binpack or spread)");
}

// A summary's tallies are as long as its policy's workload has specs: scoring it under a policy
// with more specs would read past them, so Score aborts instead.
TEST(PolicyDeathTest, ScoreRefusesASummaryOfAnotherWorkload) {
  Node node = NodeOf({Gpu(1000), Gpu(1000)}, 16000);
  Policy two = Fgd({Spec(4000, 1, 500, .5), Spec(8000, 1, 0, .5)});
  Policy three = Fgd({Spec(4000, 1, 500, .5), Spec(8000, 1, 0, .3), Spec(32000, 0, 0, .2)});
  EXPECT_EQ(three.Summarize(node).spec_count, 3);
  EXPECT_DEATH((void)three.Score(node, two.Summarize(node), Pod(1, 100)), "spec_count");
}

}  // namespace
}  // namespace gpupack::placement

// Burstable memory and the per-process overhead floor in the placement core (docs/placement.md,
// "Burstable memory" and "Per-process overhead"), each case with its arithmetic written out: the
// fit is on the guaranteed amounts, the ceilings are bounded per device, and each process pays
// the overhead once per device.
#include <gtest/gtest.h>

#include "placement/placement.h"
#include "testing/builders.h"

namespace gpupack::placement {
namespace {

using builders::Gpu;
using builders::NodeOf;
using builders::Pod;
using builders::Spec;

Policy Binpack(PlacementOptions options = {}) {
  return Policy(PolicyKind::kBinpack, TypicalWorkload{{Spec(0, 1, 0, 1)}}, options);
}

// Another pod's share with cap `cap` and ceiling `ceiling` (0: none).
DeviceShare Burst(MiB cap, MiB ceiling) {
  DeviceShare s = builders::OtherPodShare(cap);
  s.mem_limit_mib = ceiling;
  return s;
}

// Pod "default/p" with one container of `request` MiB on one device and a ceiling of `ceiling`.
PodRequest BurstPod(MiB request, MiB ceiling) {
  PodRequest p = Pod(1, request);
  p.containers[0].mem_limit_per_device_mib = ceiling;
  return p;
}

TEST(Burstable, FitsOnTheGuaranteedAmountWithCeilingsAboveTheDevice) {
  // 80 GiB device holding 40960 guaranteed under a 61440 ceiling. The pod asks 32768 under 49152:
  // guaranteed 40960 + 32768 = 73728 ≤ 81920; ceilings 61440 + 49152 = 110592 ≤ 1.5 × 81920 = 122880.
  Device d = Gpu(81920);
  d.shares.push_back(Burst(40960, 61440));
  Node node = NodeOf({d});
  const PlacementOptions options;
  EXPECT_EQ(DeviceFreeMiB(node.devices[0], options), 81920 - 40960);
  EXPECT_EQ(CeilingRoomMiB(node.devices[0], options), 122880 - 61440);
  Policy policy = Binpack();
  const PodRequest pod = BurstPod(32768, 49152);
  NodeEvaluation e = policy.Evaluate(node, policy.Summarize(node), pod);
  ASSERT_TRUE(e.verdict.fits()) << e.verdict.Message();
  ASSERT_EQ(e.placement.containers.size(), 1u);
  EXPECT_EQ(e.placement.containers[0].mem_per_device_mib, 32768);
  EXPECT_EQ(e.placement.containers[0].mem_limit_per_device_mib, 49152);
  ASSERT_TRUE(ApplyPlacement(node, pod, e.placement, options).ok());
  EXPECT_EQ(node.devices[0].shares.back().CeilingMiB(), 49152);
  // Left: 81920 − 73728 = 8192 guaranteed, 122880 − 110592 = 12288 of ceiling room.
  EXPECT_EQ(DeviceFreeMiB(node.devices[0], options), 8192);
  EXPECT_EQ(CeilingRoomMiB(node.devices[0], options), 12288);
}

TEST(Burstable, ACeilingOverTheBoundSkipsTheDeviceWithAVerdictNamingIt) {
  // Device 0 holds 40960 under an 81920 ceiling: room 122880 − 81920 = 40960 < the pod's 49152,
  // though 81920 − 40960 = 40960 is free for its guaranteed 8192. Device 1 is empty: room 122880.
  Device crowded = Gpu("GPU-crowded", 81920);
  crowded.shares.push_back(Burst(40960, 81920));
  Node node = NodeOf({crowded, Gpu("GPU-empty", 81920)});
  Policy policy = Binpack();
  const PodRequest pod = BurstPod(8192, 49152);
  NodeEvaluation e = policy.Evaluate(node, policy.Summarize(node), pod);
  ASSERT_TRUE(e.verdict.fits()) << e.verdict.Message();
  // Binpack would take the fuller device 0; the bound leaves it device 1.
  EXPECT_EQ(e.placement.containers[0].device_slots, std::vector<int>{1});
  // Without device 1 the node does not fit, and the verdict names the bound and the annotation.
  Node alone = NodeOf({crowded});
  NodeEvaluation refused = policy.Evaluate(alone, policy.Summarize(alone), pod);
  ASSERT_FALSE(refused.verdict.fits());
  EXPECT_EQ(refused.verdict.reason, RejectReason::kExcludedByRule);
  EXPECT_NE(refused.verdict.Message().find("1 device would hold more than 150 % of its memory in ceilings with this "
                                           "pod's 49152 MiB gpupack.io/gpu-memory-limit"),
            std::string::npos)
      << refused.verdict.Message();
  // A ceiling of 40960 is exactly the room: it fits.
  EXPECT_TRUE(policy.Evaluate(alone, policy.Summarize(alone), BurstPod(8192, 40960)).verdict.fits());
}

TEST(Burstable, ShareWithoutCeilingMayNotTakeTheLastCeilingRoom) {
  // 8192 guaranteed under a 114688 ceiling: raw free 81920 − 8192 = 73728, but the ceiling room is
  // 122880 − 114688 = 8192, and a share without a ceiling has a ceiling of its own cap. Free: 8192.
  Device d = Gpu(81920);
  d.shares.push_back(Burst(8192, 114688));
  Node node = NodeOf({d});
  EXPECT_EQ(DeviceFreeMiB(node.devices[0], PlacementOptions{}), 8192);
  Policy policy = Binpack();
  NodeEvaluation too_big = policy.Evaluate(node, policy.Summarize(node), Pod(1, 16384));
  ASSERT_FALSE(too_big.verdict.fits());
  EXPECT_EQ(too_big.verdict.reason, RejectReason::kInsufficientDeviceMemory);
  EXPECT_TRUE(policy.Evaluate(node, policy.Summarize(node), Pod(1, 8192)).verdict.fits());
}

TEST(Burstable, LiveUseUpToTheCeilingsIsTheBurstNotForeign) {
  // Live use 50000 on a device with 8192 guaranteed under a 40960 ceiling: the burst explains use
  // up to 40960, so foreign use is 50000 − 40960 = 9040, and free 81920 − 8192 − 9040 = 64688
  // (room 122880 − 40960 = 81920 does not bind). Without the ceiling, foreign would be 50000 − 8192.
  Device d = Gpu(81920);
  d.shares.push_back(Burst(8192, 40960));
  d.used_mib = 50000;
  EXPECT_EQ(DeviceFreeMiB(d, PlacementOptions{}), 64688);
  d.shares[0].mem_limit_mib = 0;
  EXPECT_EQ(DeviceFreeMiB(d, PlacementOptions{}), 81920 - 8192 - (50000 - 8192));
}

TEST(Burstable, ApplyRefusesACeilingThatNoLongerFitsTheBound) {
  // Evaluated on an empty device (room 122880), then another pod's 40960 / 102400 share lands:
  // room 122880 − 102400 = 20480 < the pod's 49152 ceiling, though 40960 guaranteed is still free.
  Node node = NodeOf({Gpu(81920)});
  Policy policy = Binpack();
  const PodRequest pod = BurstPod(8192, 49152);
  NodeEvaluation e = policy.Evaluate(node, policy.Summarize(node), pod);
  ASSERT_TRUE(e.verdict.fits());
  node.devices[0].shares.push_back(Burst(40960, 102400));
  Status applied = ApplyPlacement(node, pod, e.placement, PlacementOptions{});
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(applied.message().find("has room for 20480 MiB of ceilings under the 150 % bound, placement needs 49152"),
            std::string::npos)
      << applied;
  EXPECT_EQ(node.devices[0].shares.size(), 1u);  // untouched
}

TEST(Burstable, TheBoundIsConfigured) {
  // At 100 % the ceilings may not sum over the device: room 81920 − 61440.
  PlacementOptions strict;
  strict.ceiling_overcommit_pct = 100;
  Device d = Gpu(81920);
  d.shares.push_back(Burst(40960, 61440));
  EXPECT_EQ(CeilingRoomMiB(d, strict), 81920 - 61440);
  // The reserve comes off first: (81920 − 1920) × 150 % = 120000, less the 61440 of ceilings.
  PlacementOptions reserved;
  reserved.reserve_mib_per_device = 1920;
  EXPECT_EQ(CeilingRoomMiB(d, reserved), 120000 - 61440);
}

TEST(ProcessOverhead, EachProcessPaysTheOverheadOnceOnItsDevice) {
  // 512 MiB per process on a 4096 MiB device: an empty device offers 4096 − 512 = 3584 to its first
  // process; with one process of 1024 there, the next gets 4096 − 1024 − 2 × 512 = 2048.
  PlacementOptions fixed;
  fixed.process_overhead = ProcessOverheadMode::kFixed;
  fixed.process_overhead_mib = 512;
  EXPECT_EQ(DeviceUsableMiB(Gpu(4096), fixed), 3584);
  EXPECT_EQ(DeviceFreeMiB(Gpu(4096), fixed), 3584);
  EXPECT_EQ(DeviceFreeMiB(Gpu(4096, 1024), fixed), 2048);
  // Off (the default), the same device offers all of it.
  EXPECT_EQ(DeviceFreeMiB(Gpu(4096, 1024), PlacementOptions{}), 3072);
  // The family default: an A100 pays 512 (model/process_overhead.h), so 81920 − 512 = 81408.
  PlacementOptions family;
  family.process_overhead = ProcessOverheadMode::kFamilyDefault;
  EXPECT_EQ(DeviceUsableMiB(Gpu(81920), family), 81408);

  Policy policy = Binpack(fixed);
  Node node = NodeOf({Gpu(4096, 1024)});
  EXPECT_FALSE(policy.Evaluate(node, policy.Summarize(node), Pod(1, 2049)).verdict.fits());
  NodeEvaluation e = policy.Evaluate(node, policy.Summarize(node), Pod(1, 2048));
  ASSERT_TRUE(e.verdict.fits()) << e.verdict.Message();
  ASSERT_TRUE(ApplyPlacement(node, Pod(1, 2048), e.placement, fixed).ok());
  // Full: 4096 − (1024 + 2048) − 3 × 512 = −512, floored at 0.
  EXPECT_EQ(DeviceFreeMiB(node.devices[0], fixed), 0);
}

TEST(ProcessOverhead, LiveUseOfTheProcessesOverheadIsNotForeign) {
  // One process with a 1024 cap uses 1024 + its 512 context = 1536: nothing foreign, so the next
  // process still gets 4096 − 1024 − 2 × 512 = 2048.
  PlacementOptions fixed;
  fixed.process_overhead = ProcessOverheadMode::kFixed;
  fixed.process_overhead_mib = 512;
  Device d = Gpu(4096, 1024);
  d.used_mib = 1536;
  EXPECT_EQ(DeviceFreeMiB(d, fixed), 2048);
}

}  // namespace
}  // namespace gpupack::placement

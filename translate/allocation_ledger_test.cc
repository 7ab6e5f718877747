#include "translate/allocation_ledger.h"

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace gpupack::translate {
namespace {

using builders::TwoContainerAllocation;

TEST(AllocationLedgerTest, FromPlacementResolvesSlotsToDevices) {
  model::Node node;
  node.name = "n1";
  node.devices.resize(2);
  node.devices[0].uuid = "GPU-0";
  node.devices[1].uuid = "MIG-1";
  node.devices[1].index = 0;
  node.devices[1].kind = model::DeviceKind::kMig;
  node.devices[1].parent_uuid = "GPU-0";
  node.devices[1].mig_profile = "1g.10gb";
  node.devices[1].capacity_mib = 9728;
  model::Placement p;
  model::ContainerPlacement cp;
  cp.container = "main";
  cp.container_index = 1;
  cp.device_slots = {1};
  cp.mem_per_device_mib = 4096;
  p.containers.push_back(cp);
  api::Allocation a = AllocationFromPlacement(node, p);
  ASSERT_EQ(a.containers.size(), 1u);
  EXPECT_EQ(a.containers[0].index, 1);
  // 4096 of 9728 MiB without a share of its own: ⌊100 · 4096 / 9728⌋ = 42 % of the instance.
  EXPECT_EQ(a.containers[0].devices[0], (api::AllocatedDevice{"MIG-1", 0, 4096, "GPU-0", "1g.10gb", 42}));
  EXPECT_TRUE(AllocationShares(TwoContainerAllocation(), "u", "ns/p").size() == 2u)
      << "the within-pod init container adds none";
  auto shares = AllocationShares(a, "uid-1", "ns/p");
  ASSERT_EQ(shares.size(), 1u);
  EXPECT_EQ(shares[0].first, "MIG-1");
  EXPECT_EQ(shares[0].second.mem_mib, 4096);
  EXPECT_EQ(shares[0].second.pod_uid, "uid-1");
  EXPECT_EQ(shares[0].second.compute_pct, 42);
  // An allocation written before compute shares: its memory's share of the device, found on the
  // node; without the node, none.
  a.containers[0].devices[0].compute_pct = api::kComputeNotRecorded;
  EXPECT_EQ(AllocationShares(a, "uid-1", "ns/p", &node)[0].second.compute_pct, 42);
  EXPECT_EQ(AllocationShares(a, "uid-1", "ns/p")[0].second.compute_pct, 0);
}

TEST(AllocationLedgerTest, SharesCarryTheSpreadKeySoARestartedExtenderStillSpreads) {
  api::Allocation a = TwoContainerAllocation();
  a.spread_key = "web";
  StatusOr<api::Allocation> back = api::DecodeAllocation(api::EncodeAllocation(a));
  ASSERT_TRUE(back.ok()) << back.status();
  const auto shares = AllocationShares(*back, "uid-1", "ns/web-1");
  ASSERT_EQ(shares.size(), 2u);
  for (const auto& [uuid, share] : shares) EXPECT_EQ(share.spread_key, "web");
}

}  // namespace
}  // namespace gpupack::translate

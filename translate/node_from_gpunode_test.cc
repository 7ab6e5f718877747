#include "translate/node_from_gpunode.h"

#include <gtest/gtest.h>

#include "api/gpunode.h"
#include "testing/builders.h"
#include "testing/fake_clock.h"

namespace gpupack::translate {
namespace {

using Json = nlohmann::json;
using std::chrono::seconds;
using namespace api;
using builders::SampleGpuNodeStatus;

TEST(NodeFromGpuNodeTest, NodeFromGpuNodeSplitsMigAndMarksIsolation) {
  FakeClock clock(Clock::TimePoint(seconds(1'800'000'030)));
  auto node = NodeFromGpuNode(GpuNodeObject("n1", SampleGpuNodeStatus()), seconds(60), clock);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->name, "n1");
  EXPECT_EQ(node->stale_reason, "");
  ASSERT_EQ(node->devices.size(), 3u);
  const model::Device& whole = node->devices[0];
  EXPECT_EQ(whole.kind, model::DeviceKind::kGpu);
  EXPECT_EQ(whole.capacity_mib, 81559);
  EXPECT_EQ(whole.used_mib, 1200);
  EXPECT_TRUE(whole.hard_isolation);  // cgroup-dmem
  const model::Device& mig = node->devices[2];
  EXPECT_EQ(mig.kind, model::DeviceKind::kMig);
  EXPECT_EQ(mig.uuid, "MIG-2");
  EXPECT_EQ(mig.parent_uuid, "GPU-bbbb");
  EXPECT_EQ(mig.index, 1);
  EXPECT_EQ(mig.model, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(mig.mig_profile, "1g.5gb");
  EXPECT_EQ(mig.gpu_instance_id, 7);
  EXPECT_EQ(mig.placement_start, 6);
  EXPECT_EQ(mig.placement_size, 1);
  EXPECT_EQ(mig.capacity_mib, 4864);
  EXPECT_FALSE(mig.healthy);  // inherits the parent's health
  EXPECT_TRUE(mig.hard_isolation);
}

TEST(NodeFromGpuNodeTest, WholeGpuIsSoftWithoutDriverCaps) {
  GpuNodeStatus s = SampleGpuNodeStatus();
  s.enforcement.mode = "none";
  FakeClock clock(s.heartbeat_time);
  auto node = NodeFromGpuNode(GpuNodeObject("n1", s), seconds(60), clock);
  ASSERT_TRUE(node.ok());
  EXPECT_FALSE(node->devices[0].hard_isolation);
  EXPECT_TRUE(node->devices[1].hard_isolation);
}

// The doctor's MemoryEnforced False outranks the mode: whole GPUs lose hard isolation, and the
// node carries the condition's words for the verdict; MIG instances stay hard.
TEST(NodeFromGpuNodeTest, MemoryEnforcedFalseMakesWholeGpusSoftAndSaysWhy) {
  GpuNodeStatus s = SampleGpuNodeStatus();
  s.conditions[0] = {"MemoryEnforced", false, "CgroupDegraded", "cgroup: dmem is not enabled down to kubepods", {}};
  FakeClock clock(s.heartbeat_time);
  auto node = NodeFromGpuNode(GpuNodeObject("n1", s), seconds(60), clock);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_FALSE(node->devices[0].hard_isolation);
  EXPECT_TRUE(node->devices[1].hard_isolation);
  EXPECT_EQ(node->memory_unenforced_reason,
            "MemoryEnforced is False (CgroupDegraded): cgroup: dmem is not enabled down to kubepods");
  s.conditions.clear();  // an agent without the doctor: its mode decides
  node = NodeFromGpuNode(GpuNodeObject("n1", s), seconds(60), clock);
  ASSERT_TRUE(node.ok());
  EXPECT_TRUE(node->devices[0].hard_isolation);
  EXPECT_EQ(node->memory_unenforced_reason, "");
}

TEST(NodeFromGpuNodeTest, StaleHeartbeatMakesNodeUnschedulableWithReason) {
  FakeClock clock(Clock::TimePoint(seconds(1'800'000'000 + 312)));
  auto node = NodeFromGpuNode(GpuNodeObject("n1", SampleGpuNodeStatus()), seconds(120), clock);
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->stale_reason, "GPUNode heartbeat 312s old > TTL 120s");
  clock.Set(Clock::TimePoint(seconds(1'800'000'000 + 120)));
  node = NodeFromGpuNode(GpuNodeObject("n1", SampleGpuNodeStatus()), seconds(120), clock);
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->stale_reason, "");  // exactly at the TTL is still fresh
}

TEST(NodeFromGpuNodeTest, MissingHeartbeatOrNameOrStatus) {
  FakeClock clock;
  Json obj = GpuNodeObject("n1", SampleGpuNodeStatus());
  obj["status"].erase("heartbeatTime");
  auto node = NodeFromGpuNode(obj, seconds(60), clock);
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->stale_reason, "GPUNode has no heartbeat");

  obj = Json{{"metadata", {{"name", "fresh"}}}};  // created, status not yet written
  node = NodeFromGpuNode(obj, seconds(60), clock);
  ASSERT_TRUE(node.ok());
  EXPECT_TRUE(node->devices.empty());
  EXPECT_EQ(node->stale_reason, "GPUNode has no heartbeat");

  EXPECT_FALSE(NodeFromGpuNode(Json{{"status", Json::object()}}, seconds(60), clock).ok());
  EXPECT_FALSE(NodeFromGpuNode(Json("x"), seconds(60), clock).ok());
  obj = GpuNodeObject("n1", SampleGpuNodeStatus());
  obj["status"]["devices"] = "none";
  auto bad = NodeFromGpuNode(obj, seconds(60), clock);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("GPUNode n1"), std::string::npos) << bad.status();
}

TEST(NodeFromGpuNodeTest, AdminExclusionFlowsFromTheNodeAnnotationToTheCoreDevices) {
  // The node annotation, as an administrator writes it (spaces tolerated).
  const Json k8s_node = {
      {"metadata", {{"name", "n1"}, {"annotations", {{"gpupack.io/excluded-devices", "GPU-aaaa, MIG-2"}}}}}};
  auto uuids = ExcludedDevicesOfNode(k8s_node);
  ASSERT_TRUE(uuids.ok()) << uuids.status();
  EXPECT_EQ(*uuids, (std::vector<std::string>{"GPU-aaaa", "MIG-2"}));
  EXPECT_TRUE(ExcludedDevicesOfNode(Json{{"metadata", {{"name", "n1"}}}})->empty());
  auto bad = ExcludedDevicesOfNode(Json{{"metadata", {{"annotations", {{"gpupack.io/excluded-devices", "GPU-a,,"}}}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "node annotation gpupack.io/excluded-devices: \"GPU-a,,\" has an empty UUID");

  GpuNodeStatus status = SampleGpuNodeStatus();
  MarkExcluded(status, *uuids);
  EXPECT_TRUE(status.devices[0].excluded);
  EXPECT_FALSE(status.devices[1].excluded);
  EXPECT_FALSE(status.devices[1].mig_instances[0].excluded);
  EXPECT_TRUE(status.devices[1].mig_instances[1].excluded);
  const Json j = GpuNodeStatusToJson(status);
  EXPECT_EQ(j["devices"][0]["excluded"], true);
  EXPECT_FALSE(j["devices"][1].contains("excluded"));  // written only when set
  EXPECT_EQ(j["devices"][1]["migInstances"][1]["excluded"], true);
  EXPECT_EQ(j["excludedGpus"], 2);
  auto back = GpuNodeStatusFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, status);

  FakeClock clock(Clock::TimePoint(seconds(1'800'000'030)));
  auto node = NodeFromGpuNode(GpuNodeObject("n1", status), seconds(60), clock);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_TRUE(node->devices[0].excluded);
  EXPECT_FALSE(node->devices[1].excluded);
  EXPECT_TRUE(node->devices[2].excluded);
  // Naming a GPU in MIG mode excludes every instance of it; clearing the list returns them.
  MarkExcluded(status, {"GPU-bbbb"});
  EXPECT_FALSE(status.devices[0].excluded);
  EXPECT_TRUE(status.devices[1].mig_instances[0].excluded);
  EXPECT_TRUE(status.devices[1].mig_instances[1].excluded);
  MarkExcluded(status, {});
  EXPECT_FALSE(status.devices[1].mig_instances[0].excluded);
}

}  // namespace
}  // namespace gpupack::translate

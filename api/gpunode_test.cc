#include "api/gpunode.h"

#include <gtest/gtest.h>

namespace gpupack::api {
namespace {

using Json = nlohmann::json;
using std::chrono::seconds;

GpuNodeStatus SampleStatus() {
  GpuNodeStatus s;
  GpuNodeDevice whole;
  whole.uuid = "GPU-aaaa";
  whole.index = 0;
  whole.model = "NVIDIA H100 80GB HBM3";
  whole.memory_mib = 81559;
  whole.used_mib = 1200;
  whole.allocated_mib = 16384;
  s.devices.push_back(whole);
  GpuNodeDevice mig;
  mig.uuid = "GPU-bbbb";
  mig.index = 1;
  mig.model = "NVIDIA A100-SXM4-40GB";
  mig.memory_mib = 40960;
  mig.used_mib = 300;
  mig.mig_enabled = true;
  mig.healthy = false;
  mig.mig_instances.push_back({"MIG-1", "3g.20gb", 19968, 100, 1, 0, 4});
  mig.mig_instances.push_back({"MIG-2", "1g.5gb", 4864, 200, 7, 6, 1});
  s.devices.push_back(mig);
  s.processes.push_back({4242, "GPU-aaaa", 900, "uid-1", "ns/p", "main", "abc123"});
  s.enforcement = {"cgroup-dmem", "615.20", "13.4", ""};
  s.audit.push_back({"over-cap", "GPU-aaaa", "uid-1", "ns/p", "main", 4242, 9000, 8192, "uses more than its cap"});
  s.max_pods_per_device = 16;
  s.heartbeat_time = Clock::TimePoint(seconds(1'800'000'000));
  return s;
}

TEST(GpuNodeTest, RoundTripsEveryField) {
  const GpuNodeStatus s = SampleStatus();
  const Json j = GpuNodeStatusToJson(s);
  auto back = GpuNodeStatusFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
}

TEST(GpuNodeTest, EncodesSummaryAndWireNames) {
  const Json j = GpuNodeStatusToJson(SampleStatus());
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_EQ(j["memoryMiB"], 81559 + 40960);
  EXPECT_EQ(j["allocatedMiB"], 16384);
  EXPECT_EQ(j["usedMiB"], 1500);
  EXPECT_EQ(j["heartbeatTime"], "2027-01-15T08:00:00Z");
  EXPECT_EQ(j["devices"][1]["migInstances"][0]["placement"], (Json{{"start", 0}, {"size", 4}}));
  EXPECT_EQ(j["processes"][0]["podUID"], "uid-1");
  EXPECT_EQ(j["enforcement"]["mode"], "cgroup-dmem");
}

TEST(GpuNodeTest, RejectsWrongTypesNamingTheField) {
  Json j = GpuNodeStatusToJson(SampleStatus());
  j["devices"][1]["memoryMiB"] = "80Gi";
  auto r = GpuNodeStatusFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("status.devices[1].memoryMiB: expected an integer"), std::string::npos)
      << r.status();

  j = GpuNodeStatusToJson(SampleStatus());
  j["devices"][1]["migInstances"][0]["usedMiB"] = -5;
  r = GpuNodeStatusFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("migInstances[0].usedMiB: negative"), std::string::npos) << r.status();

  j = GpuNodeStatusToJson(SampleStatus());
  j["devices"][0].erase("uuid");
  EXPECT_FALSE(GpuNodeStatusFromJson(j).ok());

  j = GpuNodeStatusToJson(SampleStatus());
  j["enforcement"]["mode"] = "magic";
  r = GpuNodeStatusFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown mode \"magic\""), std::string::npos);

  j = GpuNodeStatusToJson(SampleStatus());
  j["heartbeatTime"] = "yesterday";
  r = GpuNodeStatusFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("status.heartbeatTime"), std::string::npos);

  EXPECT_FALSE(GpuNodeStatusFromJson(Json::array()).ok());
  EXPECT_FALSE(GpuNodeStatusFromJson(Json{{"devices", 3}}).ok());
  EXPECT_FALSE(GpuNodeStatusFromJson(Json{{"devices", Json::array({1})}}).ok());
}

TEST(GpuNodeTest, IgnoresUnknownKeysAndNulls) {
  Json j = GpuNodeStatusToJson(SampleStatus());
  j["futureField"] = {{"x", 1}};
  j["devices"][0]["futureField"] = true;
  j["audit"] = nullptr;
  auto r = GpuNodeStatusFromJson(j);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->audit.empty());
}

TEST(GpuNodeTest, NodeFromGpuNodeSplitsMigAndMarksIsolation) {
  FakeClock clock(Clock::TimePoint(seconds(1'800'000'030)));
  auto node = NodeFromGpuNode(GpuNodeObject("n1", SampleStatus()), seconds(60), clock);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->name, "n1");
  EXPECT_EQ(node->stale_reason, "");
  ASSERT_EQ(node->devices.size(), 3u);
  const core::Device& whole = node->devices[0];
  EXPECT_EQ(whole.kind, core::DeviceKind::kGpu);
  EXPECT_EQ(whole.capacity_mib, 81559);
  EXPECT_EQ(whole.used_mib, 1200);
  EXPECT_TRUE(whole.hard_isolation);  // cgroup-dmem
  const core::Device& mig = node->devices[2];
  EXPECT_EQ(mig.kind, core::DeviceKind::kMig);
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

TEST(GpuNodeTest, WholeGpuIsSoftWithoutDriverCaps) {
  GpuNodeStatus s = SampleStatus();
  s.enforcement.mode = "none";
  FakeClock clock(s.heartbeat_time);
  auto node = NodeFromGpuNode(GpuNodeObject("n1", s), seconds(60), clock);
  ASSERT_TRUE(node.ok());
  EXPECT_FALSE(node->devices[0].hard_isolation);
  EXPECT_TRUE(node->devices[1].hard_isolation);
}

TEST(GpuNodeTest, StaleHeartbeatMakesNodeUnschedulableWithReason) {
  FakeClock clock(Clock::TimePoint(seconds(1'800'000'000 + 312)));
  auto node = NodeFromGpuNode(GpuNodeObject("n1", SampleStatus()), seconds(120), clock);
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->stale_reason, "GPUNode heartbeat 312s old > TTL 120s");
  clock.Set(Clock::TimePoint(seconds(1'800'000'000 + 120)));
  node = NodeFromGpuNode(GpuNodeObject("n1", SampleStatus()), seconds(120), clock);
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->stale_reason, "");  // exactly at the TTL is still fresh
}

TEST(GpuNodeTest, MissingHeartbeatOrNameOrStatus) {
  FakeClock clock;
  Json obj = GpuNodeObject("n1", SampleStatus());
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
  obj = GpuNodeObject("n1", SampleStatus());
  obj["status"]["devices"] = "none";
  auto bad = NodeFromGpuNode(obj, seconds(60), clock);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("GPUNode n1"), std::string::npos) << bad.status();
}


TEST(GpuNodeTest, AdminExclusionFlowsFromTheNodeAnnotationToTheCoreDevices) {
  // The node annotation, as an administrator writes it (spaces tolerated).
  const Json k8s_node = {{"metadata", {{"name", "n1"}, {"annotations", {{"gpupack.io/excluded-devices", "GPU-aaaa, MIG-2"}}}}}};
  auto uuids = ExcludedDevicesOfNode(k8s_node);
  ASSERT_TRUE(uuids.ok()) << uuids.status();
  EXPECT_EQ(*uuids, (std::vector<std::string>{"GPU-aaaa", "MIG-2"}));
  EXPECT_TRUE(ExcludedDevicesOfNode(Json{{"metadata", {{"name", "n1"}}}})->empty());
  auto bad = ExcludedDevicesOfNode(Json{{"metadata", {{"annotations", {{"gpupack.io/excluded-devices", "GPU-a,,"}}}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "node annotation gpupack.io/excluded-devices: \"GPU-a,,\" has an empty UUID");

  GpuNodeStatus status = SampleStatus();
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
}  // namespace gpupack::api

#include "api/gpunode.h"

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace gpupack::api {
namespace {

using builders::SampleGpuNodeStatus;

using Json = nlohmann::json;
using std::chrono::seconds;

TEST(GpuNodeTest, RoundTripsEveryField) {
  const GpuNodeStatus s = SampleGpuNodeStatus();
  const Json j = GpuNodeStatusToJson(s);
  auto back = GpuNodeStatusFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
}

TEST(GpuNodeTest, RoundTripsObservedUseAndLeavesItOutWhenNone) {
  GpuNodeStatus s = SampleGpuNodeStatus();
  EXPECT_FALSE(GpuNodeStatusToJson(s).contains("usage"));
  s.usage.push_back({"uid-1", "ns/p", "main", "Deployment", "web", 1, 81559, 8192, 5325, 5000, 5120, 360,
                     Clock::TimePoint(seconds(1'799'996'400))});
  const Json j = GpuNodeStatusToJson(s);
  EXPECT_EQ(j["usage"][0]["p99MiB"], 5120);
  EXPECT_EQ(j["usage"][0]["since"], "2027-01-15T07:00:00Z");
  auto back = GpuNodeStatusFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  Json bad = j;
  bad["usage"][0]["peakMiB"] = -1;
  auto r = GpuNodeStatusFromJson(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("status.usage[0].peakMiB: negative"), std::string::npos) << r.status();
}

TEST(GpuNodeTest, EncodesSummaryAndWireNames) {
  const Json j = GpuNodeStatusToJson(SampleGpuNodeStatus());
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_EQ(j["memoryMiB"], 81559 + 40960);
  EXPECT_EQ(j["allocatedMiB"], 16384);
  EXPECT_EQ(j["usedMiB"], 1500);
  EXPECT_EQ(j["heartbeatTime"], "2027-01-15T08:00:00Z");
  EXPECT_EQ(j["devices"][1]["migInstances"][0]["placement"], (Json{{"start", 0}, {"size", 4}}));
  EXPECT_EQ(j["processes"][0]["podUID"], "uid-1");
  EXPECT_EQ(j["enforcement"]["mode"], "cgroup-dmem");
  EXPECT_EQ(j["devices"][0]["computeEnforcement"], "mps-client");
  EXPECT_EQ(j["devices"][0]["allocatedComputePct"], 40);
  EXPECT_EQ(j["devices"][0]["smUtilPct"], 35);
  EXPECT_FALSE(j["devices"][1].contains("smUtilPct"));  // unknown (MIG mode): omitted
  EXPECT_EQ(j["processes"][0]["smUtilPct"], 30);
  EXPECT_EQ(j["audit"][1]["usedComputePct"], 55);
  EXPECT_EQ(j["audit"][1]["computePct"], 30);
  EXPECT_FALSE(j["audit"][0].contains("computePct"));  // only over-compute findings carry the share
  EXPECT_EQ(j["conditions"][0], (Json{{"type", "MemoryEnforced"},
                                      {"status", "True"},
                                      {"reason", "Enforced"},
                                      {"message", "hard limits through cgroup-dmem"},
                                      {"lastTransitionTime", "2027-01-15T07:43:20Z"}}));
  EXPECT_EQ(j["conditions"][1]["status"], "False");
}

// A GPUNode written before compute enforcement existed reads as none, and an unknown way is refused.
TEST(GpuNodeTest, ComputeEnforcementDefaultsToNoneAndIsChecked) {
  Json j = GpuNodeStatusToJson(SampleGpuNodeStatus());
  j["devices"][0].erase("computeEnforcement");
  auto old = GpuNodeStatusFromJson(j);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->devices[0].compute_enforcement, kComputeEnforcementNone);
  j["devices"][1]["migInstances"][0]["computeEnforcement"] = "time-slicing";
  auto bad = GpuNodeStatusFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "status.devices[1].migInstances[0].computeEnforcement: unknown \"time-slicing\" (want mps-namespace, "
            "mps-client or none)");
}

TEST(GpuNodeTest, ConditionsAreFoundByTypeAndCheckedOnTheWire) {
  const GpuNodeStatus s = SampleGpuNodeStatus();
  ASSERT_NE(FindCondition(s.conditions, kConditionComputeEnforced), nullptr);
  EXPECT_FALSE(FindCondition(s.conditions, kConditionComputeEnforced)->status);
  EXPECT_EQ(FindCondition(s.conditions, "Ready"), nullptr);
  Json j = GpuNodeStatusToJson(s);
  j["conditions"][0]["status"] = "Maybe";
  auto r = GpuNodeStatusFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "status.conditions[0].status: expected True, False or Unknown");
  j = GpuNodeStatusToJson(s);
  j["conditions"][1]["lastTransitionTime"] = "later";
  r = GpuNodeStatusFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("status.conditions[1].lastTransitionTime"), std::string::npos) << r.status();
}

TEST(GpuNodeTest, RejectsWrongTypesNamingTheField) {
  Json j = GpuNodeStatusToJson(SampleGpuNodeStatus());
  j["devices"][1]["memoryMiB"] = "80Gi";
  auto r = GpuNodeStatusFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("status.devices[1].memoryMiB: expected an integer"), std::string::npos)
      << r.status();

  j = GpuNodeStatusToJson(SampleGpuNodeStatus());
  j["devices"][1]["migInstances"][0]["usedMiB"] = -5;
  r = GpuNodeStatusFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("migInstances[0].usedMiB: negative"), std::string::npos) << r.status();

  j = GpuNodeStatusToJson(SampleGpuNodeStatus());
  j["devices"][0].erase("uuid");
  EXPECT_FALSE(GpuNodeStatusFromJson(j).ok());

  j = GpuNodeStatusToJson(SampleGpuNodeStatus());
  j["enforcement"]["mode"] = "magic";
  r = GpuNodeStatusFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown mode \"magic\""), std::string::npos);

  j = GpuNodeStatusToJson(SampleGpuNodeStatus());
  j["heartbeatTime"] = "yesterday";
  r = GpuNodeStatusFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("status.heartbeatTime"), std::string::npos);

  EXPECT_FALSE(GpuNodeStatusFromJson(Json::array()).ok());
  EXPECT_FALSE(GpuNodeStatusFromJson(Json{{"devices", 3}}).ok());
  EXPECT_FALSE(GpuNodeStatusFromJson(Json{{"devices", Json::array({1})}}).ok());
}

TEST(GpuNodeTest, IgnoresUnknownKeysAndNulls) {
  Json j = GpuNodeStatusToJson(SampleGpuNodeStatus());
  j["futureField"] = {{"x", 1}};
  j["devices"][0]["futureField"] = true;
  j["audit"] = nullptr;
  auto r = GpuNodeStatusFromJson(j);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->audit.empty());
}

}  // namespace
}  // namespace gpupack::api

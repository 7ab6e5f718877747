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

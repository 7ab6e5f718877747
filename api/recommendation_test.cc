#include "api/recommendation.h"

#include <gtest/gtest.h>

namespace gpupack::api {
namespace {

using Json = nlohmann::json;

RecommendationReport Sample() {
  RecommendationReport report;
  report.headroom_percent = 10;
  report.min_share_mib = 512;
  report.recommendations.push_back({"ml", "Deployment", "web", "main", 3, 1080, 2, 81920, 8192, 5325, 5120, 5632, 6144,
                                    256, 10, 14, "shrink", "p99 5120 MiB"});
  return report;
}

TEST(RecommendationReport, RoundTripsAndGivesTheQuantitiesToApply) {
  const Json j = RecommendationReportToJson(Sample());
  // Two devices: gpu-memory is the container's total, 2 × 5632 = 11264 Mi.
  EXPECT_EQ(j["recommendations"][0]["gpuMemory"], "11264Mi");
  EXPECT_EQ(j["recommendations"][0]["gpuMemoryLimit"], "12288Mi");
  auto back = RecommendationReportFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, Sample());
}

TEST(RecommendationReport, RefusesWrongTypesNamingTheField) {
  Json j = RecommendationReportToJson(Sample());
  j["recommendations"][0]["peakMiB"] = "5Gi";
  auto r = RecommendationReportFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "report.recommendations[0].peakMiB: expected an integer");
  EXPECT_FALSE(RecommendationReportFromJson(Json::array()).ok());
  EXPECT_FALSE(RecommendationReportFromJson(Json{{"recommendations", 3}}).ok());
}

}  // namespace
}  // namespace gpupack::api

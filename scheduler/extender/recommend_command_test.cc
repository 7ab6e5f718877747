#include "scheduler/extender/recommend_command.h"

#include <gtest/gtest.h>

#include "scheduler/extender/recommendations.h"

namespace gpupack::extender {
namespace {

api::RecommendationReport Sample() {
  api::RecommendationReport report;
  report.headroom_percent = 10;
  report.recommendations.push_back({"ml", "Deployment", "web", "main", 3, 1080, 1, 81920, 8192, 5325, 5120, 5632, 6144,
                                    256, 10, 14, "shrink", "p99 5120 MiB, peak 5325 MiB of 8192 MiB"});
  report.recommendations.push_back(
      {"ci", "Job", "build", "cuda", 1, 12, 1, 81920, 4096, 900, 800, 4096, 4096, 256, 20, 20, "too-few-samples", ""});
  return report;
}

TEST(ParseRecommendFlags, DefaultsToTheExtenderInItsPod) {
  auto f = ParseRecommendFlags({});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->extender, "http://127.0.0.1:8888");
  EXPECT_FALSE(f->json);
  f = ParseRecommendFlags({"--extender", "http://localhost:9395", "--json", "--namespace", "ml"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->extender, "http://localhost:9395");
  EXPECT_TRUE(f->json);
  EXPECT_EQ(f->ns, "ml");
  EXPECT_TRUE(ParseRecommendFlags({"-h"})->help);
}

TEST(ParseRecommendFlags, RefusesWhatItCannotUse) {
  EXPECT_NE(ParseRecommendFlags({"--bogus"}).status().message().find("unknown flag --bogus"), std::string::npos);
  EXPECT_EQ(ParseRecommendFlags({"--extender"}).status().message(), "--extender needs a value");
  EXPECT_EQ(ParseRecommendFlags({"--extender", "localhost:8888"}).status().message(),
            "--extender: expected an http:// or https:// URL, got \"localhost:8888\"");
}

TEST(FormatRecommendationTable, ShowsEachWorkloadAndWhatToApply) {
  const std::string table = FormatRecommendationTable(Sample());
  EXPECT_NE(
      table.find("ml         Deployment/web  main       3     8.00         5.20      5.00     5.50            6.00"
                 "         10→14"),
      std::string::npos)
      << table;
  EXPECT_NE(table.find("ml/web main: gpupack.io/gpu-memory: 5632Mi, annotation gpupack.io/gpu-memory-limit: 6144Mi"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("ci/build cuda:"), std::string::npos) << "only a shrink is advice to apply";
  EXPECT_EQ(InNamespace(Sample(), "ci").recommendations.size(), 1u);
}

TEST(RecommendationFamilies, OneSeriesPerWorkloadContainerAndFigure) {
  const std::vector<prometheus::MetricFamily> families = RecommendationFamilies(Sample());
  ASSERT_EQ(families.size(), 5u);
  EXPECT_EQ(families[0].name, "gpupack_workload_gpu_memory_requested_bytes");
  ASSERT_EQ(families[0].metric.size(), 2u);
  EXPECT_EQ(families[0].metric[0].gauge.value, 8192.0 * 1024 * 1024);
  EXPECT_EQ(families[3].name, "gpupack_workload_gpu_memory_recommended_bytes");
  ASSERT_EQ(families[3].metric.size(), 4u);  // guaranteed and ceiling for each
  EXPECT_EQ(families[3].metric[1].label.back().value, "ceiling");
  EXPECT_EQ(families[3].metric[1].gauge.value, 6144.0 * 1024 * 1024);
  EXPECT_EQ(families[4].metric[1].label.back().value, "too-few-samples");
}

}  // namespace
}  // namespace gpupack::extender

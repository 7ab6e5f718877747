#include "scheduler/extender/usage_store.h"

#include <gtest/gtest.h>

#include "testing/fake_clock.h"

namespace gpupack::extender {
namespace {

using std::chrono::hours;

api::GpuNodeContainerUsage Seen(const std::string& uid, const std::string& workload, model::MiB peak, model::MiB p99,
                                int64_t samples = 360) {
  api::GpuNodeContainerUsage u;
  u.pod_uid = uid;
  u.pod = "ml/" + workload + "-" + uid;
  u.container = "main";
  u.workload_kind = "Deployment";
  u.workload_name = workload;
  u.devices = 1;
  u.device_memory_mib = 81920;
  u.cap_mib = 8192;
  u.peak_mib = peak;
  u.p99_mib = p99;
  u.samples = samples;
  return u;
}

TEST(WorkloadUsageStore, KeepsAWorkloadsPodsAcrossRestartsAndCombinesThemByTheLargest) {
  FakeClock clock;
  WorkloadUsageStore store({}, clock);
  // Pod a reports twice (its figures replace each other), then goes away; its replacement b reports.
  store.Observe({Seen("a", "web", 4000, 3800, 100)});
  store.Observe({Seen("a", "web", 5325, 5120, 200)});
  clock.Advance(hours(1));
  store.Observe({Seen("b", "web", 4800, 4600, 160)});
  const api::RecommendationReport report = store.Recommend(placement::RightsizingOptions{});
  ASSERT_EQ(report.recommendations.size(), 1u);
  const api::WorkloadRecommendation& r = report.recommendations[0];
  EXPECT_EQ(r.ns, "ml");
  EXPECT_EQ(r.workload_kind, "Deployment");
  EXPECT_EQ(r.workload_name, "web");
  EXPECT_EQ(r.pods, 2);
  EXPECT_EQ(r.samples, 200 + 160);  // a's latest report, b's
  EXPECT_EQ(r.peak_mib, 5325);      // a's, the larger
  EXPECT_EQ(r.p99_mib, 5120);
  // The example (placement/rightsizing_test.cc): 5120 × 1.1 → 5632, 5325 × 1.1 → 6144.
  EXPECT_EQ(r.guaranteed_mib, 5632);
  EXPECT_EQ(r.ceiling_mib, 6144);
  EXPECT_EQ(r.verdict, "shrink");
  EXPECT_EQ(report.headroom_percent, 10);
}

TEST(WorkloadUsageStore, AgesOutAndBoundsPodsAndWorkloads) {
  FakeClock clock;
  UsageStoreOptions options;
  options.max_pods = 2;
  options.max_workloads = 2;
  options.retention = hours(24);
  WorkloadUsageStore store(options, clock);
  store.Observe({Seen("a", "web", 1000, 900)});
  clock.Advance(hours(1));
  store.Observe({Seen("b", "web", 2000, 1900)});
  clock.Advance(hours(1));
  store.Observe({Seen("c", "web", 3000, 2900)});  // three pods of web: a, the oldest, goes
  auto report = store.Recommend({});
  ASSERT_EQ(report.recommendations.size(), 1u);
  EXPECT_EQ(report.recommendations[0].pods, 2);
  EXPECT_EQ(report.recommendations[0].peak_mib, 3000);

  clock.Advance(hours(1));
  store.Observe({Seen("d", "batch", 1000, 900)});
  clock.Advance(hours(1));
  store.Observe({Seen("e", "infer", 1000, 900)});  // a third workload: web, the least recently seen, goes
  report = store.Recommend({});
  ASSERT_EQ(report.recommendations.size(), 2u);
  EXPECT_EQ(report.recommendations[0].workload_name, "batch");
  EXPECT_EQ(report.recommendations[1].workload_name, "infer");

  clock.Advance(hours(24) - std::chrono::seconds(1));  // batch seen 25 h − 1 s ago, infer 24 h − 1 s
  report = store.Recommend({});
  ASSERT_EQ(report.recommendations.size(), 1u);
  EXPECT_EQ(report.recommendations[0].workload_name, "infer");
  EXPECT_EQ(store.workloads(), 1u);
}

TEST(WorkloadUsageStore, IgnoresReportsWithoutAWorkloadOrDevice) {
  FakeClock clock;
  WorkloadUsageStore store({}, clock);
  api::GpuNodeContainerUsage nameless = Seen("a", "", 1000, 900);
  api::GpuNodeContainerUsage deviceless = Seen("b", "web", 1000, 900);
  deviceless.device_memory_mib = 0;
  store.Observe({nameless, deviceless});
  EXPECT_EQ(store.workloads(), 0u);
}

}  // namespace
}  // namespace gpupack::extender

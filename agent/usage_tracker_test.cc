#include "agent/usage_tracker.h"

#include <gtest/gtest.h>

namespace gpupack::agent {
namespace {

using std::chrono::seconds;

TEST(UsageHistogram, BucketsAreSixteenPerDoubling) {
  EXPECT_EQ(UsageHistogram::BucketOf(0), 0);
  EXPECT_EQ(UsageHistogram::BucketOf(1), 1);       // log2 1 = 0
  EXPECT_EQ(UsageHistogram::BucketOf(2), 17);      // 1 + 16 × 1
  EXPECT_EQ(UsageHistogram::BucketOf(1024), 161);  // 1 + 16 × 10
  EXPECT_EQ(UsageHistogram::BucketOf(1025), 162);  // just above 1024: the next bucket
  EXPECT_EQ(UsageHistogram::UpperEdgeMiB(161), 1024);
  // 5120 MiB: 16 × log2 5120 = 16 × 12.3219 = 197.15 → bucket 1 + 198 = 199, whose upper edge is
  // ⌈2^(198 / 16)⌉ = ⌈2^12.375⌉ = 5312: at most 3.8 % above 5120, never below.
  EXPECT_EQ(UsageHistogram::BucketOf(5120), 199);
  EXPECT_EQ(UsageHistogram::UpperEdgeMiB(199), 5312);
  EXPECT_EQ(UsageHistogram::BucketOf(int64_t{1} << 40), UsageHistogram::kBuckets - 1);
}

TEST(UsageHistogram, QuantilesAreUpperEdgesCappedAtTheMaximum) {
  UsageHistogram h;
  EXPECT_EQ(h.Quantile(0.99), 0);
  // 100 samples: 95 of 1024 MiB, 4 of 4096, 1 of 5000.
  for (int i = 0; i < 95; ++i) h.Add(1024);
  for (int i = 0; i < 4; ++i) h.Add(4096);
  h.Add(5000);
  EXPECT_EQ(h.count(), 100);
  EXPECT_EQ(h.max(), 5000);
  EXPECT_EQ(h.Quantile(0.95), 1024);  // the 95th smallest is 1024, an exact bucket edge
  EXPECT_EQ(h.Quantile(0.99), 4096);  // the 99th is 4096 (2^12, an edge too)
  // The 100th is 5000, in bucket 198 up to ⌈2^(197 / 16)⌉ = 5087; capped at the maximum, 5000.
  EXPECT_EQ(h.Quantile(1.0), 5000);
}

PodInfo Pod(const std::string& uid, const std::string& name, bool terminating = false) {
  PodInfo p;
  p.uid = uid;
  p.ns = "ml";
  p.name = name;
  p.gpupack = true;
  p.terminating = terminating;
  p.workload = {"Deployment", "web"};
  return p;
}

ContainerCap Cap(const std::string& uid, const std::string& device, model::MiB used, bool running = true) {
  return ContainerCap{"ml", "web-a", "main", device, 8192, used, false, uid, running};
}

api::GpuNodeStatus TwoGpus() {
  api::GpuNodeStatus s;
  s.devices.push_back({.uuid = "GPU-1", .memory_mib = 81559});
  s.devices.push_back({.uuid = "GPU-2", .memory_mib = 40960});
  return s;
}

TEST(UsageTracker, SamplesTheBusiestDeviceOfEachRunningContainer) {
  UsageTracker t;
  const Clock::TimePoint t0(seconds(1000));
  const std::vector<PodInfo> pods = {Pod("u1", "web-a")};
  // Pass 1: 2000 on GPU-1, 3000 on GPU-2 → sample 3000. Pass 2: 5325 on GPU-1 → 5325. Pass 3:
  // the container is not running: no sample.
  t.Observe({Cap("u1", "GPU-1", 2000), Cap("u1", "GPU-2", 3000)}, pods, TwoGpus(), t0);
  t.Observe({Cap("u1", "GPU-1", 5325), Cap("u1", "GPU-2", 100)}, pods, TwoGpus(), t0 + seconds(10));
  t.Observe({Cap("u1", "GPU-1", 0, false), Cap("u1", "GPU-2", 0, false)}, pods, TwoGpus(), t0 + seconds(20));
  const std::vector<api::GpuNodeContainerUsage> r = t.Report();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].pod, "ml/web-a");
  EXPECT_EQ(r[0].container, "main");
  EXPECT_EQ(r[0].workload_kind, "Deployment");
  EXPECT_EQ(r[0].workload_name, "web");
  EXPECT_EQ(r[0].samples, 2);
  EXPECT_EQ(r[0].peak_mib, 5325);
  EXPECT_EQ(r[0].p99_mib, 5325);  // ⌈0.99 × 2⌉ = the 2nd sample, capped at the maximum
  EXPECT_EQ(r[0].devices, 2);
  EXPECT_EQ(r[0].device_memory_mib, 40960);  // the smaller of the two
  EXPECT_EQ(r[0].cap_mib, 8192);
  EXPECT_EQ(r[0].since, t0);
}

TEST(UsageTracker, ForgetsContainersOfPodsThatWentAwayOrTerminate) {
  UsageTracker t;
  const Clock::TimePoint t0(seconds(1000));
  t.Observe({Cap("u1", "GPU-1", 100), Cap("u2", "GPU-2", 200)}, {Pod("u1", "web-a"), Pod("u2", "web-b")}, TwoGpus(),
            t0);
  EXPECT_EQ(t.Report().size(), 2u);
  t.Observe({Cap("u1", "GPU-1", 100)}, {Pod("u1", "web-a", /*terminating=*/true)}, TwoGpus(), t0 + seconds(10));
  EXPECT_TRUE(t.Report().empty());
}

}  // namespace
}  // namespace gpupack::agent

#include "agent/reporter.h"

#include <gtest/gtest.h>

#include "testing/fake_clock.h"

namespace gpupack::agent {
namespace {

using std::chrono::seconds;

class RecordingSink : public ReportSink {
 public:
  Status WriteGpuNodeStatus(const std::string& node, const api::GpuNodeStatus& status) override {
    if (!fail_writes.ok()) return fail_writes;
    writes.push_back({node, status});
    return Status::Ok();
  }
  Status EnsureNodeCapacity(const std::string& node, const std::string& gpu_memory, int64_t gpus,
                            int64_t gpu_compute) override {
    if (!fail_capacity.ok()) return fail_capacity;
    capacity.push_back({node, gpu_memory, gpus, gpu_compute});
    return Status::Ok();
  }
  Status EmitAuditEvent(const std::string&, const api::GpuNodeAuditFinding&) override { return Status::Ok(); }

  struct Capacity {
    std::string node, memory;
    int64_t gpus;
    int64_t compute;
  };
  std::vector<std::pair<std::string, api::GpuNodeStatus>> writes;
  std::vector<Capacity> capacity;
  Status fail_writes, fail_capacity;
};

api::GpuNodeStatus TwoDevices(model::MiB used = 100) {
  api::GpuNodeStatus s;
  api::GpuNodeDevice a;
  a.uuid = "GPU-1";
  a.memory_mib = 81559;
  a.used_mib = used;
  api::GpuNodeDevice b;
  b.uuid = "GPU-2";
  b.memory_mib = 40960;
  b.mig_enabled = true;
  b.mig_instances.push_back({"MIG-a", "3g.20gb", 19968, 0, 1, 0, 4});
  b.mig_instances.push_back({"MIG-b", "1g.5gb", 4864, 0, 7, 6, 1});
  s.devices = {a, b};
  return s;
}

class ReporterTest : public ::testing::Test {
 protected:
  ReporterTest() : reporter_(Options(), &sink_, &clock_) {}
  static ReporterOptions Options() {
    ReporterOptions o;
    o.node_name = "n1";
    o.heartbeat_interval = seconds(60);
    o.min_write_interval = seconds(10);
    o.change_threshold_mib = 256;
    o.capacity_recheck_interval = seconds(300);
    o.max_pods_per_device = 4;
    return o;
  }
  FakeClock clock_;
  RecordingSink sink_;
  Reporter reporter_;
};

TEST_F(ReporterTest, CapacityCountsWholeGpusAndMigInstances) {
  const NodeCapacity c = CapacityOf(TwoDevices());
  EXPECT_EQ(c.memory_mib, 81559 + 19968 + 4864);
  EXPECT_EQ(c.devices, 3);
}

TEST_F(ReporterTest, FirstReportWritesStatusAndCapacity) {
  auto r = reporter_.Report(TwoDevices());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, Reporter::Outcome::kWritten);
  ASSERT_EQ(sink_.writes.size(), 1u);
  EXPECT_EQ(sink_.writes[0].first, "n1");
  EXPECT_EQ(sink_.writes[0].second.heartbeat_time, clock_.Now());
  ASSERT_EQ(sink_.capacity.size(), 1u);
  EXPECT_EQ(sink_.capacity[0].memory, "106391Mi");
  EXPECT_EQ(sink_.capacity[0].gpus, 12);
  EXPECT_EQ(sink_.capacity[0].compute, 3 * 100);  // 100 % for each of the 3 devices
}

TEST_F(ReporterTest, SmallUsageChangesWaitForTheHeartbeat) {
  ASSERT_TRUE(reporter_.Report(TwoDevices(100)).ok());
  clock_.Advance(seconds(20));
  EXPECT_EQ(*reporter_.Report(TwoDevices(300)), Reporter::Outcome::kSkipped);  // moved 200 ≤ 256
  clock_.Advance(seconds(39));
  EXPECT_EQ(*reporter_.Report(TwoDevices(300)), Reporter::Outcome::kSkipped);  // 59 s
  clock_.Advance(seconds(1));
  EXPECT_EQ(*reporter_.Report(TwoDevices(300)), Reporter::Outcome::kWritten);  // heartbeat due
  EXPECT_EQ(sink_.writes.size(), 2u);
}

TEST_F(ReporterTest, BigChangesAreWrittenEarlyButRateLimited) {
  ASSERT_TRUE(reporter_.Report(TwoDevices(100)).ok());
  clock_.Advance(seconds(5));
  EXPECT_EQ(*reporter_.Report(TwoDevices(5000)), Reporter::Outcome::kSkipped);  // within min interval
  clock_.Advance(seconds(5));
  EXPECT_EQ(*reporter_.Report(TwoDevices(5000)), Reporter::Outcome::kWritten);
  clock_.Advance(seconds(10));
  api::GpuNodeStatus unhealthy = TwoDevices(5000);
  unhealthy.devices[0].healthy = false;  // not a usage change: always significant
  EXPECT_EQ(*reporter_.Report(unhealthy), Reporter::Outcome::kWritten);
  EXPECT_EQ(sink_.writes.size(), 3u);
}

TEST_F(ReporterTest, FailedWriteIsRetriedNextPass) {
  sink_.fail_writes = Status::Unavailable("apiserver down");
  auto r = reporter_.Report(TwoDevices());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  sink_.fail_writes = Status::Ok();
  clock_.Advance(seconds(1));
  EXPECT_EQ(*reporter_.Report(TwoDevices()), Reporter::Outcome::kWritten);
}

TEST_F(ReporterTest, CapacityIsRecheckedPeriodicallyAndOnChange) {
  ASSERT_TRUE(reporter_.Report(TwoDevices()).ok());
  clock_.Advance(seconds(100));
  ASSERT_TRUE(reporter_.Report(TwoDevices()).ok());
  EXPECT_EQ(sink_.capacity.size(), 1u);
  clock_.Advance(seconds(200));  // 300 s since the check: kubelet may have reset it
  ASSERT_TRUE(reporter_.Report(TwoDevices()).ok());
  EXPECT_EQ(sink_.capacity.size(), 2u);
  api::GpuNodeStatus fewer = TwoDevices();
  fewer.devices.pop_back();
  ASSERT_TRUE(reporter_.Report(fewer).ok());
  ASSERT_EQ(sink_.capacity.size(), 3u);
  EXPECT_EQ(sink_.capacity[2].memory, "81559Mi");
  EXPECT_EQ(sink_.capacity[2].gpus, 4);
  // A failed capacity write does not block the status and is retried on the next pass.
  sink_.fail_capacity = Status::Unavailable("down");
  api::GpuNodeStatus none;
  ASSERT_TRUE(reporter_.Report(none).ok());
  sink_.fail_capacity = Status::Ok();
  ASSERT_TRUE(reporter_.Report(none).ok());
  ASSERT_EQ(sink_.capacity.size(), 4u);
  EXPECT_EQ(sink_.capacity[3].memory, "0Mi");
}

TEST(SignificantChangeTest, OnlyUsageNoiseIsIgnored) {
  api::GpuNodeStatus a = TwoDevices(100);
  api::GpuNodeStatus b = TwoDevices(356);
  EXPECT_FALSE(SignificantChange(a, b, 256));
  b.devices[0].used_mib = 357;
  EXPECT_TRUE(SignificantChange(a, b, 256));
  b = a;
  b.devices[1].mig_instances[1].used_mib = 1000;
  EXPECT_TRUE(SignificantChange(a, b, 256));
  b = a;
  b.processes.push_back({1, "GPU-1", 1, "", "", "", ""});
  EXPECT_TRUE(SignificantChange(a, b, 256));
  b = a;
  b.enforcement.mode = "cgroup-dmem";
  EXPECT_TRUE(SignificantChange(a, b, 256));
  b = a;
  b.heartbeat_time += seconds(5);
  EXPECT_FALSE(SignificantChange(a, b, 256));
}

TEST(SignificantChangeTest, ObservedUseCountsOnlyWhenItsPeakMovesPastTheThreshold) {
  api::GpuNodeStatus a = TwoDevices(100);
  a.usage.push_back({.pod_uid = "u1", .pod = "ml/p", .container = "main", .peak_mib = 1000, .samples = 10});
  api::GpuNodeStatus b = a;
  b.usage[0].samples = 11;  // every pass adds a sample: not worth a write by itself
  b.usage[0].p99_mib = 900;
  b.usage[0].peak_mib = 1256;
  EXPECT_FALSE(SignificantChange(a, b, 256));
  b.usage[0].peak_mib = 1257;
  EXPECT_TRUE(SignificantChange(a, b, 256));
  b = a;
  b.usage.push_back({.pod_uid = "u2", .pod = "ml/q", .container = "main"});  // a new container is
  EXPECT_TRUE(SignificantChange(a, b, 256));
}

TEST_F(ReporterTest, ExcludedDevicesAreNotAdvertised) {
  api::GpuNodeStatus s = TwoDevices();
  api::MarkExcluded(s, {"GPU-1", "MIG-b"});
  // Left: MIG-a only, 19968 MiB; the report carries the exclusion and the capacity shrinks.
  const NodeCapacity c = CapacityOf(s);
  EXPECT_EQ(c.memory_mib, 19968);
  EXPECT_EQ(c.devices, 1);
  ASSERT_TRUE(reporter_.Report(s).ok());
  ASSERT_EQ(sink_.capacity.size(), 1u);
  EXPECT_EQ(sink_.capacity[0].memory, "19968Mi");
  EXPECT_EQ(sink_.capacity[0].gpus, 1 * 4);
  ASSERT_EQ(sink_.writes.size(), 1u);
  EXPECT_TRUE(sink_.writes[0].second.devices[0].excluded);
}

}  // namespace
}  // namespace gpupack::agent

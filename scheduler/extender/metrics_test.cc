#include "scheduler/extender/metrics.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "scheduler/extender/backend.h"
#include "scheduler/extender/cluster_state.h"
#include "scheduler/extender/extender.h"
#include "testing/builders.h"
#include "testing/fake_clock.h"

namespace gpupack::extender {
namespace {

using builders::GpuNode;

// Every line of `text` that starts with `prefix` (samples of one family), sorted: the exposition
// order of series within a family is not part of the format.
std::vector<std::string> Samples(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
    start = end + 1;
  }
  std::sort(out.begin(), out.end());
  return out;
}

class ExtenderMetricsTest : public ::testing::Test {
 protected:
  FakeClock clock_{Clock::TimePoint(std::chrono::seconds(1'800'000'000))};
  ClusterState state_{builders::PriorPolicy(model::PolicyKind::kFgd), clock_, std::chrono::seconds(120)};
  ExtenderMetrics metrics_{&state_, true, BuildInfo{"0.1.0", "0123456789ab"}};
};

TEST_F(ExtenderMetricsTest, BuildInfoCarriesVersionAndRevision) {
  EXPECT_EQ(Samples(metrics_.Render(), "gpupack_build_info"),
            std::vector<std::string>{R"(gpupack_build_info{revision="0123456789ab",version="0.1.0"} 1)"});
}

// The heartbeat each node was last upserted with, in Unix seconds; none for a node without one
// (cluster files), 0 for a GPUNode that never reported.
TEST_F(ExtenderMetricsTest, NodeReportTimestampIsTheAcceptedHeartbeat) {
  state_.UpsertNode(GpuNode("reported", 1, 81920), clock_.Now() - std::chrono::milliseconds(2500));
  state_.UpsertNode(GpuNode("never-reported", 1, 81920), Clock::TimePoint{});
  state_.UpsertNode(GpuNode("from-file", 1, 81920));
  EXPECT_EQ(Samples(metrics_.Render(), "gpupack_node_report_timestamp_seconds{"),
            (std::vector<std::string>{R"(gpupack_node_report_timestamp_seconds{node="never-reported"} 0)",
                                      R"(gpupack_node_report_timestamp_seconds{node="reported"} 1799999997.5)"}));
  clock_.Advance(std::chrono::seconds(30));
  state_.UpsertNode(GpuNode("reported", 1, 81920), clock_.Now());  // the next heartbeat
  EXPECT_EQ(Samples(metrics_.Render(), R"(gpupack_node_report_timestamp_seconds{node="reported"})"),
            std::vector<std::string>{R"(gpupack_node_report_timestamp_seconds{node="reported"} 1800000030)"});
}

// Only nodes the capacity reservation prices get a series, with their tightness (arithmetic as in
// core/reservation_test.cc).
TEST_F(ExtenderMetricsTest, ReservationTightnessOfReservedNodesOnly) {
  state_.UpsertNode(GpuNode("a100", 8, 81920));
  state_.UpsertNode(GpuNode("t4", 2, 81920, "NVIDIA T4"));
  placement::TypicalSpec pinned{1000, 1, 10240, model::DeviceKindPreference::kAny, "", {"T4"}, 1};
  placement::CapacityReservation::Builder builder(placement::TypicalWorkload{{pinned}}, placement::PlacementOptions{});
  state_.ForEachNode([&](const model::Node& node, const placement::NodeSummary&, std::optional<Clock::TimePoint>) {
    builder.AddNode(node);
  });
  state_.SetPolicy(std::make_shared<placement::Policy>(model::PolicyKind::kFgd, placement::DefaultPriorWorkload(81920),
                                                       placement::PlacementOptions{}, std::move(builder).Build()));
  // D = 1 (the only shape), Free / Free(H) = 10 devices / 2 devices: r = 5.
  EXPECT_EQ(Samples(metrics_.Render(), "gpupack_node_reservation_tightness{"),
            std::vector<std::string>{R"(gpupack_node_reservation_tightness{node="t4"} 5)"});
}

// Whole GPUs carry mig_profile="", MIG instances their profile, on all four device families.
TEST_F(ExtenderMetricsTest, DeviceSeriesCarryTheMigProfile) {
  model::Node node = GpuNode("n1", 1, 81920);
  model::Device mig = builders::Mig("1g.10gb", 9856);
  mig.uuid = "MIG-0f1e2d3c-aaaa-bbbb-cccc-000000000001";
  mig.index = 1;
  node.devices.push_back(mig);
  state_.UpsertNode(node);
  const std::string text = metrics_.Render();
  for (const char* family : {"gpupack_gpu_memory_bytes", "gpupack_gpu_memory_allocated_bytes",
                             "gpupack_gpu_memory_used_bytes", "gpupack_gpu_pods"}) {
    const std::vector<std::string> samples = Samples(text, std::string(family) + "{");
    ASSERT_EQ(samples.size(), 2u) << family << "\n" << text;
    EXPECT_NE(samples[0].find(R"(gpu_uuid="GPU-n1-0",gpu_index="0",gpu_model="NVIDIA A100-SXM4-80GB",mig_profile="")"),
              std::string::npos)
        << samples[0];
    EXPECT_NE(samples[1].find(R"(gpu_uuid="MIG-0f1e2d3c-aaaa-bbbb-cccc-000000000001",gpu_index="1",)"
                              R"(gpu_model="NVIDIA A100-SXM4-80GB",mig_profile="1g.10gb")"),
              std::string::npos)
        << samples[1];
  }
}

// All three results are exported from the start; each Status maps to one of them.
TEST_F(ExtenderMetricsTest, BindOutcomesBySuccessConflictAndError) {
  EXPECT_EQ(Samples(metrics_.Render(), "gpupack_bind_requests_total{"),
            (std::vector<std::string>{R"(gpupack_bind_requests_total{result="conflict"} 0)",
                                      R"(gpupack_bind_requests_total{result="error"} 0)",
                                      R"(gpupack_bind_requests_total{result="success"} 0)"}));
  metrics_.CountBind(Status::Ok());
  metrics_.CountBind(Status::Ok());
  metrics_.CountBind(Status::Conflict("pod p is already assigned to node n2"));
  metrics_.CountBind(Status::Unavailable("API server: 503"));
  metrics_.CountBind(Status::DeadlineExceeded("bind budget spent"));
  EXPECT_EQ(Samples(metrics_.Render(), "gpupack_bind_requests_total{"),
            (std::vector<std::string>{R"(gpupack_bind_requests_total{result="conflict"} 1)",
                                      R"(gpupack_bind_requests_total{result="error"} 2)",
                                      R"(gpupack_bind_requests_total{result="success"} 2)"}));
}

// The standalone backend's recorded binds count as successes too.
TEST_F(ExtenderMetricsTest, StandaloneBindsCountAsSuccess) {
  StandaloneBackend backend({GpuNode("n1", 1, 81920)});
  ASSERT_TRUE(backend.Start(state_).ok());
  Extender ext(state_, backend, ExtenderOptions{}, clock_, &metrics_);
  const nlohmann::json pod = builders::PodJson("p", "u1", "8Gi");
  ext.Filter(builders::FilterBody(pod, {"n1"}));
  ASSERT_EQ(nlohmann::json::parse(ext.Bind(builders::BindBody("p", "u1", "n1")).body)["Error"], "");
  EXPECT_EQ(Samples(metrics_.Render(), R"(gpupack_bind_requests_total{result="success"})"),
            std::vector<std::string>{R"(gpupack_bind_requests_total{result="success"} 1)"});
}

}  // namespace
}  // namespace gpupack::extender

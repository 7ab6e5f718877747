// The extender tests' shared fixture: a backend whose sync state and bind outcome a test
// controls, and four one-GPU nodes under binpack. Test-only.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/annotations.h"
#include "scheduler/extender/extender.h"
#include "testing/builders.h"
#include "testing/fake_clock.h"

namespace gpupack::extender::testing_fixture {

// A backend whose sync state and bind outcome a test controls; records binds like standalone.
class ScriptedBackend final : public ClusterBackend {
 public:
  Status Start(ClusterState&) override { return Status::Ok(); }
  bool Synced() const override { return synced; }
  StatusOr<model::PodRequest> LookupPod(const BindTarget& pod) override {
    return Status::NotFound("pod " + pod.name + " unknown to the test backend");
  }
  Status Bind(const BindTarget& pod, const std::string& node,
              const std::map<std::string, std::string>& annotations) override {
    if (!bind_error.ok()) return bind_error;
    binds[pod.uid] = {node, annotations};
    return Status::Ok();
  }
  void Stop() override {}
  std::vector<model::PodRequest> HeldPodRequests() const override { return held; }
  std::vector<model::PodRequest> WaitingPodRequests() const override { return waiting; }

  bool synced = true;
  std::vector<model::PodRequest> held;
  std::vector<model::PodRequest> waiting;
  Status bind_error;
  std::map<std::string, StandaloneBackend::BindRecord> binds;
};

class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Free memory after an 8 GiB pod: a 4 GiB left on n-tight, 8 GiB on n-mid, 72 GiB on n-roomy.
    state_.UpsertNode(builders::GpuNode("n-tight", 1, 12288));
    state_.UpsertNode(builders::GpuNode("n-mid", 1, 16384));
    state_.UpsertNode(builders::GpuNode("n-roomy", 1, 81920));
    state_.UpsertNode(builders::GpuNode("n-small", 1, 4096));
  }
  Extender Make(ExtenderOptions options = {}) { return Extender(state_, backend_, options, clock_, &metrics_); }
  static nlohmann::json Parse(const Reply& r) {
    EXPECT_EQ(r.status, 200) << r.body;
    return nlohmann::json::parse(r.body);
  }

  FakeClock clock_;
  ClusterState state_{builders::PriorPolicy(model::PolicyKind::kBinpack), clock_, std::chrono::seconds(0)};
  ScriptedBackend backend_;
  ExtenderMetrics metrics_{&state_, true, BuildInfo{"0.1.0", "test"}};
  const std::vector<std::string> all_ = {"n-tight", "n-mid", "n-roomy", "n-small", "cpu-only"};
};

// `pod` with `annotations` added to its metadata.
inline nlohmann::json Annotated(nlohmann::json pod, nlohmann::json annotations) {
  pod["metadata"]["annotations"] = std::move(annotations);
  return pod;
}

// The capacity reservation's tests: FGD from the prior on four 8-GPU A100 nodes and the one 2-GPU
// T4 node ("t0") that pods pinned to T4 depend on; 80 GiB devices throughout.
inline std::shared_ptr<placement::Policy> FgdPrior() { return builders::PriorPolicy(model::PolicyKind::kFgd); }
inline std::vector<std::string> AddFourA100sAndOneT4(ClusterState& state) {
  std::vector<std::string> names;
  for (int i = 0; i < 4; ++i) {
    names.push_back("a" + std::to_string(i));
    state.UpsertNode(builders::GpuNode(names.back(), 8, 81920));
  }
  names.push_back("t0");
  state.UpsertNode(builders::GpuNode("t0", 2, 81920, "NVIDIA T4"));
  return names;
}
inline nlohmann::json T4PinnedPod(int i) {
  nlohmann::json pod = builders::PodJson("t4-" + std::to_string(i), "u" + std::to_string(i), "10Gi");
  pod["metadata"]["annotations"] = {{std::string(api::kAnnotationGpuModel), "T4"}};
  return pod;
}

}  // namespace gpupack::extender::testing_fixture

#include "agent/enforcer.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "agent/testing/agent_testing.h"
#include "api/allocation.h"
#include "api/annotations.h"

namespace gpupack::agent {
namespace {

using Json = nlohmann::json;
using namespace testing;  // NOLINT: the helpers' constants

constexpr uint64_t kMiB = 1024 * 1024;

api::GpuNodeStatus Status(std::vector<api::GpuNodeProcess> processes = {}) {
  api::GpuNodeStatus s;
  api::GpuNodeDevice whole;
  whole.uuid = "GPU-1";
  whole.memory_mib = 81559;
  s.devices.push_back(whole);
  api::GpuNodeDevice mig;
  mig.uuid = "GPU-2";
  mig.mig_enabled = true;
  mig.mig_instances.push_back({"MIG-a", "3g.20gb", 19968, 0, 1, 0, 4});
  s.devices.push_back(mig);
  s.processes = std::move(processes);
  return s;
}

class EnforcerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = dir_.path() + "/limits.jsonl";
    leaf_a_ = dir_.MakeDir("cg" + SystemdContainerPath(kPodUid1, kContainerA));
    leaf_b_ = dir_.MakeDir("cg" + SystemdContainerPath(kPodUid2, kContainerB));
    SetState(Json::object());
  }
  void SetState(Json extra) {
    Json state = {{"driverVersion", "615.20"},
                  {"limitsLog", log_},
                  {"devices", Json::array({Json{{"uuid", "GPU-1"}, {"memoryMiB", 81559}},
                                           Json{{"uuid", "GPU-2"},
                                                {"memoryMiB", 40960},
                                                {"migMode", 1},
                                                {"migInstances", Json::array({Json{{"uuid", "MIG-a"}}})}}})}};
    state.update(extra);
    SetFakeNvmlState(dir_, state);
    NvmlBackendOptions o;
    o.library = GPUPACK_FAKE_NVML_R615;
    limiter_ = std::make_unique<NvmlBackend>(o);
  }
  std::vector<Json> Calls() {
    std::vector<Json> out;
    std::ifstream in(log_);
    for (std::string line; std::getline(in, line);) out.push_back(Json::parse(line));
    return out;
  }
  std::vector<PodInfo> Pods(const std::vector<Json>& pods) {
    std::vector<PodInfo> out;
    for (const Json& p : pods) out.push_back(PodInfoFromJson(p));
    return out;
  }

  TempDir dir_;
  std::string log_, leaf_a_, leaf_b_;
  std::unique_ptr<NvmlBackend> limiter_;
};

TEST_F(EnforcerTest, AppliesCapToTheLeafCgroupOfGpupackContainersOnly) {
  Enforcer enforcer(dir_.path() + "/cg");
  const auto pods = Pods({RunningPodJson(kPodUid1, "infer", {{"main", kContainerA}}, {{"GPU-1", 8192}}, "6144"),
                          RunningPodJson(kPodUid2, "other", {{"main", kContainerB}}, {})});
  EnforcementPass pass = enforcer.Run(Status(), pods, limiter_.get());
  EXPECT_EQ(pass.applied, 1);
  EXPECT_EQ(pass.errors, 0);
  EXPECT_TRUE(pass.findings.empty());
  ASSERT_EQ(Calls().size(), 1u);
  EXPECT_EQ(Calls()[0], (Json{{"uuid", "GPU-1"}, {"cgroup", leaf_a_}, {"soft", 6144 * kMiB}, {"hard", 8192 * kMiB}}));
  ASSERT_EQ(pass.caps.size(), 1u);
  EXPECT_TRUE(pass.caps[0].enforced);
  EXPECT_EQ(pass.caps[0].cap_mib, 8192);

  // Next pass: the limit is in place, nothing is written again.
  pass = enforcer.Run(Status(), pods, limiter_.get());
  EXPECT_EQ(pass.applied, 0);
  EXPECT_EQ(Calls().size(), 1u);
  EXPECT_TRUE(pass.caps[0].enforced);
}

TEST_F(EnforcerTest, VerifiesALimitTheToolkitHookAlreadyApplied) {
  SetState({{"limits", Json::array({Json{
                           {"uuid", "GPU-1"}, {"cgroup", leaf_a_}, {"soft", 8192 * kMiB}, {"hard", 8192 * kMiB}}})}});
  Enforcer enforcer(dir_.path() + "/cg");
  EnforcementPass pass = enforcer.Run(
      Status(), Pods({RunningPodJson(kPodUid1, "infer", {{"main", kContainerA}}, {{"GPU-1", 8192}})}), limiter_.get());
  EXPECT_EQ(pass.verified, 1);
  EXPECT_EQ(pass.applied, 0);
  EXPECT_TRUE(Calls().empty());
  EXPECT_TRUE(pass.caps[0].enforced);
}

TEST_F(EnforcerTest, DifferentExistingLimitIsCorrected) {
  SetState({{"limits", Json::array({Json{{"uuid", "GPU-1"}, {"cgroup", leaf_a_}, {"soft", 1}, {"hard", 99 * kMiB}}})}});
  Enforcer enforcer(dir_.path() + "/cg");
  EnforcementPass pass = enforcer.Run(
      Status(), Pods({RunningPodJson(kPodUid1, "infer", {{"main", kContainerA}}, {{"GPU-1", 8192}})}), limiter_.get());
  EXPECT_EQ(pass.applied, 1);
  ASSERT_EQ(Calls().size(), 1u);
  EXPECT_EQ(Calls()[0]["hard"], 8192 * kMiB);
}

TEST_F(EnforcerTest, ZeroesSoftLimitWhenTheContainerGoesAway) {
  Enforcer enforcer(dir_.path() + "/cg");
  const Json pod = RunningPodJson(kPodUid1, "infer", {{"main", kContainerA}}, {{"GPU-1", 8192}});
  enforcer.Run(Status(), Pods({pod}), limiter_.get());
  Json deleting = pod;
  deleting["metadata"]["deletionTimestamp"] = "2026-11-29T10:00:00Z";
  EnforcementPass pass = enforcer.Run(Status(), Pods({deleting}), limiter_.get());
  EXPECT_EQ(pass.cleared, 1);
  ASSERT_EQ(Calls().size(), 2u);
  EXPECT_EQ(Calls()[1], (Json{{"uuid", "GPU-1"}, {"cgroup", leaf_a_}, {"soft", 0}, {"hard", 8192 * kMiB}}));
  // Forgotten afterwards: no further writes.
  pass = enforcer.Run(Status(), {}, limiter_.get());
  EXPECT_EQ(pass.cleared, 0);
  EXPECT_EQ(Calls().size(), 2u);
}

TEST_F(EnforcerTest, StoppedContainerAndVanishedCgroup) {
  Enforcer enforcer(dir_.path() + "/cg");
  enforcer.Run(Status(), Pods({RunningPodJson(kPodUid1, "infer", {{"main", kContainerA}}, {{"GPU-1", 8192}})}),
               limiter_.get());
  EnforcementPass pass = enforcer.Run(
      Status(),
      Pods({RunningPodJson(kPodUid1, "infer", {{"main", kContainerA, /*running=*/false}}, {{"GPU-1", 8192}})}),
      limiter_.get());
  EXPECT_EQ(pass.cleared, 1);

  // A pod whose cgroup is already gone when the agent notices: nothing to write.
  Enforcer other(dir_.path() + "/cg");
  const Json pod_b = RunningPodJson(kPodUid2, "b", {{"main", kContainerB}}, {{"GPU-1", 4096}});
  other.Run(Status(), Pods({pod_b}), limiter_.get());
  const size_t before = Calls().size();
  std::filesystem::remove_all(leaf_b_);
  pass = other.Run(Status(), {}, limiter_.get());
  EXPECT_EQ(pass.cleared, 0);
  EXPECT_EQ(Calls().size(), before);
}

TEST_F(EnforcerTest, NeverTouchesMigInstances) {
  Enforcer enforcer(dir_.path() + "/cg");
  EnforcementPass pass = enforcer.Run(
      Status(), Pods({RunningPodJson(kPodUid1, "infer", {{"main", kContainerA}}, {{"MIG-a", 19968}})}), limiter_.get());
  EXPECT_EQ(pass.applied, 0);
  EXPECT_TRUE(Calls().empty());
  EXPECT_TRUE(pass.findings.empty());
  ASSERT_EQ(pass.caps.size(), 1u);
  EXPECT_FALSE(pass.caps[0].enforced);
}

TEST_F(EnforcerTest, AuditsOverCapUnenforcedAndForeignProcesses) {
  Enforcer enforcer(dir_.path() + "/cg");
  const auto pods = Pods({RunningPodJson(kPodUid1, "infer", {{"main", kContainerA}}, {{"GPU-1", 8192}}),
                          RunningPodJson(kPodUid2, "other", {{"main", kContainerB}}, {}),
                          // Running gpupack container whose cgroup does not exist.
                          RunningPodJson("22222222-3333-4444-8555-666666666666", "lost",
                                         {{"main", std::string(64, 'c')}}, {{"GPU-1", 1024}})});
  const api::GpuNodeStatus status = Status({
      {1, "GPU-1", 9000, kPodUid1, "", "", kContainerA},  // over its 8192 MiB cap
      {2, "GPU-1", 500, kPodUid2, "", "", kContainerB},   // a non-gpupack pod on a gpupack GPU
      {3, "GPU-1", 100, "", "", "", ""},                  // no pod at all
  });
  EnforcementPass pass = enforcer.Run(status, pods, limiter_.get());
  std::map<std::string, int> kinds;
  for (const auto& f : pass.findings) ++kinds[f.kind];
  EXPECT_EQ(kinds["over-cap"], 1);
  EXPECT_EQ(kinds["unenforced"], 1);
  EXPECT_EQ(kinds["foreign-process"], 2);
  for (const auto& f : pass.findings) {
    if (f.kind == "over-cap") {
      EXPECT_EQ(f.used_mib, 9000);
      EXPECT_EQ(f.cap_mib, 8192);
      EXPECT_EQ(f.pod, "ml/infer");
      EXPECT_EQ(f.container, "main");
    }
    if (f.kind == "foreign-process" && f.pid == 2) {
      EXPECT_EQ(f.pod, "ml/other");
    }
    if (f.kind == "unenforced") {
      EXPECT_NE(f.message.find("cgroup was not found"), std::string::npos) << f.message;
    }
  }
}

TEST_F(EnforcerTest, FailedLimitIsAnUnenforcedFinding) {
  SetState({{"errors", {{"nvmlDeviceSetMemoryLimits_v1", 4}}}});
  Enforcer enforcer(dir_.path() + "/cg");
  EnforcementPass pass = enforcer.Run(
      Status(), Pods({RunningPodJson(kPodUid1, "infer", {{"main", kContainerA}}, {{"GPU-1", 8192}})}), limiter_.get());
  EXPECT_EQ(pass.errors, 1);
  ASSERT_EQ(pass.findings.size(), 1u);
  EXPECT_EQ(pass.findings[0].kind, "unenforced");
  EXPECT_NE(pass.findings[0].message.find("NVML_ERROR_NO_PERMISSION"), std::string::npos) << pass.findings[0].message;
  EXPECT_FALSE(pass.caps[0].enforced);
}

TEST_F(EnforcerTest, WithoutLimiterOnlyAudits) {
  Enforcer enforcer(dir_.path() + "/cg");
  EnforcementPass pass =
      enforcer.Run(Status({{1, "GPU-1", 9000, kPodUid1, "", "", kContainerA}}),
                   Pods({RunningPodJson(kPodUid1, "infer", {{"main", kContainerA}}, {{"GPU-1", 8192}})}), nullptr);
  EXPECT_TRUE(Calls().empty());
  ASSERT_EQ(pass.findings.size(), 1u);
  EXPECT_EQ(pass.findings[0].kind, "over-cap");
}

// Without MPS the SMs are time-sliced between contexts, so a container's share of the SMs' time is
// its share of the compute. Pod infer's container reserves 30 %; its two processes ran 35 % and
// 20 % of the time: 35 + 20 = 55 % > 30 % → over-compute. At 25 % (15 + 10) it is within its share;
// on a GPU whose clients MPS runs side by side (mps-client) each one's time overstates its share,
// and nothing is flagged.
TEST_F(EnforcerTest, AuditsSmTimeAboveTheComputeShareWhereNothingCapsIt) {
  Json pod = RunningPodJson(kPodUid1, "infer", {{"main", kContainerA}}, {{"GPU-1", 8192}});
  Json& text = pod["metadata"]["annotations"][std::string(api::kAnnotationAllocation)];
  StatusOr<api::Allocation> allocation = api::DecodeAllocation(text.get<std::string>());
  ASSERT_TRUE(allocation.ok()) << allocation.status();
  allocation->containers[0].devices[0].compute_pct = 30;
  text = api::EncodeAllocation(*allocation);
  auto run = [&](int first, int second, std::string_view compute_enforcement) {
    api::GpuNodeStatus status = Status({{1, "GPU-1", 100, kPodUid1, "", "", kContainerA, first},
                                        {2, "GPU-1", 100, kPodUid1, "", "", kContainerA, second}});
    status.devices[0].compute_enforcement = std::string(compute_enforcement);
    return Enforcer(dir_.path() + "/cg").Run(status, Pods({pod}), nullptr);
  };
  EnforcementPass over = run(35, 20, api::kComputeEnforcementNone);
  ASSERT_EQ(over.findings.size(), 1u);
  const api::GpuNodeAuditFinding& f = over.findings[0];
  EXPECT_EQ(f.kind, "over-compute");
  EXPECT_EQ(f.used_compute_pct, 55);
  EXPECT_EQ(f.compute_pct, 30);
  EXPECT_EQ(f.message,
            "container ml/infer/main uses 55 % of the SMs' time on GPU-1, over its compute share of 30 % (the GPU "
            "has no compute enforcement)");
  ASSERT_EQ(over.caps.size(), 1u);
  EXPECT_EQ(over.caps[0].compute_pct, 30);
  EXPECT_EQ(over.caps[0].used_compute_pct, 55);
  EXPECT_TRUE(run(15, 10, api::kComputeEnforcementNone).findings.empty());
  EXPECT_TRUE(run(35, 20, api::kComputeEnforcementMpsClient).findings.empty());
  // One process NVML cannot tell about (-1) leaves the container's SM time unknown: no finding.
  EnforcementPass unknown = run(35, -1, api::kComputeEnforcementNone);
  EXPECT_TRUE(unknown.findings.empty());
  EXPECT_EQ(unknown.caps[0].used_compute_pct, -1);
}

TEST(PodsTest, MalformedAllocationIsReportedNotFatal) {
  Json pod = RunningPodJson(kPodUid1, "p", {{"main", kContainerA}}, {});
  pod["metadata"]["annotations"][std::string(api::kAnnotationAllocation)] = "{not json";
  PodInfo info = PodInfoFromJson(pod);
  EXPECT_FALSE(info.gpupack);
  EXPECT_FALSE(info.allocation_error.empty());
  EXPECT_EQ(info.containers[0].container_id, kContainerA);
  PodInfo empty = PodInfoFromJson(Json("garbage"));
  EXPECT_TRUE(empty.containers.empty());
}

}  // namespace
}  // namespace gpupack::agent

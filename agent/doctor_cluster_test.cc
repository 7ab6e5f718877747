#include "agent/doctor_cluster.h"

#include <gtest/gtest.h>

#include "api/gpunode.h"
#include "testing/builders.h"

namespace gpupack::agent {
namespace {

using Json = nlohmann::json;

Json AgentPodOn(const std::string& node) {
  Json pod = {{"metadata", {{"name", "gpupack-agent-" + node}}}, {"spec", Json::object()}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

// n1 enforces memory; n2 reports MemoryEnforced False; n3 never reported; n4 runs an agent from
// before the doctor (no conditions); one agent pod is not scheduled yet.
std::vector<Json> Pods() {
  return {AgentPodOn("n1"), AgentPodOn("n2"), AgentPodOn("n3"), AgentPodOn("n4"), AgentPodOn("")};
}

std::vector<Json> GpuNodes() {
  api::GpuNodeStatus good = builders::SampleGpuNodeStatus();
  api::GpuNodeStatus soft = good;
  soft.conditions[0] = {"MemoryEnforced", false, "MemoryLimitsMissing", "memory-limits: driver 580.65.06 is older", {}};
  api::GpuNodeStatus old = good;
  old.conditions.clear();
  return {api::GpuNodeObject("n1", good), api::GpuNodeObject("n2", soft), api::GpuNodeObject("n4", old),
          api::GpuNodeObject("cpu-only", good)};
}

TEST(ClusterDoctorTest, EveryAgentNodeIsReportedAndTheMissingOnesFail) {
  const ClusterDoctorResult r = ClusterDoctor(Pods(), GpuNodes(), /*require_memory_enforced=*/false);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.lines, (std::vector<std::string>{
                         "ok n1: MemoryEnforced True (Enforced), ComputeEnforced False (ComputeMissing)",
                         "ok n2: MemoryEnforced False (MemoryLimitsMissing), ComputeEnforced False (ComputeMissing): "
                         "memory-limits: driver 580.65.06 is older",
                         "fail n3: no GPUNode: the agent has not reported (kubectl logs of its pod say why)",
                         "fail n4: GPUNode carries no doctor conditions: the agent predates the doctor, upgrade it",
                     }));
}

TEST(ClusterDoctorTest, RequiringMemoryEnforcementFailsASoftNode) {
  const std::vector<Json> pods = {AgentPodOn("n1"), AgentPodOn("n2")};
  EXPECT_TRUE(ClusterDoctor(pods, GpuNodes(), false).ok);
  const ClusterDoctorResult strict = ClusterDoctor(pods, GpuNodes(), true);
  EXPECT_FALSE(strict.ok);
  ASSERT_EQ(strict.lines.size(), 2u);
  EXPECT_TRUE(strict.lines[1].starts_with("fail n2: MemoryEnforced False")) << strict.lines[1];
  EXPECT_TRUE(ClusterDoctor({AgentPodOn("n1")}, GpuNodes(), true).ok);
}

TEST(ClusterDoctorTest, NoAgentPodIsAFailure) {
  const ClusterDoctorResult r = ClusterDoctor({AgentPodOn("")}, GpuNodes(), false);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.lines, std::vector<std::string>{"fail (cluster): no agent pod is scheduled on any node"});
}

}  // namespace
}  // namespace gpupack::agent

// One whole agent pass against the fake NVML (real dlopen path), a temporary /proc and cgroup
// tree, and the in-memory API server through the real kube client.
#include "agent/agent.h"

#include <fstream>

#include <gtest/gtest.h>

#include "agent/kube_sink.h"
#include "agent/testing/agent_testing.h"
#include "api/annotations.h"
#include "testing/fake_clock.h"
#include "testing/test_apiserver.h"
#include "translate/node_from_gpunode.h"

namespace gpupack::agent {
namespace {

using Json = nlohmann::json;
using namespace testing;  // NOLINT: the helpers' constants
using std::chrono::seconds;

// The pod the agent finds on n1: ml/infer, its container "main" running with 8192 MiB of GPU-1.
Json InferPod() { return RunningPodJson(kPodUid1, "infer", {{"main", kContainerA}}, {{"GPU-1", 8192}}); }

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    kube::Config config;
    config.server = server_.url();
    auto client = kube::Client::Create(config);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(client).value();
    ASSERT_TRUE(
        client_->Create(kube::NodesResource(), "", Json{{"metadata", {{"name", "n1"}}}, {"status", Json::object()}})
            .ok());

    leaf_ = dir_.MakeDir("cg" + SystemdContainerPath(kPodUid1, kContainerA));
    dir_.WriteFile("cg/cgroup.controllers", "cpu memory dmem\n");
    dir_.WriteFile("proc/42/cgroup", "0::" + SystemdContainerPath(kPodUid1, kContainerA) + "\n");
    Json h100 = {{"uuid", "GPU-1"}, {"name", "NVIDIA H100 80GB HBM3"}, {"memoryMiB", 81559}, {"usedMiB", 9000}};
    h100["processes"] = Json::array({Json{{"pid", 42}, {"usedMiB", 9000}}});
    SetFakeNvmlState(dir_, {{"driverVersion", "615.20"},
                            {"cudaVersion", 13040},
                            {"limitsLog", dir_.path() + "/limits.jsonl"},
                            {"devices", Json::array({h100})}});
  }

  // The fake NVML (R615: cgroup limits) over this test's /proc and cgroup trees.
  NvmlBackendOptions FakeNvmlOptions() const {
    NvmlBackendOptions o;
    o.library = GPUPACK_FAKE_NVML_R615;
    o.proc_root = dir_.path() + "/proc";
    o.cgroup_root = dir_.path() + "/cg";
    return o;
  }

  TempDir dir_;
  std::string leaf_;
  e2e::TestApiServer server_;
  std::unique_ptr<kube::Client> client_;
  FakeClock clock_;
};

TEST_F(AgentTest, OnePassDiscoversEnforcesAuditsReportsAndExportsMetrics) {
  AgentMetrics metrics("n1");
  NvmlBackendOptions o = FakeNvmlOptions();
  o.on_nvml_error = [&](std::string_view call) { metrics.CountNvmlError(call); };
  NvmlBackend backend(o);
  KubeSink sink(client_.get());
  ReporterOptions ro;
  ro.node_name = "n1";
  ro.max_pods_per_device = 8;
  Reporter reporter(ro, &sink, &clock_);
  AgentOptions ao;
  ao.node_name = "n1";
  ao.cgroup_root = dir_.path() + "/cg";
  ao.max_pods_per_device = 8;
  Agent agent(
      ao, &backend, [] { return StatusOr<std::vector<Json>>(std::vector<Json>{InferPod()}); }, &reporter, &sink,
      &metrics, &clock_);

  auto status = agent.RunOnce();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->enforcement.mode, "cgroup-dmem");
  ASSERT_EQ(status->processes.size(), 1u);
  EXPECT_EQ(status->processes[0].pod, "ml/infer");
  EXPECT_EQ(status->processes[0].container, "main");
  EXPECT_EQ(status->devices[0].allocated_mib, 8192);
  ASSERT_EQ(status->audit.size(), 1u);
  EXPECT_EQ(status->audit[0].kind, "over-cap");

  // The cap went onto the container's leaf cgroup through NVML.
  std::ifstream limits(dir_.path() + "/limits.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(limits, line));
  EXPECT_EQ(Json::parse(line)["cgroup"], leaf_);

  // GPUNode status, node capacity and the audit event reached the API server.
  auto gpunode = client_->GetGpuNode("n1");
  ASSERT_TRUE(gpunode.ok()) << gpunode.status();
  auto parsed = api::GpuNodeStatusFromJson((*gpunode)["status"]);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->devices[0].uuid, "GPU-1");
  EXPECT_EQ(parsed->heartbeat_time, clock_.Now());
  auto node_back = translate::NodeFromGpuNode(*gpunode, seconds(120), clock_);
  ASSERT_TRUE(node_back.ok());
  EXPECT_TRUE(node_back->devices[0].hard_isolation);
  auto node = client_->GetNode("n1");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ((*node)["status"]["capacity"]["gpupack.io/gpu-memory"], "81559Mi");
  EXPECT_EQ((*node)["status"]["capacity"]["gpupack.io/gpu"], "8");
  EXPECT_EQ((*node)["status"]["allocatable"]["gpupack.io/gpu"], "8");
  auto events = client_->List(kube::EventsResource(), "ml");
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->items.size(), 1u);
  EXPECT_EQ(events->items[0]["reason"], "GpupackOverCap");

  const std::string text = metrics.Serialize();
  for (
      const char* want : {
          "gpupack_agent_gpu_memory_total_bytes{gpu_index=\"0\",gpu_model=\"NVIDIA H100 80GB HBM3\",gpu_uuid=\"GPU-1\","
          "mig_profile=\"\",node=\"n1\"} 85520809984",
          "gpupack_agent_gpu_memory_allocated_bytes{gpu_index=\"0\",gpu_model=\"NVIDIA H100 80GB "
          "HBM3\",gpu_uuid=\"GPU-1\","
          "mig_profile=\"\",node=\"n1\"} 8589934592",
          "gpupack_agent_container_memory_cap_bytes{container=\"main\",gpu_uuid=\"GPU-1\",namespace=\"ml\",node=\"n1\","
          "pod=\"infer\"} 8589934592",
          "gpupack_agent_container_memory_enforced{container=\"main\",gpu_uuid=\"GPU-1\",namespace=\"ml\",node=\"n1\","
          "pod=\"infer\"} 1",
          "gpupack_agent_enforcement_mode{mode=\"cgroup-dmem\",node=\"n1\"} 1",
          "gpupack_agent_audit_findings{kind=\"over-cap\",node=\"n1\"} 1",
          "gpupack_agent_reports_total{node=\"n1\",result=\"written\"} 1",
          "gpupack_agent_enforcement_actions_total{action=\"apply\",node=\"n1\"} 1",
      }) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n--- in ---\n" << text;
  }

  // Second pass a moment later: nothing written, the finding is not announced twice.
  clock_.Advance(seconds(1));
  ASSERT_TRUE(agent.RunOnce().ok());
  events = client_->List(kube::EventsResource(), "ml");
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->items.size(), 1u);
  EXPECT_NE(metrics.Serialize().find("gpupack_agent_reports_total{node=\"n1\",result=\"skipped\"} 1"),
            std::string::npos);
}

TEST_F(AgentTest, AStrayOnAnIdleDeviceIsReportedWithItsPodAndEvictedWhenThePolicyIsOn) {
  // A pod without gpupack resources, bound here, whose container runs on GPU-2, which no gpupack
  // pod holds.
  Json stray = {{"metadata", {{"name", "stray"}}},
                {"spec", {{"nodeName", "n1"}, {"containers", Json::array({Json{{"name", "main"}}})}}}};
  auto created = client_->Create(kube::PodsResource(), "ml", stray);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string uid = (*created)["metadata"]["uid"];
  (*created)["status"] = {
      {"phase", "Running"},
      {"containerStatuses", Json::array({Json{{"name", "main"},
                                              {"containerID", std::string("containerd://") + kContainerB},
                                              {"state", {{"running", Json::object()}}}}})}};
  ASSERT_TRUE(client_->Update(kube::PodsResource(), "ml", *created, "status").ok());
  dir_.WriteFile("proc/77/cgroup", "0::" + SystemdContainerPath(uid, kContainerB) + "\n");
  Json h100 = {{"uuid", "GPU-1"}, {"name", "NVIDIA H100 80GB HBM3"}, {"memoryMiB", 81559}};
  Json idle = {{"uuid", "GPU-2"}, {"name", "NVIDIA H100 80GB HBM3"}, {"memoryMiB", 81559}, {"usedMiB", 900}};
  idle["processes"] = Json::array({Json{{"pid", 77}, {"usedMiB", 900}}});
  SetFakeNvmlState(dir_, {{"driverVersion", "580.65"}, {"devices", Json::array({h100, idle})}});

  AgentMetrics metrics("n1");
  NvmlBackendOptions o;
  o.library = GPUPACK_FAKE_NVML_R580;
  o.proc_root = dir_.path() + "/proc";
  o.cgroup_root = dir_.path() + "/cg";
  NvmlBackend backend(o);
  KubeSink sink(client_.get());
  AgentOptions ao;
  ao.node_name = "n1";
  ao.cgroup_root = dir_.path() + "/cg";
  ao.eviction = {true, seconds(60)};
  auto pods = [&]() -> StatusOr<std::vector<Json>> {
    GPUPACK_ASSIGN_OR_RETURN(kube::ListResult listed, client_->List(kube::PodsResource(), ""));
    return listed.items;
  };
  Agent agent(ao, &backend, pods, nullptr, &sink, &metrics, &clock_, &sink);

  auto status = agent.RunOnce();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->audit.size(), 1u);
  EXPECT_EQ(status->audit[0].kind, "foreign-process");
  EXPECT_EQ(status->audit[0].device, "GPU-2");
  EXPECT_EQ(status->audit[0].pod, "ml/stray");
  EXPECT_EQ(status->audit[0].container, "main");
  EXPECT_TRUE(server_.evictions().empty()) << "the finding has not held for an interval yet";
  const std::string text = metrics.Serialize();
  for (const char* want : {"gpupack_agent_foreign_processes{gpu_index=\"1\",gpu_model=\"NVIDIA H100 80GB "
                           "HBM3\",gpu_uuid=\"GPU-2\",mig_profile=\"\",node=\"n1\"} 1",
                           "gpupack_agent_foreign_processes{gpu_index=\"0\",gpu_model=\"NVIDIA H100 80GB "
                           "HBM3\",gpu_uuid=\"GPU-1\",mig_profile=\"\",node=\"n1\"} 0",
                           "gpupack_agent_evictions_total{node=\"n1\",result=\"blocked_by_pdb\"} 0"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n--- in ---\n" << text;
  }

  clock_.Advance(seconds(60));
  ASSERT_TRUE(agent.RunOnce().ok());
  ASSERT_EQ(server_.evictions().size(), 1u);
  EXPECT_EQ(server_.evictions()[0].pod, "stray");
  EXPECT_EQ(server_.evictions()[0].body["deleteOptions"]["preconditions"]["uid"], uid);
  EXPECT_EQ(server_.evictions()[0].code, 201);
  EXPECT_NE(metrics.Serialize().find("gpupack_agent_evictions_total{node=\"n1\",result=\"evicted\"} 1"),
            std::string::npos);
  auto events = client_->List(kube::EventsResource(), "ml");
  ASSERT_TRUE(events.ok());
  std::vector<std::string> reasons;
  for (const Json& e : events->items) reasons.push_back(e["reason"]);
  EXPECT_EQ(reasons, (std::vector<std::string>{"GpupackForeignProcess", "GpupackForeignPodEvicted"}));
  // Terminating now: not evicted again while its process winds down.
  clock_.Advance(seconds(60));
  ASSERT_TRUE(agent.RunOnce().ok());
  EXPECT_EQ(server_.evictions().size(), 1u);
}

// The doctor's verdicts ride in every pass as conditions, and the extender reads them: here dmem
// starts accounting NVIDIA memory without being enabled on the pods' cgroups, so no limit could be
// set on a container and hard isolation must stop landing on the node's GPU.
TEST_F(AgentTest, DoctorVerdictsAreConditionsTheExtenderReads) {
  NvmlBackend backend(FakeNvmlOptions());
  AgentOptions ao;
  ao.node_name = "n1";
  ao.cgroup_root = dir_.path() + "/cg";
  ao.doctor = DoctorRoots{};
  ao.doctor->cgroup_root = ao.cgroup_root;
  ao.doctor->cdi_dirs = {dir_.File("cdi")};
  ao.doctor->nri_socket = dir_.File("nri.sock");
  Agent agent(ao, &backend, nullptr, nullptr, nullptr, nullptr, &clock_);
  auto first = agent.RunOnce();
  ASSERT_TRUE(first.ok()) << first.status();
  const api::GpuNodeCondition* memory = api::FindCondition(first->conditions, api::kConditionMemoryEnforced);
  ASSERT_NE(memory, nullptr);
  EXPECT_TRUE(memory->status) << memory->message;
  EXPECT_EQ(memory->last_transition_time, clock_.Now());
  const api::GpuNodeCondition* compute = api::FindCondition(first->conditions, api::kConditionComputeEnforced);
  ASSERT_NE(compute, nullptr);
  EXPECT_FALSE(compute->status);
  EXPECT_EQ(compute->reason, "ComputeMissing");

  const Clock::TimePoint turned = clock_.Now() + seconds(10);
  clock_.Advance(seconds(10));
  dir_.WriteFile("cg/dmem.capacity", "nvidia/0000:17:00.0/vidmem 85520809984\n");
  auto second = agent.RunOnce();
  ASSERT_TRUE(second.ok());
  memory = api::FindCondition(second->conditions, api::kConditionMemoryEnforced);
  EXPECT_FALSE(memory->status);
  EXPECT_EQ(memory->reason, "CgroupDegraded");
  EXPECT_EQ(memory->last_transition_time, turned);
  clock_.Advance(seconds(10));
  auto third = agent.RunOnce();
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(api::FindCondition(third->conditions, api::kConditionMemoryEnforced)->last_transition_time, turned)
      << "no change, no transition";

  auto node = translate::NodeFromGpuNode(api::GpuNodeObject("n1", *third), seconds(120), clock_);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_FALSE(node->devices[0].hard_isolation) << "enforcement mode is cgroup-dmem, the condition says otherwise";
  EXPECT_EQ(node->memory_unenforced_reason, "MemoryEnforced is False (CgroupDegraded): " + memory->message);
}

TEST_F(AgentTest, PodListFailureSkipsEnforcementButStillReports) {
  AgentMetrics metrics("n1");
  NvmlBackend backend(FakeNvmlOptions());
  AgentOptions ao;
  ao.node_name = "n1";
  ao.cgroup_root = dir_.path() + "/cg";
  Agent agent(
      ao, &backend, [] { return StatusOr<std::vector<Json>>(Status::Unavailable("apiserver down")); }, nullptr, nullptr,
      &metrics, &clock_);
  auto status = agent.RunOnce();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->devices.size(), 1u);
  EXPECT_TRUE(status->audit.empty());
  std::ifstream limits(dir_.path() + "/limits.jsonl");
  EXPECT_FALSE(limits.good());  // nothing was applied
}

TEST_F(AgentTest, DiscoveryFailureIsReturnedAndCounted) {
  AgentMetrics metrics("n1");
  NvmlBackendOptions o;
  o.library = dir_.path() + "/no-driver/libnvidia-ml.so.1";
  o.on_nvml_error = [&](std::string_view call) { metrics.CountNvmlError(call); };
  NvmlBackend backend(o);
  Agent agent(AgentOptions{"n1"}, &backend, nullptr, nullptr, nullptr, &metrics, &clock_);
  auto status = agent.RunOnce();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(metrics.Serialize().find("gpupack_agent_nvml_errors_total{call=\"nvmlInit_v2\",node=\"n1\"} 1"),
            std::string::npos);
}

TEST_F(AgentTest, VanishedDevicesLoseTheirSeries) {
  AgentMetrics metrics("n1");
  api::GpuNodeStatus s;
  api::GpuNodeDevice d;
  d.uuid = "GPU-x";
  s.devices.push_back(d);
  metrics.Update(s, {});
  EXPECT_NE(metrics.Serialize().find("GPU-x"), std::string::npos);
  metrics.Update(api::GpuNodeStatus{}, {});
  EXPECT_EQ(metrics.Serialize().find("GPU-x"), std::string::npos);
}

TEST_F(AgentTest, DevicesExcludedByTheNodeAnnotationLeaveTheAdvertisedCapacity) {
  NvmlBackend backend(FakeNvmlOptions());
  KubeSink sink(client_.get());
  ReporterOptions ro;
  ro.node_name = "n1";
  ro.max_pods_per_device = 8;
  Reporter reporter(ro, &sink, &clock_);
  // The administrator annotates the node; the agent reads it every pass, as cmd/agent wires it.
  Json node = *client_->GetNode("n1");
  node["metadata"]["annotations"] = {{std::string(api::kNodeAnnotationExcludedDevices), "GPU-1"}};
  ASSERT_TRUE(client_->Update(kube::NodesResource(), "", node).ok());
  bool api_down = false;
  AgentOptions ao;
  ao.node_name = "n1";
  ao.cgroup_root = dir_.path() + "/cg";
  ao.max_pods_per_device = 8;
  ao.excluded_devices = [&]() -> StatusOr<std::vector<std::string>> {
    if (api_down) return Status::Unavailable("apiserver down");
    GPUPACK_ASSIGN_OR_RETURN(Json n, client_->GetNode("n1"));
    return api::ExcludedDevicesOfNode(n);
  };
  Agent agent(ao, &backend, nullptr, &reporter, &sink, nullptr, &clock_);
  auto status = agent.RunOnce();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(status->devices[0].excluded);
  // The node's only GPU is out of the pool: nothing advertised; the GPUNode says why.
  auto k8s_node = client_->GetNode("n1");
  ASSERT_TRUE(k8s_node.ok());
  EXPECT_EQ((*k8s_node)["status"]["capacity"]["gpupack.io/gpu-memory"], "0Mi");
  EXPECT_EQ((*k8s_node)["status"]["capacity"]["gpupack.io/gpu"], "0");
  auto gpunode = client_->GetGpuNode("n1");
  ASSERT_TRUE(gpunode.ok());
  EXPECT_EQ((*gpunode)["status"]["devices"][0]["excluded"], true);
  EXPECT_EQ((*gpunode)["status"]["excludedGpus"], 1);
  // An API error keeps the last list rather than returning the GPU to the pool.
  api_down = true;
  clock_.Advance(seconds(1));
  status = agent.RunOnce();
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(status->devices[0].excluded);
}

}  // namespace
}  // namespace gpupack::agent

#include "agent/discovery.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/testing/agent_testing.h"

namespace gpupack::agent {
namespace {

using Json = nlohmann::json;
using namespace testing;  // NOLINT: the helpers' constants

Json NodeState() {
  Json h100 = {{"uuid", "GPU-1"}, {"name", "NVIDIA H100 80GB HBM3"}, {"memoryMiB", 81559}, {"usedMiB", 1000}};
  // Listed out of order: discovery sorts by (device, pid).
  h100["processes"] = Json::array(
      {Json{{"pid", 43}, {"usedMiB", 100}}, Json{{"pid", 42}, {"usedMiB", 900}}, Json{{"pid", 44}, {"usedMiB", 0}}});
  Json mig = {{"uuid", "MIG-a"}, {"gpuInstanceId", 2}, {"profileId", 9}, {"start", 4},
              {"size", 4},       {"memoryMiB", 19968}, {"usedMiB", 50}};
  mig["processes"] = Json::array({Json{{"pid", 45}, {"usedMiB", 50}}});
  Json a100 = {{"uuid", "GPU-2"}, {"name", "NVIDIA A100-SXM4-40GB"}, {"memoryMiB", 40960}, {"migMode", 1}};
  a100["profiles"] = Json::array({Json{{"selector", 2}, {"id", 9}, {"name", "MIG 3g.20gb"}}});
  a100["migInstances"] = Json::array({mig});
  return Json{{"driverVersion", "615.20"}, {"cudaVersion", 13040}, {"devices", Json::array({h100, a100})}};
}

class DiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.WriteFile("proc/42/cgroup", "0::" + SystemdContainerPath(kPodUid1, kContainerA) + "\n");
    dir_.WriteFile("proc/43/cgroup", "0::/system.slice/nvidia-persistenced.service\n");
    dir_.WriteFile("proc/45/cgroup", "0::" + SystemdContainerPath(kPodUid2, kContainerB) + "\n");
    dir_.WriteFile("cg/cgroup.controllers", "cpu memory dmem\n");
  }
  NvmlBackendOptions Options(const std::string& library) {
    NvmlBackendOptions o;
    o.library = library;
    o.proc_root = dir_.path() + "/proc";
    o.cgroup_root = dir_.path() + "/cg";
    o.on_nvml_error = [this](std::string_view call) { errors_.emplace_back(call); };
    return o;
  }
  // GPU 0 in EXCLUSIVE_PROCESS mode, an MPS control daemon's pipe directory, and the agent asking
  // `binary` (the control CLI) for server "shared".
  NvmlBackendOptions MpsServerOptions(const std::string& binary) {
    Json state = NodeState();
    state["devices"][0]["computeMode"] = 3;  // NVML_COMPUTEMODE_EXCLUSIVE_PROCESS
    SetFakeNvmlState(dir_, state);
    dir_.WriteFile("mps/control", "");
    NvmlBackendOptions o = Options(GPUPACK_FAKE_NVML_R615);
    o.mps.pipe_directory = dir_.path() + "/mps";
    o.mps.server = "shared";
    o.mps.binary = binary;
    return o;
  }
  TempDir dir_;
  std::vector<std::string> errors_;
};

TEST_F(DiscoveryTest, NvmlBackendReportsDevicesMigProcessesAndEnforcement) {
  SetFakeNvmlState(dir_, NodeState());
  NvmlBackend backend(Options(GPUPACK_FAKE_NVML_R615));
  auto status = backend.Discover();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->enforcement.mode, "cgroup-dmem");
  EXPECT_EQ(status->enforcement.driver_version, "615.20");
  EXPECT_EQ(status->enforcement.cuda_version, "13.4");
  ASSERT_EQ(status->devices.size(), 2u);
  const api::GpuNodeDevice& h100 = status->devices[0];
  EXPECT_EQ(h100.uuid, "GPU-1");
  EXPECT_EQ(h100.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100.memory_mib, 81559);
  EXPECT_EQ(h100.used_mib, 1000);
  EXPECT_FALSE(h100.mig_enabled);
  const api::GpuNodeDevice& a100 = status->devices[1];
  EXPECT_EQ(a100.index, 1);
  EXPECT_TRUE(a100.mig_enabled);
  ASSERT_EQ(a100.mig_instances.size(), 1u);
  EXPECT_EQ(a100.mig_instances[0], (api::GpuNodeMigInstance{"MIG-a", "3g.20gb", 19968, 50, 2, 4, 4}));
  ASSERT_EQ(status->processes.size(), 4u);
  EXPECT_EQ(status->processes[0].pod_uid, kPodUid1);
  EXPECT_EQ(status->processes[0].container_id, kContainerA);
  EXPECT_EQ(status->processes[0].used_mib, 900);
  EXPECT_EQ(status->processes[1].pod_uid, "");  // a host daemon
  EXPECT_EQ(status->processes[2].pod_uid, "");  // no /proc entry (gone, or no hostPID)
  EXPECT_EQ(status->processes[3].device, "MIG-a");
  EXPECT_EQ(status->processes[3].pod_uid, kPodUid2);
  EXPECT_NE(backend.limiter(), nullptr);
  EXPECT_TRUE(errors_.empty());
}

// With the node's MPS control daemon running (its control pipe in --mps-pipe-directory), an
// EXCLUSIVE_PROCESS GPU holds compute shares as MPS client caps; a GPU in DEFAULT mode does not (a
// client may open its own context beside MPS), nor does its MIG instance. SM time: the H100's 35 %
// from NVML; process 42's samples 30 and 40 give their mean, 35; process 43 has no sample (no
// kernel ran): 0; on a MIG instance NVML cannot tell: -1.
TEST_F(DiscoveryTest, NvmlBackendReportsComputeEnforcementAndSmTime) {
  Json state = NodeState();
  state["devices"][0]["computeMode"] = 3;  // NVML_COMPUTEMODE_EXCLUSIVE_PROCESS
  state["devices"][0]["smUtil"] = 35;
  state["devices"][0]["processes"][1]["smUtil"] = Json::array({30, 40});
  SetFakeNvmlState(dir_, state);
  dir_.WriteFile("mps/control", "");
  NvmlBackendOptions with_mps = Options(GPUPACK_FAKE_NVML_R615);
  with_mps.mps.pipe_directory = dir_.path() + "/mps";
  NvmlBackend backend(with_mps);
  auto status = backend.Discover();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->devices[0].compute_enforcement, "mps-client");
  EXPECT_EQ(status->devices[1].compute_enforcement, "none");
  EXPECT_EQ(status->devices[1].mig_instances[0].compute_enforcement, "none");
  EXPECT_EQ(status->enforcement.compute_reason,
            "MPS control daemon at " + dir_.path() + "/mps/control; mps-client on EXCLUSIVE_PROCESS GPUs");
  EXPECT_EQ(status->devices[0].sm_util_pct, 35);
  EXPECT_EQ(status->devices[1].sm_util_pct, -1);  // MIG mode: NOT_SUPPORTED
  ASSERT_EQ(status->processes.size(), 4u);
  EXPECT_EQ(status->processes[0].pid, 42);
  EXPECT_EQ(status->processes[0].sm_util_pct, 35);
  EXPECT_EQ(status->processes[1].sm_util_pct, 0);
  EXPECT_EQ(status->processes[3].sm_util_pct, -1);
  EXPECT_TRUE(errors_.empty());  // the MIG refusals are expected, not errors

  // The daemon gone (or never configured): none, with the reason.
  std::filesystem::remove(dir_.path() + "/mps/control");
  status = backend.Discover();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->devices[0].compute_enforcement, "none");
  EXPECT_EQ(status->enforcement.compute_reason, "no MPS control daemon (" + dir_.path() + "/mps/control not found)");
  NvmlBackend without(Options(GPUPACK_FAKE_NVML_R615));
  status = without.Discover();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->devices[0].compute_enforcement, "none");
  EXPECT_EQ(status->enforcement.compute_reason, "no MPS pipe directory configured (--mps-pipe-directory)");
}

// With an MPS v3 server named (--mps-server) that answers `namespace list`, an EXCLUSIVE_PROCESS
// GPU is mps-namespace: gpupack-nri caps each container's namespace. A server the daemon does not
// know leaves the clients' own settings: mps-client, with the daemon's answer in the reason.
TEST_F(DiscoveryTest, NvmlBackendReportsMpsNamespacesWhileTheServerAnswers) {
  NvmlBackendOptions options = MpsServerOptions(GPUPACK_FAKE_MPS_CONTROL);
  dir_.WriteFile("mps/fake-state/servers/shared", "");
  std::filesystem::create_directories(dir_.path() + "/mps/fake-state/shared/gpupack_c1_0123456789abcdef");
  auto status = NvmlBackend(options).Discover();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->devices[0].compute_enforcement, "mps-namespace");
  EXPECT_EQ(status->devices[1].compute_enforcement, "none");  // DEFAULT compute mode
  EXPECT_EQ(status->enforcement.compute_reason, "MPS v3 server shared at " + dir_.path() +
                                                    "/mps/control (1 gpupack namespaces); mps-namespace on "
                                                    "EXCLUSIVE_PROCESS GPUs");

  options.mps.server = "legacy";
  status = NvmlBackend(options).Discover();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->devices[0].compute_enforcement, "mps-client");
  EXPECT_THAT(status->enforcement.compute_reason, ::testing::HasSubstr("but server legacy gives no namespaces ("));
  EXPECT_THAT(status->enforcement.compute_reason, ::testing::HasSubstr("Server 'legacy' not found"));
}

// A daemon that takes the command and never answers costs a pass kMpsLivenessTimeout (2 s), not
// the CLI's 10 s, and the GPUs fall back to mps-client with the reason.
TEST_F(DiscoveryTest, AHungMpsDaemonHoldsAPassForTheLivenessTimeoutOnly) {
  dir_.WriteFile("hung-mps-control", "#!/bin/sh\nexec sleep 30\n");
  std::filesystem::permissions(dir_.path() + "/hung-mps-control", std::filesystem::perms::owner_all);
  auto status = NvmlBackend(MpsServerOptions(dir_.path() + "/hung-mps-control")).Discover();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->devices[0].compute_enforcement, "mps-client");
  EXPECT_THAT(status->enforcement.compute_reason, ::testing::HasSubstr("but server shared gives no namespaces ("));
  EXPECT_THAT(status->enforcement.compute_reason, ::testing::HasSubstr("no answer within 2000 ms"));
}

TEST_F(DiscoveryTest, MissingLibraryIsRetriedUntilItAppears) {
  SetFakeNvmlState(dir_, NodeState());
  const std::string late = dir_.path() + "/driver/libnvidia-ml.so.1";
  NvmlBackend backend(Options(late));
  auto first = backend.Discover();
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(backend.limiter(), nullptr);
  EXPECT_EQ(errors_, std::vector<std::string>{"nvmlInit_v2"});
  std::filesystem::create_directories(dir_.path() + "/driver");
  std::filesystem::copy_file(GPUPACK_FAKE_NVML_R615, late);
  auto second = backend.Discover();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->devices.size(), 2u);
}

TEST_F(DiscoveryTest, BrokenOrForbiddenGpusDoNotHideTheOthers) {
  Json state = NodeState();
  state["devices"][0]["noPermission"] = true;
  state["errors"] = {{"nvmlDeviceGetMemoryInfo_v2@GPU-2", 15}, {"nvmlDeviceGetGpuInstanceById", 4}};
  SetFakeNvmlState(dir_, state);
  NvmlBackend backend(Options(GPUPACK_FAKE_NVML_R615));
  auto status = backend.Discover();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->devices.size(), 1u);
  const api::GpuNodeDevice& a100 = status->devices[0];
  EXPECT_EQ(a100.uuid, "GPU-2");
  EXPECT_FALSE(a100.healthy);
  // Without privilege the placement is unknown but the profile still comes from the MIG name.
  ASSERT_EQ(a100.mig_instances.size(), 1u);
  EXPECT_EQ(a100.mig_instances[0].profile, "3g.20gb");
  EXPECT_EQ(a100.mig_instances[0].placement_start, -1);
  EXPECT_EQ(a100.mig_instances[0].gpu_instance_id, 2);
  EXPECT_NE(std::find(errors_.begin(), errors_.end(), "nvmlDeviceGetHandleByIndex_v2"), errors_.end());
  EXPECT_NE(std::find(errors_.begin(), errors_.end(), "nvmlDeviceGetMemoryInfo_v2"), errors_.end());
}

TEST_F(DiscoveryTest, UnprivilegedMigParentStaysHealthy) {
  Json state = NodeState();
  state["errors"] = {{"nvmlDeviceGetMemoryInfo_v2@GPU-2", 4}};  // NO_PERMISSION on the MIG parent
  SetFakeNvmlState(dir_, state);
  NvmlBackend backend(Options(GPUPACK_FAKE_NVML_R615));
  auto status = backend.Discover();
  ASSERT_TRUE(status.ok()) << status.status();
  const api::GpuNodeDevice& a100 = status->devices[1];
  EXPECT_TRUE(a100.healthy);
  EXPECT_EQ(a100.memory_mib, 19968);  // Σ instances
  EXPECT_EQ(a100.used_mib, 50);
  ASSERT_EQ(a100.mig_instances.size(), 1u);
  EXPECT_EQ(a100.mig_instances[0].memory_mib, 19968);
}

TEST_F(DiscoveryTest, OlderDriverCannotEnforce) {
  Json state = NodeState();
  state["driverVersion"] = "580.65.06";
  SetFakeNvmlState(dir_, state);
  NvmlBackend backend(Options(GPUPACK_FAKE_NVML_R580));
  auto status = backend.Discover();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->enforcement.mode, "none");
  EXPECT_NE(status->enforcement.reason.find("older than R615"), std::string::npos);
  EXPECT_EQ(status->devices[0].memory_mib, 81559);  // memory v1 fallback
  EXPECT_EQ(backend.limiter(), nullptr);
}

TEST_F(DiscoveryTest, CountFailureFailsThePass) {
  Json state = NodeState();
  state["errors"] = {{"nvmlDeviceGetCount_v2", 9}};
  SetFakeNvmlState(dir_, state);
  NvmlBackend backend(Options(GPUPACK_FAKE_NVML_R615));
  auto status = backend.Discover();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.status().message().find("NVML_ERROR_DRIVER_NOT_LOADED"), std::string::npos);
}

TEST_F(DiscoveryTest, DriverFailureReopensNvmlOnTheNextPass) {
  Json state = NodeState();
  state["errors"] = {{"nvmlDeviceGetCount_v2", 18}};  // LIB_RM_VERSION_MISMATCH: driver upgraded
  SetFakeNvmlState(dir_, state);
  NvmlBackend backend(Options(GPUPACK_FAKE_NVML_R615));
  EXPECT_FALSE(backend.Discover().ok());
  EXPECT_EQ(backend.limiter(), nullptr);
  SetFakeNvmlState(dir_, NodeState());  // read again only by a fresh nvmlInit_v2
  auto status = backend.Discover();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->devices.size(), 2u);
}

TEST(FileBackendTest, ReadsOneEntryOrTheNamedNodeOfAClusterFile) {
  TempDir dir;
  const std::string single = dir.WriteFile("node.yaml", R"(
name: gpu-a1
gpus:
  - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 2, used: 2Gi, hardIsolation: true}
  - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, uuid: GPU-m, mig: [{profile: 3g.40gb, memory: 40Gi, uuid: MIG-x, used: 1Gi, gpuInstanceId: 1, placement: {start: 0, size: 4}}, {profile: 1g.10gb, memory: 10Gi, uuid: MIG-y}]}
)");
  FileBackend backend(single, "gpu-a1");
  auto status = backend.Discover();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->devices.size(), 3u);
  EXPECT_EQ(status->devices[0].memory_mib, 81920);
  EXPECT_EQ(status->devices[0].used_mib, 2048);
  EXPECT_EQ(status->enforcement.mode, "cgroup-misc");
  const api::GpuNodeDevice& mig = status->devices[2];
  EXPECT_EQ(mig.uuid, "GPU-m");
  EXPECT_TRUE(mig.mig_enabled);
  EXPECT_EQ(mig.index, 2);
  EXPECT_EQ(mig.memory_mib, 40960 + 10240);
  ASSERT_EQ(mig.mig_instances.size(), 2u);
  EXPECT_EQ(mig.mig_instances[0], (api::GpuNodeMigInstance{"MIG-x", "3g.40gb", 40960, 1024, 1, 0, 4}));

  const std::string cluster = dir.WriteFile("cluster.yaml", R"(
nodes:
  - {name: other, gpus: [{model: X, memory: 8Gi}]}
  - {name: me, gpus: [{model: Y, memory: 16Gi, count: 3}]}
)");
  auto me = FileBackend(cluster, "me").Discover();
  ASSERT_TRUE(me.ok()) << me.status();
  ASSERT_EQ(me->devices.size(), 3u);
  EXPECT_EQ(me->devices[2].model, "Y");
  EXPECT_EQ(me->enforcement.mode, "none");
  auto missing = FileBackend(cluster, "nobody").Discover();
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(FileBackendTest, BadFilesAreClearErrors) {
  TempDir dir;
  EXPECT_EQ(FileBackend(dir.path() + "/nope.yaml", "n").Discover().status().code(), StatusCode::kNotFound);
  auto bad_yaml = FileBackend(dir.WriteFile("a.yaml", "name: [unclosed"), "n").Discover();
  ASSERT_FALSE(bad_yaml.ok());
  EXPECT_NE(bad_yaml.status().message().find("invalid YAML"), std::string::npos);
  auto bad_memory = FileBackend(dir.WriteFile("b.yaml", "name: n\ngpus: [{model: X, memory: 80GB}]\n"), "n").Discover();
  ASSERT_FALSE(bad_memory.ok());
  EXPECT_NE(bad_memory.status().message().find("b.yaml"), std::string::npos) << bad_memory.status();
  EXPECT_FALSE(FileBackend(dir.WriteFile("c.yaml", "- 1\n"), "n").Discover().ok());
}

// The extender and the simulator refuse these files; the agent used to publish them.
TEST(FileBackendTest, RefusesWhatTheExtenderRefuses) {
  TempDir dir;
  struct Case {
    const char* yaml;
    const char* message;
  };
  const Case cases[] = {
      {"nodes:\n  - {name: n, gpus: [{model: X, memory: 8Gi}]}\n  - {name: n, gpus: [{model: Y, memory: 8Gi}]}\n",
       "d.yaml: line 3: nodes[1].name: duplicate node \"n\" (also nodes[0])"},
      {"name: n\ngpus:\n  - {model: T4, memory: 16Gi, used: 32Gi}\n",
       "d.yaml: line 3: node.gpus[0].used: 32768 MiB is more than the GPU's memory (16384 MiB)"},
      {"name: n\nname: m\n", "d.yaml: line 2: key \"name\" appears twice in one mapping (first on line 1)"},
  };
  for (const Case& c : cases) {
    auto status = FileBackend(dir.WriteFile("d.yaml", c.yaml), "n").Discover();
    ASSERT_FALSE(status.ok()) << c.yaml;
    const std::string message = status.status().message();
    EXPECT_EQ(message.substr(message.find("d.yaml")), c.message) << c.yaml;
  }
}

}  // namespace
}  // namespace gpupack::agent

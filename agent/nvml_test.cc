#include "agent/nvml.h"

#include <gtest/gtest.h>

#include "agent/testing/agent_testing.h"

namespace gpupack::agent {
namespace {

using Json = nlohmann::json;
using testing::SetFakeNvmlState;

constexpr uint64_t kMiB = 1024 * 1024;

Json TwoGpuState() {
  Json procs = Json::array();
  for (int i = 0; i < 40; ++i) procs.push_back({{"pid", 1000 + i}, {"usedMiB", i}});
  return Json{{"driverVersion", "615.20.01"},
              {"cudaVersion", 13040},
              {"devices",
               {{{"uuid", "GPU-1"},
                 {"name", "NVIDIA H100 80GB HBM3"},
                 {"memoryMiB", 81559},
                 {"usedMiB", 100},
                 {"processes", procs}},
                {{"uuid", "GPU-2"},
                 {"name", "NVIDIA A100-SXM4-40GB"},
                 {"memoryMiB", 40960},
                 {"migMode", 1},
                 {"profiles",
                  {{{"selector", 0}, {"id", 19}, {"name", "MIG 1g.5gb"}},
                   {{"selector", 2}, {"id", 9}, {"name", "MIG 3g.20gb"}}}},
                 {"migInstances",
                  {{{"slot", 0},
                    {"uuid", "MIG-a"},
                    {"gpuInstanceId", 1},
                    {"profileId", 9},
                    {"start", 0},
                    {"size", 4},
                    {"memoryMiB", 19968},
                    {"usedMiB", 7}},
                   {{"slot", 3},
                    {"uuid", "MIG-b"},
                    {"gpuInstanceId", 13},
                    {"profileId", 19},
                    {"start", 6},
                    {"size", 1},
                    {"memoryMiB", 4864}}}}}}}};
}

TEST(NvmlTest, MissingLibraryIsAClearRetryableError) {
  auto nvml = Nvml::Open("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(nvml.status().message().find("cannot load /nonexistent/libnvidia-ml.so.1"), std::string::npos);
  EXPECT_NE(nvml.status().message().find("NVML_ERROR_LIBRARY_NOT_FOUND (12)"), std::string::npos);
}

TEST(NvmlTest, LibraryWithoutNvmlSymbolsIsRefused) {
  auto nvml = Nvml::Open("libm.so.6");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(nvml.status().message().find("lacks nvmlInit_v2"), std::string::npos) << nvml.status();
}

TEST(NvmlTest, InitFailureNamesTheNvmlError) {
  TempDir dir;
  SetFakeNvmlState(dir, {{"initError", 9}});
  auto nvml = Nvml::Open(GPUPACK_FAKE_NVML_R615);
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(nvml.status().message(),
            "nvmlInit_v2: NVML_ERROR_DRIVER_NOT_LOADED (9): the NVIDIA kernel driver is not loaded");
}

TEST(NvmlTest, EveryReturnCodeHasAMessage) {
  for (int code = 0; code <= 30; ++code) {
    const std::string msg = NvmlReturnMessage(code);
    EXPECT_EQ(msg.find("NVML_"), 0u) << code << ": " << msg;
    EXPECT_NE(msg.find("(" + std::to_string(code) + ")"), std::string::npos) << msg;
  }
  EXPECT_EQ(NvmlReturnMessage(999).find("NVML_ERROR_UNKNOWN (999)"), 0u);
  EXPECT_EQ(NvmlReturnMessage(12345), "unknown NVML return code 12345");
  EXPECT_TRUE(NvmlStatus(NVML_SUCCESS, "x").ok());
  EXPECT_EQ(NvmlStatus(NVML_ERROR_NOT_FOUND, "x").code(), StatusCode::kNotFound);
  EXPECT_EQ(NvmlStatus(NVML_ERROR_NO_PERMISSION, "x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(NvmlStatus(NVML_ERROR_NOT_SUPPORTED, "x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(NvmlStatus(NVML_ERROR_FUNCTION_NOT_FOUND, "x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(NvmlStatus(NVML_ERROR_INVALID_ARGUMENT, "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(NvmlStatus(NVML_ERROR_GPU_IS_LOST, "x").code(), StatusCode::kUnavailable);
}

TEST(NvmlTest, ReadsDevicesMemoryProcessesAndMig) {
  TempDir dir;
  SetFakeNvmlState(dir, TwoGpuState());
  auto opened = Nvml::Open(GPUPACK_FAKE_NVML_R615);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Nvml& nvml = **opened;
  EXPECT_TRUE(nvml.has_memory_limits());
  EXPECT_TRUE(nvml.has_mig_functions());
  EXPECT_EQ(*nvml.DriverVersion(), "615.20.01");
  EXPECT_EQ(*nvml.CudaDriverVersion(), 13040);
  ASSERT_EQ(*nvml.DeviceCount(), 2u);

  nvmlDevice_t gpu1 = *nvml.DeviceByIndex(0);
  EXPECT_EQ(*nvml.Uuid(gpu1), "GPU-1");
  EXPECT_EQ(*nvml.Name(gpu1), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(*nvml.Index(gpu1), 0u);
  auto mem = nvml.Memory(gpu1);
  ASSERT_TRUE(mem.ok());
  EXPECT_EQ(mem->total_bytes, 81559 * kMiB);
  EXPECT_EQ(mem->used_bytes, 100 * kMiB);
  auto procs = nvml.Processes(gpu1);
  ASSERT_TRUE(procs.ok()) << procs.status();
  ASSERT_EQ(procs->size(), 40u);
  EXPECT_EQ((*procs)[39].pid, 1039u);
  EXPECT_EQ((*procs)[39].used_bytes, 39 * kMiB);
  EXPECT_FALSE(*nvml.MigEnabled(gpu1));  // NOT_SUPPORTED reads as "no MIG"

  nvmlDevice_t gpu2 = *nvml.DeviceByUuid("GPU-2");
  EXPECT_TRUE(*nvml.MigEnabled(gpu2));
  auto migs = nvml.MigDevices(gpu2);
  ASSERT_TRUE(migs.ok()) << migs.status();
  ASSERT_EQ(migs->size(), 2u);  // empty slots 1 and 2 skipped
  EXPECT_EQ(*nvml.Uuid((*migs)[1]), "MIG-b");
  EXPECT_EQ(*nvml.GpuInstanceId((*migs)[1]), 13u);
  auto gi = nvml.GpuInstance(gpu2, 13);
  ASSERT_TRUE(gi.ok()) << gi.status();
  EXPECT_EQ(gi->profile_id, 19u);
  EXPECT_EQ(gi->placement_start, 6u);
  EXPECT_EQ(gi->placement_size, 1u);
  auto profiles = nvml.ProfileNames(gpu2);
  ASSERT_TRUE(profiles.ok());
  EXPECT_EQ(*profiles, (std::map<unsigned int, std::string>{{9, "3g.20gb"}, {19, "1g.5gb"}}));
  EXPECT_EQ(nvml.Memory((*migs)[0])->total_bytes, 19968 * kMiB);
}

TEST(NvmlTest, MemoryLimitsRoundTripAndMigIsRejected) {
  TempDir dir;
  const std::string cg = dir.MakeDir("cg/leaf");
  Json state = TwoGpuState();
  state["limitsLog"] = dir.path() + "/limits.jsonl";
  SetFakeNvmlState(dir, state);
  auto opened = Nvml::Open(GPUPACK_FAKE_NVML_R615);
  ASSERT_TRUE(opened.ok());
  Nvml& nvml = **opened;
  nvmlDevice_t gpu1 = *nvml.DeviceByIndex(0);
  auto none = nvml.GetMemoryLimits(gpu1, cg);
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);  // nothing set yet
  ASSERT_TRUE(nvml.SetMemoryLimits(gpu1, cg, 4 * kMiB, 8 * kMiB).ok());
  auto got = nvml.GetMemoryLimits(gpu1, cg);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->soft_bytes, 4 * kMiB);
  EXPECT_EQ(got->hard_bytes, 8 * kMiB);
  EXPECT_EQ(nvml.SetMemoryLimits(gpu1, dir.path() + "/missing", 1, 2).code(), StatusCode::kNotFound);
  nvmlDevice_t mig = (*nvml.MigDevices(*nvml.DeviceByIndex(1)))[0];
  EXPECT_EQ(nvml.SetMemoryLimits(mig, cg, 1, 2).code(), StatusCode::kFailedPrecondition);
}

TEST(NvmlTest, OlderDriverFallsBackAndLacksLimits) {
  TempDir dir;
  SetFakeNvmlState(dir, TwoGpuState());
  auto opened = Nvml::Open(GPUPACK_FAKE_NVML_R580);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Nvml& nvml = **opened;
  EXPECT_FALSE(nvml.has_memory_limits());
  auto mem = nvml.Memory(*nvml.DeviceByIndex(0));  // v1 fallback
  ASSERT_TRUE(mem.ok()) << mem.status();
  EXPECT_EQ(mem->total_bytes, 81559 * kMiB);
  Status s = nvml.SetMemoryLimits(*nvml.DeviceByIndex(0), dir.path(), 1, 2);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("NVML_ERROR_FUNCTION_NOT_FOUND"), std::string::npos);
}

TEST(NvmlTest, InjectedErrorsAreReportedAndObserved) {
  TempDir dir;
  Json state = TwoGpuState();
  state["errors"] = {{"nvmlDeviceGetMemoryInfo_v2@GPU-2", 15}, {"nvmlDeviceGetComputeRunningProcesses_v3", 999}};
  SetFakeNvmlState(dir, state);
  auto opened = Nvml::Open(GPUPACK_FAKE_NVML_R615);
  ASSERT_TRUE(opened.ok());
  std::vector<std::string> calls;
  (*opened)->set_error_observer([&](std::string_view call) { calls.emplace_back(call); });
  Nvml& nvml = **opened;
  EXPECT_TRUE(nvml.Memory(*nvml.DeviceByIndex(0)).ok());  // only GPU-2 is broken
  auto mem = nvml.Memory(*nvml.DeviceByIndex(1));
  ASSERT_FALSE(mem.ok());
  EXPECT_EQ(mem.status().message(),
            "nvmlDeviceGetMemoryInfo_v2: NVML_ERROR_GPU_IS_LOST (15): the GPU has fallen off the bus or is "
            "otherwise inaccessible");
  EXPECT_FALSE(nvml.Processes(*nvml.DeviceByIndex(0)).ok());
  EXPECT_EQ(calls, (std::vector<std::string>{"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetComputeRunningProcesses_v3"}));
}

}  // namespace
}  // namespace gpupack::agent

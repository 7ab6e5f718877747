#include "api/annotations.h"

#include <gtest/gtest.h>

namespace gpupack::api {
namespace {

TEST(DeviceEnv, EveryVariableGpupackInjectsIsADeviceVariable) {
  for (ContainerEnvKey key : kAllContainerEnvKeys) EXPECT_TRUE(IsDeviceEnvName(ContainerEnvName(key))) << int(key);
}

TEST(DeviceEnv, NamesThatPickDevicesOrCapsAndNothingElse) {
  for (const char* name :
       {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "NVIDIA_GPU_MEMORY_LIMIT", "NVIDIA_GPU_MEMORY_REQUEST",
        "NVIDIA_GPU_MEMORY_ANYTHING", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
        "CUDA_MPS_PIPE_DIRECTORY"}) {
    EXPECT_TRUE(IsDeviceEnvName(name)) << name;
  }
  // Driver features and requirement checks select no device; common NVIDIA images set them.
  for (const char* name :
       {"NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_REQUIRE_CUDA", "NVIDIA_DISABLE_REQUIRE", "CUDA_VERSION",
        "nvidia_visible_devices", "NVIDIA_VISIBLE_DEVICES_X", "XNVIDIA_VISIBLE_DEVICES", "NVIDIA_GPU_MEMORY", ""}) {
    EXPECT_FALSE(IsDeviceEnvName(name)) << name;
  }
}

TEST(DeviceEnv, ValuesThatGiveNoDevice) {
  struct Case {
    const char* name;
    const char* value;
    bool no_device;
  } cases[] = {
      {"NVIDIA_VISIBLE_DEVICES", "", true},      {"NVIDIA_VISIBLE_DEVICES", "void", true},
      {"NVIDIA_VISIBLE_DEVICES", "none", true},  {"NVIDIA_VISIBLE_DEVICES", "all", false},
      {"NVIDIA_VISIBLE_DEVICES", "0", false},    {"NVIDIA_VISIBLE_DEVICES", "GPU-a", false},
      {"NVIDIA_VISIBLE_DEVICES", "None", false}, {"NVIDIA_VISIBLE_DEVICES", " none", false},
      {"NVIDIA_VISIBLE_DEVICES", "-1", false},   {"NVIDIA_VISIBLE_DEVICES", "none,all", false},
      {"CUDA_VISIBLE_DEVICES", "", true},        {"CUDA_VISIBLE_DEVICES", "-1", true},
      {"CUDA_VISIBLE_DEVICES", "none", true},    {"CUDA_VISIBLE_DEVICES", "0", false},
      {"NVIDIA_GPU_MEMORY_LIMIT", "", false},    {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "", false},
  };
  for (const Case& c : cases) EXPECT_EQ(GivesNoDevice(c.name, c.value), c.no_device) << c.name << "=" << c.value;
}

}  // namespace
}  // namespace gpupack::api

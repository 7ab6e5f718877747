#include "api/annotations.h"

namespace gpupack::api {

std::string ContainerAnnotationKey(bool init, int index, ContainerEnvKey key) {
  std::string out = "gpupack.io/";
  out += init ? 'i' : 'c';
  out += std::to_string(index);
  switch (key) {
    case ContainerEnvKey::kVisibleDevices: out += "-visible-devices"; break;
    case ContainerEnvKey::kMemoryLimitMiB: out += "-memory-limit-mib"; break;
    case ContainerEnvKey::kMemoryRequestMiB: out += "-memory-request-mib"; break;
    case ContainerEnvKey::kMpsMemoryLimit: out += "-mps-memory-limit"; break;
  }
  return out;
}

std::string_view ContainerEnvName(ContainerEnvKey key) {
  switch (key) {
    case ContainerEnvKey::kVisibleDevices: return "NVIDIA_VISIBLE_DEVICES";
    case ContainerEnvKey::kMemoryLimitMiB: return "NVIDIA_GPU_MEMORY_LIMIT";
    case ContainerEnvKey::kMemoryRequestMiB: return "NVIDIA_GPU_MEMORY_REQUEST";
    case ContainerEnvKey::kMpsMemoryLimit: return "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT";
  }
  return "";
}

}  // namespace gpupack::api

#include "api/annotations.h"

namespace gpupack::api {

std::string ContainerAnnotationKey(bool init, int index, ContainerEnvKey key) {
  std::string out = "gpupack.io/";
  out += init ? 'i' : 'c';
  out += std::to_string(index);
  switch (key) {
    case ContainerEnvKey::kVisibleDevices:
      out += "-visible-devices";
      break;
    case ContainerEnvKey::kMemoryLimitMiB:
      out += "-memory-limit-mib";
      break;
    case ContainerEnvKey::kMemoryRequestMiB:
      out += "-memory-request-mib";
      break;
    case ContainerEnvKey::kMpsMemoryLimit:
      out += "-mps-memory-limit";
      break;
    case ContainerEnvKey::kMpsActiveThreadPercentage:
      out += "-mps-thread-percentage";
      break;
    case ContainerEnvKey::kMpsClientPriority:
      out += "-mps-client-priority";
      break;
  }
  return out;
}

std::string JoinNames(std::span<const std::string_view> names) {
  std::string out;
  for (std::string_view name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::string_view ContainerEnvName(ContainerEnvKey key) {
  switch (key) {
    case ContainerEnvKey::kVisibleDevices:
      return kEnvNvidiaVisibleDevices;
    case ContainerEnvKey::kMemoryLimitMiB:
      return "NVIDIA_GPU_MEMORY_LIMIT";
    case ContainerEnvKey::kMemoryRequestMiB:
      return "NVIDIA_GPU_MEMORY_REQUEST";
    case ContainerEnvKey::kMpsMemoryLimit:
      return "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT";
    case ContainerEnvKey::kMpsActiveThreadPercentage:
      return "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
    case ContainerEnvKey::kMpsClientPriority:
      return "CUDA_MPS_CLIENT_PRIORITY";
  }
  return "";
}

bool IsDeviceEnvName(std::string_view name) {
  for (std::string_view exact : kDeviceEnvNames) {
    if (name == exact) return true;
  }
  for (std::string_view prefix : kDeviceEnvPrefixes) {
    if (name.starts_with(prefix)) return true;
  }
  for (ContainerEnvKey key : kAllContainerEnvKeys) {
    if (name == ContainerEnvName(key)) return true;
  }
  return false;
}

bool GivesNoDevice(std::string_view name, std::string_view value) {
  if (name != kEnvNvidiaVisibleDevices && name != kEnvCudaVisibleDevices) return false;
  if (value.empty() || value == "void" || value == "none") return true;
  return name == kEnvCudaVisibleDevices && value == "-1";
}

}  // namespace gpupack::api

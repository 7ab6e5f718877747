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
  }
  return out;
}

bool IsSchedulerAnnotation(std::string_view key) {
  if (key == kAnnotationAllocation) return true;
  if (key.substr(0, kGpupackPrefix.size()) != kGpupackPrefix) return false;
  // Decided by regenerating the key from its parsed index, so it follows ContainerAnnotationKey.
  std::string_view rest = key.substr(kGpupackPrefix.size());
  if (rest.size() < 2 || (rest[0] != 'c' && rest[0] != 'i')) return false;
  size_t digits = 1;
  while (digits < rest.size() && digits < 8 && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  if (digits == 1) return false;
  const int index = std::stoi(std::string(rest.substr(1, digits - 1)));
  for (ContainerEnvKey env_key : kAllContainerEnvKeys) {
    if (ContainerAnnotationKey(rest[0] == 'i', index, env_key) == key) return true;
  }
  return false;
}

bool IsComponentAnnotation(std::string_view key) {
  return IsSchedulerAnnotation(key) || key == kAnnotationWholeDeviceCharge;
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

// The names that make up gpupack's contract with users, the webhook and the runtime
// (DESIGN.md §3.1–3.2). Every component takes these names from here, so they cannot drift.
#pragma once

#include <string>
#include <string_view>

namespace gpupack::api {

// Extended resources a container asks for in resources.limits (or requests).
inline constexpr std::string_view kResourceGpuMemory = "gpupack.io/gpu-memory";
inline constexpr std::string_view kResourceGpu = "gpupack.io/gpu";
// The device plugin resource gpupack refuses to mix with its own in one container.
inline constexpr std::string_view kResourceNvidiaGpu = "nvidia.com/gpu";

// Pod annotations a user may set.
inline constexpr std::string_view kAnnotationDeviceKind = "gpupack.io/device-kind";   // gpu|mig|any
inline constexpr std::string_view kAnnotationMigProfile = "gpupack.io/mig-profile";   // e.g. 1g.10gb
inline constexpr std::string_view kAnnotationGpuModel = "gpupack.io/gpu-model";       // "A100|H100"
inline constexpr std::string_view kAnnotationIsolation = "gpupack.io/isolation";      // hard|best-effort

// Written by the extender on the Binding (lands on the pod atomically with spec.nodeName).
inline constexpr std::string_view kAnnotationAllocation = "gpupack.io/allocation";

// Per-container annotations the extender writes at bind and the webhook's downward-API env reads.
// Keyed by the container's position, not its name, so every legal container name works and the
// annotation name part stays within 63 characters. App containers use "c<i>", init containers
// "i<i>", e.g. gpupack.io/c0-visible-devices.
enum class ContainerEnvKey {
  kVisibleDevices,  // "GPU-…,MIG-…": the device UUIDs, comma separated
  kMemoryLimitMiB,  // per-device hard cap in MiB, e.g. "8192"
  kMemoryRequestMiB,// per-device soft limit in MiB (= limit unless a soft ratio is configured)
  kMpsMemoryLimit,  // legacy CUDA MPS string, "0=8192M,1=8192M" (ordinals within the visible set)
};
std::string ContainerAnnotationKey(bool init, int index, ContainerEnvKey key);

// The environment variable that carries each key into the container.
std::string_view ContainerEnvName(ContainerEnvKey key);
inline constexpr ContainerEnvKey kAllContainerEnvKeys[] = {
    ContainerEnvKey::kVisibleDevices, ContainerEnvKey::kMemoryLimitMiB,
    ContainerEnvKey::kMemoryRequestMiB, ContainerEnvKey::kMpsMemoryLimit};

}  // namespace gpupack::api

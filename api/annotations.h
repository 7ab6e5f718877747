// The names that make up gpupack's contract with users, the webhook and the runtime
// (docs/annotations.md). Every component takes these names from here, so they cannot drift.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "model/rule_names.h"

namespace gpupack::api {

// Extended resources a container asks for in resources.limits (or requests).
inline constexpr std::string_view kResourceGpuMemory = "gpupack.io/gpu-memory";
inline constexpr std::string_view kResourceGpu = "gpupack.io/gpu";
// A container's compute share of each of its devices: whole percent of the device's SMs (of a MIG
// instance's own), 1–100, beside gpupack.io/gpu-memory (docs/annotations.md, "Compute").
inline constexpr std::string_view kResourceGpuCompute = "gpupack.io/gpu-compute";
// The device plugin resource gpupack refuses to mix with its own in one container.
inline constexpr std::string_view kResourceNvidiaGpu = "nvidia.com/gpu";

// Pod annotations a user may set, named here for their rows in api/pod_annotations.cc (what each
// means, how it is read) and for the code that sets them on pods (tests, the e2e scenarios). The
// rule names come from the model, whose placement explains refusals in the user's words.
inline constexpr std::string_view kAnnotationDeviceKind = "gpupack.io/device-kind";
inline constexpr std::string_view kAnnotationMigProfile = "gpupack.io/mig-profile";
inline constexpr std::string_view kAnnotationGpuModel = "gpupack.io/gpu-model";
inline constexpr std::string_view kAnnotationIsolation = "gpupack.io/isolation";
inline constexpr std::string_view kAnnotationGpuModelExclude = model::kRuleGpuModelExclude;
inline constexpr std::string_view kAnnotationGpuUuids = model::kRuleGpuUuids;
inline constexpr std::string_view kAnnotationGpuUuidsExclude = model::kRuleGpuUuidsExclude;
inline constexpr std::string_view kAnnotationNodePolicy = "gpupack.io/node-policy";
inline constexpr std::string_view kAnnotationDevicePolicy = "gpupack.io/device-policy";
inline constexpr std::string_view kAnnotationSpreadKey = model::kRuleSpreadKey;
inline constexpr std::string_view kAnnotationSpreadScope = model::kRuleSpreadScope;
inline constexpr std::string_view kAnnotationGpuMemoryLimit = model::kRuleGpuMemoryLimit;
inline constexpr std::string_view kAnnotationMovable = "gpupack.io/movable";

// Written by the webhook (never by users): the containers, "c0,i1", whose gpupack.io/gpu-memory
// the webhook added to a whole-device request so a ResourceQuota on requests.gpupack.io/gpu-memory
// counts it. Those containers still take whole devices.
inline constexpr std::string_view kAnnotationWholeDeviceCharge = "gpupack.io/whole-device-charge";

// Node annotation the agent honours: UUIDs ("GPU-a,MIG-b") taken out of gpupack's pool without
// draining the node. The agent reports them excluded in the GPUNode status and leaves them out
// of the node's advertised capacity; the extender places nothing new on them.
inline constexpr std::string_view kNodeAnnotationExcludedDevices = model::kRuleNodeExcludedDevices;

// Written by the extender on the Binding (lands on the pod atomically with spec.nodeName).
inline constexpr std::string_view kAnnotationAllocation = "gpupack.io/allocation";

// The gpupack.io/ resources a container may name. translate::ParsePodRequest refuses every other
// gpupack.io/ resource, naming these, so the webhook denies a typo such as gpupack.io/gpu-mem and
// the extender reports such a pod unschedulable with the same message (a misspelt name would
// otherwise ask for nothing and pass silently). The pod annotations, known names and all, are the
// table of api/pod_annotations.h.
inline constexpr std::string_view kGpupackPrefix = "gpupack.io/";
inline constexpr std::string_view kKnownResources[] = {kResourceGpuMemory, kResourceGpu, kResourceGpuCompute};
// "a, b, c": the known names as an error message lists them.
std::string JoinNames(std::span<const std::string_view> names);

// Per-container annotations the extender writes at bind and the webhook's downward-API env reads.
// Keyed by the container's position, not its name, so every legal container name works and the
// annotation name part stays within 63 characters. App containers use "c<i>", init containers
// "i<i>", e.g. gpupack.io/c0-visible-devices.
enum class ContainerEnvKey {
  kVisibleDevices,    // "GPU-…,MIG-…": the device UUIDs, comma separated
  kMemoryLimitMiB,    // per-device hard cap in MiB, e.g. "8192"
  kMemoryRequestMiB,  // per-device soft limit in MiB (= limit unless a soft ratio is configured)
  kMpsMemoryLimit,    // legacy CUDA MPS string, "0=8192M,1=8192M" (ordinals within the visible set)
  // The container's compute cap for an MPS client, whole percent of each device's SMs: the least
  // computePct of its devices, at least 1 (api::ActiveThreadPercentage), e.g. "30".
  kMpsActiveThreadPercentage,
  // The MPS client priority its pod's Kubernetes priority maps to (api::MpsClientPriorityOf): "0"
  // normal, "1" below normal.
  kMpsClientPriority,
};
std::string ContainerAnnotationKey(bool init, int index, ContainerEnvKey key);

// The environment variable that carries each key into the container.
std::string_view ContainerEnvName(ContainerEnvKey key);
inline constexpr ContainerEnvKey kAllContainerEnvKeys[] = {ContainerEnvKey::kVisibleDevices,
                                                           ContainerEnvKey::kMemoryLimitMiB,
                                                           ContainerEnvKey::kMemoryRequestMiB,
                                                           ContainerEnvKey::kMpsMemoryLimit,
                                                           ContainerEnvKey::kMpsActiveThreadPercentage,
                                                           ContainerEnvKey::kMpsClientPriority};

// Environment variables that choose a container's GPU devices or caps. Only the scheduler's
// allocation may set them: the webhook refuses (or strips) them wherever a pod's spec sets them
// itself (docs/security.md), so the one list is here. Why each is on it:
// - NVIDIA_VISIBLE_DEVICES: the NVIDIA container toolkit gives the container these devices ("all":
//   every GPU on the node) where it honours the variable; gpupack's own env carries it too.
inline constexpr std::string_view kEnvNvidiaVisibleDevices = "NVIDIA_VISIBLE_DEVICES";
// - CUDA_VISIBLE_DEVICES: CUDA picks among the devices the container can open, which is every
//   device for a privileged container or under a runtime without device isolation.
inline constexpr std::string_view kEnvCudaVisibleDevices = "CUDA_VISIBLE_DEVICES";
inline constexpr std::string_view kDeviceEnvNames[] = {kEnvNvidiaVisibleDevices, kEnvCudaVisibleDevices};
// - NVIDIA_GPU_MEMORY_*: the toolkit's apply-cuda-memory-limits hook sets the container's cgroup
//   memory limits from NVIDIA_GPU_MEMORY_LIMIT and _REQUEST.
// - CUDA_MPS_*: MPS client settings: the pinned memory limit, the thread share, and the pipe
//   directory that decides which MPS server (and so whose limits) a client joins.
inline constexpr std::string_view kDeviceEnvPrefixes[] = {"NVIDIA_GPU_MEMORY_", "CUDA_MPS_"};
// The MPS pipe directory: node-side injection gives an allocated container the node's (and only it).
inline constexpr std::string_view kEnvCudaMpsPipeDirectory = "CUDA_MPS_PIPE_DIRECTORY";
// True for a name in kDeviceEnvNames, under a kDeviceEnvPrefixes prefix, or one gpupack itself
// injects (ContainerEnvName of kAllContainerEnvKeys), so a new injected variable is covered without
// a second list. Case-sensitive, as the environment is. Not covered: what selects driver features
// or checks rather than devices (NVIDIA_DRIVER_CAPABILITIES, NVIDIA_REQUIRE_*).
bool IsDeviceEnvName(std::string_view name);
// True when `value` of the variable `name` gives the container no device, which a pod may say
// itself: for NVIDIA_VISIBLE_DEVICES exactly "", "void" (the toolkit behaves as plain runc) and
// "none" (driver libraries, no device; toolkit internal/config/image/devices.go); for
// CUDA_VISIBLE_DEVICES the same values and "-1" (CUDA hides every device from the first entry that
// is no device, and CPU-only pods commonly say -1). False for every other name.
bool GivesNoDevice(std::string_view name, std::string_view value);

}  // namespace gpupack::api

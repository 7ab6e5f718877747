// The domain model, the bottom layer every other folder speaks: nodes, devices, pod requests,
// placements. Everything here is a plain value (standard library only: no sockets, threads,
// clocks or third-party types), so the wire types, the placement library, the extender, the
// agent, the simulator and the benchmarks share one vocabulary. Memory is in MiB
// throughout (int64); CPU in milli-cores; host memory in bytes; a device's compute in whole percent
// of its SMs (of a MIG instance's own SMs for an instance).
//
// Thread safety: plain values; concurrent const access is safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupack::model {

// Nodes may carry at most this many devices (GPUs + MIG instances); more is refused at load.
inline constexpr int kMaxDevicesPerNode = 64;

using MiB = int64_t;

// Every device (a whole GPU or one MIG instance) has this much compute: shares are whole percent
// of its streaming multiprocessors.
inline constexpr int kDeviceComputePct = 100;

// The compute share a container that asks for none reserves on a device (docs/annotations.md):
// ⌊100 · mem / capacity⌋ percent, its share of the device's memory rounded down, so the memory-only
// shares on a device never sum over 100 %. 0 for a device without capacity.
int ProportionalComputePct(MiB mem_mib, MiB capacity_mib);
// The most memory whose proportional share fits in `compute_pct` (≥ 0) of a device:
// ProportionalComputePct(mem, capacity) ≤ compute_pct exactly when mem ≤ this, for 0 < mem <
// capacity. So the specs a device's free compute allows are a prefix by memory, like those its
// free memory allows. No limit (the largest MiB) for a device without capacity.
MiB LargestMemoryWithinComputePct(int compute_pct, MiB capacity_mib);

// What a pod's memory lands on: a whole GPU (not in MIG mode) or one MIG instance.
enum class DeviceKind : uint8_t { kGpu, kMig };

// One pod container's share of one device, as recorded in the ledger.
struct DeviceShare {
  std::string pod_uid;
  std::string pod_key;     // "namespace/name", for messages and metrics
  std::string container;   // container name
  MiB mem_mib = 0;         // the cap: the guaranteed amount, which Σ on a device keeps within its memory
  bool exclusive = false;  // whole-device request: nobody else may share the device
  std::string spread_key;  // the pod's gpupack.io/spread-key ("" = none): its replicas avoid this device
  // The compute share reserved, percent of the device's SMs: the container's gpupack.io/gpu-compute,
  // else ProportionalComputePct of its cap; kDeviceComputePct when exclusive.
  int compute_pct = 0;
  // The ceiling (gpupack.io/gpu-memory-limit, the hard limit) when above mem_mib; 0 = mem_mib: the
  // share cannot burst. Σ ceilings on a device stays within the cluster's overcommit bound.
  MiB mem_limit_mib = 0;
  // The most this share may use: its ceiling, or its cap when it cannot burst.
  MiB CeilingMiB() const { return mem_limit_mib > mem_mib ? mem_limit_mib : mem_mib; }
};

struct Device {
  std::string uuid;   // "GPU-…" or "MIG-…"
  int index = 0;      // device index on the node (for MIG: the parent GPU's index)
  std::string model;  // e.g. "NVIDIA A100-SXM4-80GB"
  DeviceKind kind = DeviceKind::kGpu;
  std::string parent_uuid;   // MIG only
  std::string mig_profile;   // MIG only, e.g. "1g.10gb"
  int gpu_instance_id = -1;  // MIG only
  int placement_start = -1;  // MIG only
  int placement_size = -1;   // MIG only
  MiB capacity_mib = 0;
  MiB used_mib = 0;  // live usage reported by the agent (0 when unknown)
  bool healthy = true;
  // Taken out of gpupack's pool by the administrator (node annotation gpupack.io/excluded-devices,
  // honoured by the agent): existing shares stay, no new pod lands here.
  bool excluded = false;
  // True when a cap on this device is a hard driver-enforced boundary: a whole GPU on a node
  // whose agent reports R615 cgroup limits, or a MIG instance (hard when taken exclusively).
  bool hard_isolation = false;
  // True when a compute share on this whole GPU is a ceiling the workload cannot raise: its agent
  // reports an MPS v3 namespace per container (GPUNode computeEnforcement mps-namespace).
  // gpupack.io/isolation: hard refuses a GPU without it to a container that asks for compute.
  bool hard_compute_isolation = false;
  std::vector<DeviceShare> shares;  // current allocations (bound and reserved)
};

// Σ compute_pct of the device's shares (kDeviceComputePct once any share is exclusive).
int AllocatedComputePct(const Device& device);

struct Node {
  std::string name;
  // Allocatable CPU (milli) and host memory (bytes); -1 = unknown, treated as unlimited.
  int64_t cpu_milli = -1;
  int64_t memory_bytes = -1;
  // Sum of CPU / memory requests of pods already on the node (for the fit, like NodeResourcesFit).
  int64_t requested_cpu_milli = 0;
  int64_t requested_memory_bytes = 0;
  std::map<std::string, std::string> labels;
  std::vector<Device> devices;
  // Empty when the node's inventory is fresh; otherwise why gpupack pods must not land here
  // (e.g. "GPUNode heartbeat 312s old > TTL 120s").
  std::string stale_reason;
  // Empty unless the node reports its whole GPUs' memory caps unenforced (the GPUNode condition
  // MemoryEnforced False): then why, quoted to a hard-isolation pod that finds no device here.
  std::string memory_unenforced_reason;
};

// How devices or nodes are chosen: FGD (fragmentation-aware), best fit, worst fit.
enum class PolicyKind : uint8_t { kFgd, kBinpack, kSpread };

// Which kind of device a pod accepts (annotation gpupack.io/device-kind).
enum class DeviceKindPreference : uint8_t { kAny, kGpu, kMig };

// One container's device demand.
struct ContainerRequest {
  std::string name;
  int index = 0;  // position in spec.containers (or spec.initContainers when init)
  bool init = false;
  int device_count = 0;  // k distinct devices; 0 = no gpupack devices
  // Per-device cap. 0 = whole devices taken exclusively (gpupack.io/gpu without gpu-memory).
  MiB mem_per_device_mib = 0;
  // Per-device ceiling (gpupack.io/gpu-memory-limit: the container's total, split evenly, rounded up
  // to whole MiB), above mem_per_device_mib; 0 = the request: the container cannot burst.
  MiB mem_limit_per_device_mib = 0;
  // Per-device compute share in percent (gpupack.io/gpu-compute, 1–100); 0 = none asked: the
  // container reserves ProportionalComputePct of its memory on each device.
  int compute_pct = 0;
  bool whole_device() const { return device_count > 0 && mem_per_device_mib == 0; }
  bool burstable() const { return mem_limit_per_device_mib > mem_per_device_mib && mem_per_device_mib > 0; }
};

struct PodRequest {
  std::string ns;
  std::string name;
  std::string uid;
  int64_t cpu_milli = 0;                     // effective pod CPU request (max(init, sum(app)) + overhead)
  int64_t memory_bytes = 0;                  // effective pod host-memory request
  std::vector<ContainerRequest> containers;  // only those with device_count > 0, app first then init
  DeviceKindPreference device_kind = DeviceKindPreference::kAny;
  std::string mig_profile;              // only MIG instances of this profile
  std::vector<std::string> gpu_models;  // device model must match one of these (GpuModelMatches; empty = any)
  bool hard_isolation = false;          // gpupack.io/isolation: hard
  // Device rules (docs/annotations.md): the device's UUID (or a MIG instance's parent UUID) must
  // be in gpu_uuids when it is not empty, and in neither excluded list; its model must match none
  // of excluded_gpu_models (same matching as gpu_models).
  std::vector<std::string> gpu_uuids;
  std::vector<std::string> excluded_gpu_uuids;
  std::vector<std::string> excluded_gpu_models;
  // Per-pod policy (gpupack.io/node-policy, gpupack.io/device-policy); nullopt = the cluster's.
  std::optional<PolicyKind> node_policy;    // how nodes are ranked for this pod
  std::optional<PolicyKind> device_policy;  // how devices are picked on a node
  // Pods with the same non-empty spread key never share a device, and with spread_across_nodes
  // (gpupack.io/spread-scope: node) this pod also avoids nodes holding one.
  std::string spread_key;
  bool spread_across_nodes = false;
  // spec.priority (0 without a PriorityClass): the bind maps it to the MPS client priority its
  // containers get (api::MpsClientPriorityOf).
  int64_t priority = 0;
  // gpupack.io/movable: "true": the pod's owner accepts that gpupack evicts it to make room for a
  // pod that fits nowhere (docs/placement.md, "Defragmentation"); placement never reads it.
  bool movable = false;

  bool WantsDevices() const { return !containers.empty(); }
  // Some container asks for a compute share (gpupack.io/gpu-compute).
  bool WantsCompute() const;
  // Some container has a ceiling above its request (gpupack.io/gpu-memory-limit).
  bool Burstable() const;
  std::string Key() const { return ns + "/" + name; }
  // Σ over app containers of k × per-device memory (whole devices count their k only).
  MiB TotalMemMiB() const;
};

// Whether the pod-side model name `wanted` (one |-separated part of gpupack.io/gpu-model) matches
// a device's `model` (docs/annotations.md): case-insensitively, `wanted` equals the model or a run of
// whole words of it, words split at spaces and hyphens ("A100", "a100-sxm4" and "NVIDIA A100"
// match "NVIDIA A100-SXM4-80GB"; "A10" and "A100-SXM" do not); a name holding `*` is a glob over
// the whole model instead, `*` standing for any run of characters ("*A100*80GB" matches it,
// "A100*" does not). An empty name matches nothing.
bool GpuModelMatches(std::string_view wanted, std::string_view model);

// Where one container's devices are: slots index Node::devices.
struct ContainerPlacement {
  std::string container;
  int container_index = 0;
  bool init = false;
  std::vector<int> device_slots;
  MiB mem_per_device_mib = 0;        // the cap written on each device (for whole devices: its capacity)
  MiB mem_limit_per_device_mib = 0;  // the ceiling on each device (ContainerRequest's); 0 = the cap
  // The compute share reserved on each device, in device_slots' order (DeviceShare::compute_pct).
  std::vector<int> compute_pct;
  bool exclusive = false;
  // Init containers run before the app containers, so one that fits inside devices the pod
  // already holds reuses them and adds no memory to the ledger (Kubernetes' max(init, sum(app))).
  bool within_pod_devices = false;
};

struct Placement {
  std::vector<ContainerPlacement> containers;
};

// The compute share container placement `cp` reserves on its i-th device: cp.compute_pct[i], or for
// a placement without them (built by hand) all of it when exclusive, else its memory's share.
int ShareComputePct(const ContainerPlacement& cp, size_t i, const Device& device);

}  // namespace gpupack::model

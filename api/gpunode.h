// The GPUNode custom resource (docs/agent.md "GPUNode status"): gpunodes.gpupack.io/v1alpha1, cluster-scoped, one
// per node, metadata.name = node name. The node's agent is its only writer (status subresource);
// the extender reads it to learn what each node really has.
//
// Status JSON (camelCase; MiB throughout):
//   {"devices":[{"uuid":"GPU-…","index":0,"model":"NVIDIA H100 80GB HBM3","memoryMiB":81559,
//                "usedMiB":1200,"allocatedMiB":16384,"healthy":true,"migEnabled":false,
//                "computeEnforcement":"mps-client","allocatedComputePct":40,"smUtilPct":35,
//                "migInstances":[{"uuid":"MIG-…","profile":"3g.40gb","memoryMiB":40192,"usedMiB":0,
//                                 "gpuInstanceId":1,"placement":{"start":0,"size":4},
//                                 "computeEnforcement":"none"}]}],
//    "processes":[{"pid":4242,"device":"GPU-…","usedMiB":900,"smUtilPct":30,"podUID":"…","pod":"ns/name",
//                  "container":"main","containerID":"…"}],
//    "enforcement":{"mode":"cgroup-dmem","driverVersion":"615.20","cudaVersion":"13.4","reason":"",
//                   "computeReason":"MPS control pipe /tmp/nvidia-mps/control found"},
//    "audit":[{"kind":"over-cap","device":"GPU-…","podUID":"…","pod":"ns/name","container":"main",
//              "pid":4242,"usedMiB":9000,"capMiB":8192,"message":"…"},
//             {"kind":"over-compute",…,"usedComputePct":55,"computePct":30,"message":"…"}],
//    "usage":[{"podUID":"…","pod":"ns/name","container":"main","workloadKind":"Deployment",
//              "workloadName":"web","devices":1,"deviceMemoryMiB":81559,"capMiB":8192,"peakMiB":5325,
//              "p95MiB":5000,"p99MiB":5120,"samples":360,"since":"2026-11-29T09:18:41Z"}],
//    "gpus":1,"memoryMiB":81559,"allocatedMiB":16384,"usedMiB":1200,   // printer-column summary
//    "excludedGpus":0,   // devices (GPUs or MIG instances) the administrator excluded
//    "maxPodsPerDevice":16,
//    "heartbeatTime":"2026-11-29T10:18:41Z",
//    "conditions":[{"type":"MemoryEnforced","status":"True","reason":"Enforced","message":"…",
//                   "lastTransitionTime":"2026-11-29T10:00:02Z"}]}
// enforcement.mode is one of cgroup-dmem | cgroup-misc | mps | none (memory); a device's and a MIG
// instance's computeEnforcement one of mps-namespace | mps-client | none (compute; docs/agent.md
// "Compute enforcement"). smUtilPct is omitted when NVML cannot tell. Audit kinds: over-cap,
// over-compute, unenforced, foreign-process. Decoding ignores unknown keys (forward compatibility within
// v1alpha1) and refuses wrong types with a message naming the field.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/status.h"
#include "model/model.h"

namespace gpupack::api {

inline constexpr std::string_view kGpuNodeGroup = "gpupack.io";
inline constexpr std::string_view kGpuNodeVersion = "v1alpha1";
inline constexpr std::string_view kGpuNodeKind = "GPUNode";

inline constexpr std::string_view kEnforcementCgroupDmem = "cgroup-dmem";
inline constexpr std::string_view kEnforcementCgroupMisc = "cgroup-misc";
inline constexpr std::string_view kEnforcementMps = "mps";
inline constexpr std::string_view kEnforcementNone = "none";

// How a compute share (gpupack.io/gpu-compute, an allocation's computePct) is held on a device:
// - mps-namespace: an MPS v3 (R615) namespace per container whose active_thread_percentage is the
//   share, set by the server's owner before the container's first CUDA call: a ceiling the workload
//   cannot raise, so gpupack.io/isolation: hard accepts it for compute asks;
// - mps-client: a legacy MPS server holds the device (its control pipe is there and the device is
//   EXCLUSIVE_PROCESS, so no client can bypass it) and each container's MPS client gets
//   CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = its share; a client setting only lowers the server's value,
//   but a workload can unset it in its own process, so it is no boundary;
// - none: the share is scheduled and audited, not capped.
inline constexpr std::string_view kComputeEnforcementMpsNamespace = "mps-namespace";
inline constexpr std::string_view kComputeEnforcementMpsClient = "mps-client";
inline constexpr std::string_view kComputeEnforcementNone = "none";

// Status conditions, the node doctor's verdicts (docs/agent.md "Doctor"): MemoryEnforced is True when
// caps on whole GPUs are driver-enforced limits (so gpupack.io/isolation: hard may place there);
// ComputeEnforced when compute shares are hard caps on every GPU. Status "True" or "False";
// reason "Enforced", else the failing check and its verdict ("MemoryLimitsMissing"); message what
// the check found and its fix.
inline constexpr std::string_view kConditionMemoryEnforced = "MemoryEnforced";
inline constexpr std::string_view kConditionComputeEnforced = "ComputeEnforced";

inline constexpr std::string_view kAuditOverCap = "over-cap";
// A gpupack container whose processes' SM time on a device is above its compute share.
inline constexpr std::string_view kAuditOverCompute = "over-compute";
inline constexpr std::string_view kAuditUnenforced = "unenforced";
inline constexpr std::string_view kAuditForeignProcess = "foreign-process";

struct GpuNodeMigInstance {
  std::string uuid;
  std::string profile;  // "3g.40gb"
  model::MiB memory_mib = 0;
  model::MiB used_mib = 0;
  int gpu_instance_id = -1;
  int placement_start = -1;  // memory slices; -1 = unknown
  int placement_size = -1;
  bool excluded = false;  // named in the node's gpupack.io/excluded-devices (itself or its GPU)
  std::string compute_enforcement = std::string(kComputeEnforcementNone);  // "computeEnforcement"

  bool operator==(const GpuNodeMigInstance&) const = default;
};

struct GpuNodeDevice {
  std::string uuid;
  int index = 0;
  std::string model;
  model::MiB memory_mib = 0;
  model::MiB used_mib = 0;
  model::MiB allocated_mib = 0;  // Σ caps of gpupack containers the agent sees on this device
  bool healthy = true;
  bool mig_enabled = false;
  // Taken out of gpupack's pool by the administrator (node annotation gpupack.io/excluded-devices):
  // "excluded": true, written only when set. Left out of the advertised capacity; the extender
  // places nothing new on it.
  bool excluded = false;
  std::vector<GpuNodeMigInstance> mig_instances;
  // kComputeEnforcement*: how compute shares are held on this GPU ("computeEnforcement").
  std::string compute_enforcement = std::string(kComputeEnforcementNone);
  int allocated_compute_pct = 0;  // Σ computePct of gpupack containers the agent sees on this GPU
  int sm_util_pct = -1;           // NVML's utilisation, percent of time a kernel ran; -1 = unknown

  bool operator==(const GpuNodeDevice&) const = default;
};

struct GpuNodeProcess {
  int64_t pid = 0;
  std::string device;  // uuid of the GPU or MIG instance
  model::MiB used_mib = 0;
  std::string pod_uid;       // empty when the process belongs to no pod
  std::string pod;           // "namespace/name" when known
  std::string container;     // container name when known
  std::string container_id;  // runtime id from the cgroup path
  int sm_util_pct = -1;      // percent of the SMs' time its kernels ran (NVML samples); -1 = unknown

  bool operator==(const GpuNodeProcess&) const = default;
};

struct GpuNodeEnforcement {
  std::string mode = std::string(kEnforcementNone);
  std::string driver_version;
  std::string cuda_version;    // "13.4"
  std::string reason;          // why the mode is what it is (e.g. "driver 580.65 < R615")
  std::string compute_reason;  // why the devices' compute enforcement is what it is

  bool operator==(const GpuNodeEnforcement&) const = default;
};

struct GpuNodeAuditFinding {
  std::string kind;    // kAuditOverCap | kAuditUnenforced | kAuditForeignProcess
  std::string device;  // uuid
  std::string pod_uid;
  std::string pod;
  std::string container;
  int64_t pid = 0;
  model::MiB used_mib = 0;
  model::MiB cap_mib = 0;
  std::string message;
  int used_compute_pct = 0;  // over-compute: the container's SM time on the device, percent
  int compute_pct = 0;       // over-compute: its share

  bool operator==(const GpuNodeAuditFinding&) const = default;
};

// What one gpupack container used over its life on this node (docs/agent.md "Observed use"): per
// device, the largest of its devices' use at each pass. One entry per running gpupack container,
// so the list is as long as the node's containers (≤ devices × maxPodsPerDevice).
struct GpuNodeContainerUsage {
  std::string pod_uid;
  std::string pod;        // "namespace/name"
  std::string container;  // container name
  // The pod's owning workload from its ownerReferences (translate/workload_owner.h): "Deployment"
  // and its name, "StatefulSet", "Job", …, or "Pod" and the pod's name for a pod without one.
  std::string workload_kind;
  std::string workload_name;
  int devices = 0;                   // devices the container holds
  model::MiB device_memory_mib = 0;  // the smallest of them
  model::MiB cap_mib = 0;            // its cap per device
  model::MiB peak_mib = 0;           // highest sample
  model::MiB p95_mib = 0;            // percentiles of the samples (log-bucket histogram, ≤ 4.4 % high)
  model::MiB p99_mib = 0;
  int64_t samples = 0;       // agent passes it was sampled in
  Clock::TimePoint since{};  // first sample

  bool operator==(const GpuNodeContainerUsage&) const = default;
};

struct GpuNodeCondition {
  std::string type;  // kCondition*
  bool status = false;
  std::string reason;
  std::string message;
  Clock::TimePoint last_transition_time{};  // when status last changed

  bool operator==(const GpuNodeCondition&) const = default;
};

// The condition of `type`, or nullptr.
const GpuNodeCondition* FindCondition(const std::vector<GpuNodeCondition>& conditions, std::string_view type);

struct GpuNodeStatus {
  std::vector<GpuNodeDevice> devices;
  std::vector<GpuNodeProcess> processes;
  GpuNodeEnforcement enforcement;
  std::vector<GpuNodeAuditFinding> audit;
  std::vector<GpuNodeContainerUsage> usage;  // encoded only when not empty
  int max_pods_per_device = 0;               // 0 = not reported
  Clock::TimePoint heartbeat_time{};
  std::vector<GpuNodeCondition> conditions;

  bool operator==(const GpuNodeStatus&) const = default;
};

// Encodes the status (with the summary fields filled in from the devices). Heartbeat at whole
// seconds, RFC 3339 UTC.
nlohmann::json GpuNodeStatusToJson(const GpuNodeStatus& status);
// InvalidArgument naming the field ("status.devices[1].memoryMiB: expected an integer") for wrong
// types, negative memory, a missing uuid or an unparseable heartbeatTime.
StatusOr<GpuNodeStatus> GpuNodeStatusFromJson(const nlohmann::json& status);

// Only the observed use of a status (what the extender's workload store reads), with the errors
// GpuNodeStatusFromJson gives for it.
StatusOr<std::vector<GpuNodeContainerUsage>> GpuNodeUsageFromJson(const nlohmann::json& status);

// A whole GPUNode object: apiVersion, kind, metadata.name and status.
nlohmann::json GpuNodeObject(std::string_view node_name, const GpuNodeStatus& status);

// The UUIDs in a core/v1 Node's gpupack.io/excluded-devices annotation ("GPU-a, MIG-b"; absent =
// none). InvalidArgument naming the annotation for an empty entry or a non-string value.
StatusOr<std::vector<std::string>> ExcludedDevicesOfNode(const nlohmann::json& node);

// Marks the status' devices named in `uuids` excluded; naming a GPU excludes its MIG instances.
void MarkExcluded(GpuNodeStatus& status, const std::vector<std::string>& uuids);

}  // namespace gpupack::api

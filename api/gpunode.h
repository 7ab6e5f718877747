// The GPUNode custom resource (docs/agent.md "GPUNode status"): gpunodes.gpupack.io/v1alpha1, cluster-scoped, one
// per node, metadata.name = node name. The node's agent is its only writer (status subresource);
// the extender reads it to learn what each node really has.
//
// Status JSON (camelCase; MiB throughout):
//   {"devices":[{"uuid":"GPU-…","index":0,"model":"NVIDIA H100 80GB HBM3","memoryMiB":81559,
//                "usedMiB":1200,"allocatedMiB":16384,"healthy":true,"migEnabled":false,
//                "migInstances":[{"uuid":"MIG-…","profile":"3g.40gb","memoryMiB":40192,"usedMiB":0,
//                                 "gpuInstanceId":1,"placement":{"start":0,"size":4}}]}],
//    "processes":[{"pid":4242,"device":"GPU-…","usedMiB":900,"podUID":"…","pod":"ns/name",
//                  "container":"main","containerID":"…"}],
//    "enforcement":{"mode":"cgroup-dmem","driverVersion":"615.20","cudaVersion":"13.4","reason":""},
//    "audit":[{"kind":"over-cap","device":"GPU-…","podUID":"…","pod":"ns/name","container":"main",
//              "pid":4242,"usedMiB":9000,"capMiB":8192,"message":"…"}],
//    "usage":[{"podUID":"…","pod":"ns/name","container":"main","workloadKind":"Deployment",
//              "workloadName":"web","devices":1,"deviceMemoryMiB":81559,"capMiB":8192,"peakMiB":5325,
//              "p95MiB":5000,"p99MiB":5120,"samples":360,"since":"2026-11-29T09:18:41Z"}],
//    "gpus":1,"memoryMiB":81559,"allocatedMiB":16384,"usedMiB":1200,   // printer-column summary
//    "excludedGpus":0,   // devices (GPUs or MIG instances) the administrator excluded
//    "maxPodsPerDevice":16,
//    "heartbeatTime":"2026-11-29T10:18:41Z"}
// enforcement.mode is one of cgroup-dmem | cgroup-misc | mps | none. Audit kinds: over-cap,
// unenforced, foreign-process. Decoding ignores unknown keys (forward compatibility within
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

inline constexpr std::string_view kAuditOverCap = "over-cap";
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

  bool operator==(const GpuNodeProcess&) const = default;
};

struct GpuNodeEnforcement {
  std::string mode = std::string(kEnforcementNone);
  std::string driver_version;
  std::string cuda_version;  // "13.4"
  std::string reason;        // why the mode is what it is (e.g. "driver 580.65 < R615")

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

struct GpuNodeStatus {
  std::vector<GpuNodeDevice> devices;
  std::vector<GpuNodeProcess> processes;
  GpuNodeEnforcement enforcement;
  std::vector<GpuNodeAuditFinding> audit;
  std::vector<GpuNodeContainerUsage> usage;  // encoded only when not empty
  int max_pods_per_device = 0;               // 0 = not reported
  Clock::TimePoint heartbeat_time{};

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

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
//    "gpus":1,"memoryMiB":81559,"allocatedMiB":16384,"usedMiB":1200,   // printer-column summary
//    "excludedGpus":0,   // devices (GPUs or MIG instances) the administrator excluded
//    "maxPodsPerDevice":16,
//    "heartbeatTime":"2026-11-29T10:18:41Z",
//    "conditions":[{"type":"MemoryEnforced","status":"True","reason":"Enforced","message":"…",
//                   "lastTransitionTime":"2026-11-29T10:00:02Z"}]}
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

// Status conditions, the node doctor's verdicts (docs/agent.md "Doctor"): MemoryEnforced is True when
// caps on whole GPUs are driver-enforced limits (so gpupack.io/isolation: hard may place there);
// ComputeEnforced when compute shares are hard caps on every GPU. Status "True" or "False";
// reason "Enforced", else the failing check and its verdict ("MemoryLimitsMissing"); message what
// the check found and its fix.
inline constexpr std::string_view kConditionMemoryEnforced = "MemoryEnforced";
inline constexpr std::string_view kConditionComputeEnforced = "ComputeEnforced";

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
  int max_pods_per_device = 0;  // 0 = not reported
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

// A whole GPUNode object: apiVersion, kind, metadata.name and status.
nlohmann::json GpuNodeObject(std::string_view node_name, const GpuNodeStatus& status);

// The UUIDs in a core/v1 Node's gpupack.io/excluded-devices annotation ("GPU-a, MIG-b"; absent =
// none). InvalidArgument naming the annotation for an empty entry or a non-string value.
StatusOr<std::vector<std::string>> ExcludedDevicesOfNode(const nlohmann::json& node);

// Marks the status' devices named in `uuids` excluded; naming a GPU excludes its MIG instances.
void MarkExcluded(GpuNodeStatus& status, const std::vector<std::string>& uuids);

}  // namespace gpupack::api

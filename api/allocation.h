// The gpupack.io/allocation annotation (docs/annotations.md): the extender's decision, written on the
// Binding so it lands on the pod atomically with spec.nodeName. It is the source of truth from
// which an extender rebuilds its whole ledger after a restart.
//
//   {"v":1,"node":"n1","containers":[{"name":"main","index":0,"devices":
//     [{"uuid":"GPU-…","index":0,"memMiB":8192,"limitMiB":16384,"computePct":10}]}]}
//
// Container fields: "name", "index" (position in spec.containers, or spec.initContainers when
// "init":true), "exclusive":true for whole-device requests, "withinPod":true for an init container
// that reuses devices the pod's app containers hold (it adds nothing to the ledger). Device fields: "uuid", "index"
// (device index on the node), "memMiB" (the cap: the guaranteed amount), "limitMiB" (the ceiling of a
// burstable container, gpupack.io/gpu-memory-limit, above memMiB; absent when it cannot burst), "computePct" (the
// compute share reserved on the device, percent of its SMs: the container's gpupack.io/gpu-compute, else its memory's
// share rounded down; 100 when exclusive; absent in allocations written before compute shares existed), and for MIG
// instances "parent" and "profile". Top-level "spreadKey": the pod's gpupack.io/spread-key, when it has one;
// "mpsClientPriority": 1 when the pod's Kubernetes priority maps to MPS's below-normal client priority
// (MpsClientPriorityOf). Optional fields are omitted when they hold their default. Decoding accepts any key order,
// ignores unknown keys (forward compatibility within v1) and refuses other versions.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/model.h"

namespace gpupack::api {

inline constexpr int kAllocationVersion = 1;
// AllocatedDevice::compute_pct of an allocation written before compute shares existed.
inline constexpr int kComputeNotRecorded = -1;

// CUDA_MPS_CLIENT_PRIORITY's two levels (MPS documentation, "Environment variables": 0 normal, the
// default, and 1 below normal; the MPS server schedules a below-normal client's work after normal
// clients' where both wait, it does not preempt running kernels).
inline constexpr int kMpsClientPriorityNormal = 0;
inline constexpr int kMpsClientPriorityBelowNormal = 1;
// The MPS client priority for a pod of Kubernetes priority `pod_priority` (spec.priority, 0 without a
// PriorityClass): below normal for a negative priority, the classes clusters define for work that
// may wait (preemptible batch, "best-effort" tiers); normal for 0 and above. MPS has no level above
// normal, so the high classes cannot be told apart from the default one.
int MpsClientPriorityOf(int64_t pod_priority);

struct AllocatedDevice {
  std::string uuid;
  int index = 0;
  model::MiB mem_mib = 0;
  std::string parent_uuid;                // MIG only
  std::string profile;                    // MIG only
  int compute_pct = kComputeNotRecorded;  // "computePct"
  model::MiB limit_mib = 0;               // "limitMiB": the ceiling, above mem_mib; 0 = none

  bool operator==(const AllocatedDevice&) const = default;
};

struct ContainerAllocation {
  std::string name;
  int index = 0;
  bool init = false;
  bool exclusive = false;
  bool within_pod = false;
  std::vector<AllocatedDevice> devices;

  bool operator==(const ContainerAllocation&) const = default;
};

struct Allocation {
  std::string node;
  std::vector<ContainerAllocation> containers;
  // The pod's gpupack.io/spread-key ("spreadKey", omitted when empty): carried in the decision so
  // a restarted extender's ledger still keeps the pod's replicas off these devices.
  std::string spread_key;
  // The MPS client priority of every container of the pod ("mpsClientPriority", omitted when 0):
  // decided at bind from the pod's Kubernetes priority (MpsClientPriorityOf), so the node injects
  // what the scheduler decided rather than what the pod spec says.
  int mps_client_priority = kMpsClientPriorityNormal;

  bool operator==(const Allocation&) const = default;
};

// The container's MPS active thread percentage (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE): the least
// computePct over its devices, because the client setting is one number for every device it opens
// and must not exceed the share reserved on any of them; at least 1 (a share under 1 % of a device
// rounds to 0, and MPS's smallest cap is what such a container gets); 100 when no device records a
// share (an allocation written before compute shares existed). REQUIRES: !c.devices.empty().
int ActiveThreadPercentage(const ContainerAllocation& c);

// Compact JSON, fixed key order, so equal allocations encode to equal strings.
std::string EncodeAllocation(const Allocation& allocation);
// InvalidArgument naming the offending field for malformed JSON, wrong types, a missing or
// unsupported "v", empty uuids, negative memory or indexes.
StatusOr<Allocation> DecodeAllocation(std::string_view text);

// The hard limit of a container's share of device `d` (NVIDIA_GPU_MEMORY_LIMIT): its ceiling when it
// has one, else its cap.
model::MiB HardLimitMiB(const AllocatedDevice& d);

// Every annotation the extender writes on the Binding: gpupack.io/allocation plus, per
// container, the api::ContainerAnnotationKey entries: visible devices ("GPU-a,GPU-b"), the hard
// limit in MiB (HardLimitMiB), the soft limit in MiB (a burstable container's cap, its guaranteed
// amount; else the cap × request_ratio, rounded down, at least 1: the ratio is the default for
// containers that name no ceiling), the legacy MPS string of the hard limits ("0=8192M,1=8192M",
// ordinals within the visible set), the MPS active thread percentage (ActiveThreadPercentage) and
// the MPS client priority (Allocation::mps_client_priority).
std::map<std::string, std::string> AllocationAnnotations(const Allocation& allocation, double request_ratio = 1.0);

// The per-device soft limit (NVIDIA_GPU_MEMORY_REQUEST) of a container's share of device `d`, from
// `request_mib`, the value of its …-memory-request-mib annotation (0 when it has none or it is not a
// count): that value when it is in [1, HardLimitMiB(d)], else the cap (for a burstable container its
// guaranteed amount; for another the hard limit: no soft limit below it). The agent's enforcer and
// node-side injection both apply it, so both set the same soft limit.
model::MiB SoftLimitMiB(model::MiB request_mib, const AllocatedDevice& d);

}  // namespace gpupack::api

// The gpupack.io/allocation annotation (docs/annotations.md): the extender's decision, written on the
// Binding so it lands on the pod atomically with spec.nodeName. It is the source of truth from
// which an extender rebuilds its whole ledger after a restart.
//
//   {"v":1,"node":"n1","containers":[{"name":"main","index":0,"devices":
//     [{"uuid":"GPU-…","index":0,"memMiB":8192}]}]}
//
// Container fields: "name", "index" (position in spec.containers, or spec.initContainers when
// "init":true), "exclusive":true for whole-device requests, "withinPod":true for an init container
// that reuses devices the pod's app containers hold (it adds nothing to the ledger). Device fields: "uuid", "index"
// (device index on the node), "memMiB" (the cap), and for MIG instances "parent" and "profile". Top-level "spreadKey":
// the pod's gpupack.io/spread-key, when it has one. Optional fields are omitted when they hold their default. Decoding
// accepts any key order, ignores unknown keys (forward compatibility within v1) and refuses other versions.
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

struct AllocatedDevice {
  std::string uuid;
  int index = 0;
  model::MiB mem_mib = 0;
  std::string parent_uuid;  // MIG only
  std::string profile;      // MIG only

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

  bool operator==(const Allocation&) const = default;
};

// Compact JSON, fixed key order, so equal allocations encode to equal strings.
std::string EncodeAllocation(const Allocation& allocation);
// InvalidArgument naming the offending field for malformed JSON, wrong types, a missing or
// unsupported "v", empty uuids, negative memory or indexes.
StatusOr<Allocation> DecodeAllocation(std::string_view text);

// Every annotation the extender writes on the Binding: gpupack.io/allocation plus, per
// container, the api::ContainerAnnotationKey entries: visible devices ("GPU-a,GPU-b"), the cap
// in MiB, the request in MiB (= cap × request_ratio, rounded down, at least 1) and the legacy
// MPS string ("0=8192M,1=8192M", ordinals within the visible set).
std::map<std::string, std::string> AllocationAnnotations(const Allocation& allocation, double request_ratio = 1.0);

// The per-device soft limit (NVIDIA_GPU_MEMORY_REQUEST) of a container whose cap is `cap_mib`, from
// `request_mib`, the value of its …-memory-request-mib annotation (0 when it has none or it is not a
// count): that value when it is in [1, cap_mib], else the cap (no soft limit below the hard one).
// The agent's enforcer and node-side injection both apply it, so both set the same soft limit.
model::MiB SoftLimitMiB(model::MiB request_mib, model::MiB cap_mib);

}  // namespace gpupack::api

// Internal to placement/ (not for callers outside it): a device demand, whether of a typical
// spec or of a pod's container, and the device rules that decide which devices it may use.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "placement/node_summary.h"
#include "placement/vocabulary.h"
#include "placement/workload.h"

namespace gpupack::placement {

// A device demand in the shape both typical specs and pod containers share.
struct Demand {
  int count = 0;    // distinct devices
  MiB mem = 0;      // per device; 0 = whole device
  int compute = 0;  // per-device compute share in percent; 0 = ProportionalComputePct of `mem`
  // Per-device ceiling above `mem` (gpupack.io/gpu-memory-limit; pods only); 0 = `mem`: no burst.
  MiB ceiling = 0;
  DeviceKindPreference kind = DeviceKindPreference::kAny;
  const std::string* mig_profile = nullptr;          // empty or null = any
  const std::vector<std::string>* models = nullptr;  // null or empty = any
  bool hard_isolation = false;
  // The pod's device rules (pods only; specs have none). Null or empty = no rule.
  const std::vector<std::string>* uuids = nullptr;
  const std::vector<std::string>* excluded_uuids = nullptr;
  const std::vector<std::string>* excluded_models = nullptr;
  const std::string* spread_key = nullptr;
  const std::string* pod_uid = nullptr;
  // No kind, profile, model, isolation or device rule: every device's sort matches, and only the
  // summary's free memory decides (it already counts unhealthy and excluded devices as full).
  bool Unconstrained() const {
    auto none = [](const auto* p) { return p == nullptr || p->empty(); };
    return kind == DeviceKindPreference::kAny && none(mig_profile) && none(models) && !hard_isolation && none(uuids) &&
           none(excluded_uuids) && none(excluded_models) && none(spread_key) && ceiling <= mem;
  }
};

// Whether a device may take new shares at all: healthy and not excluded by the administrator.
inline bool InPool(const Device& d) { return d.healthy && !d.excluded; }

bool ModelMatches(const std::string& model, const std::vector<std::string>* wanted);
// Kind, profile and model: whether the device is of a sort the demand accepts at all.
bool SortMatches(const Device& d, const Demand& demand);

// The device rules of a pod, in the order a rejection lists them. kCeilingBound: the demand's
// ceiling would take the device's Σ ceilings over the overcommit bound (CeilingRoomMiB).
enum class Rule : uint8_t {
  kNone,
  kModelExclude,
  kUuidAllow,
  kUuidExclude,
  kAdminExcluded,
  kSpreadKey,
  kCeilingBound,
  kCount
};

// The first rule that keeps a device of a matching sort from the demand (kNone: allowed).
Rule FailedRule(const Device& d, const Demand& demand, const PlacementOptions& options);
// Healthy, of a sort the demand accepts, and allowed by every rule: a device the pod may use.
bool Allowed(const Device& d, const Demand& demand, const PlacementOptions& options);

// "2 devices excluded by gpupack.io/gpu-uuids-exclude, 1 holds a pod with gpupack.io/spread-key
// \"web\"": why devices of a matching sort were refused, one clause per rule.
std::string DescribeRules(const std::array<int, static_cast<int>(Rule::kCount)>& refused, const Demand& demand,
                          const PlacementOptions& options);
// "MIG profile 1g.10gb, model A100": the sort of device the demand accepts.
std::string DescribeSort(const Demand& d);

// Whole-device demands, and hard isolation on a MIG instance, take the device exclusively.
inline bool TakesExclusively(const Device& d, const Demand& demand) {
  return demand.mem == 0 || (demand.hard_isolation && d.kind == DeviceKind::kMig);
}

// The compute share, percent, the demand reserves on device `d`: all of it when taken exclusively,
// its own share when it names one, else its memory's share of the device (ProportionalComputePct).
inline int ComputeNeedPct(MiB capacity_mib, const Demand& demand, bool exclusive) {
  if (exclusive) return model::kDeviceComputePct;
  return demand.compute > 0 ? demand.compute : model::ProportionalComputePct(demand.mem, capacity_mib);
}
inline int ComputeNeedPct(const Device& d, const Demand& demand, bool exclusive) {
  return ComputeNeedPct(d.capacity_mib, demand, exclusive);
}

Demand DemandOfSpec(const TypicalSpec& s);
Demand DemandOfContainer(const PodRequest& pod, const ContainerRequest& c);

}  // namespace gpupack::placement

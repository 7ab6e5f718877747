#include "placement/demand.h"

#include "model/rule_names.h"

namespace gpupack::placement {

bool ModelMatches(const std::string& model, const std::vector<std::string>* wanted) {
  if (wanted == nullptr || wanted->empty()) return true;
  for (const auto& w : *wanted) {
    if (GpuModelMatches(w, model)) return true;
  }
  return false;
}

bool SortMatches(const Device& d, const Demand& demand) {
  if (demand.Unconstrained()) return true;
  if (demand.mig_profile != nullptr && !demand.mig_profile->empty()) {
    if (d.kind != DeviceKind::kMig || d.mig_profile != *demand.mig_profile) return false;
  } else if (demand.kind == DeviceKindPreference::kGpu && d.kind != DeviceKind::kGpu) {
    return false;
  } else if (demand.kind == DeviceKindPreference::kMig && d.kind != DeviceKind::kMig) {
    return false;
  }
  if (demand.hard_isolation && d.kind == DeviceKind::kGpu && !d.hard_isolation) return false;
  // A share of a GPU's SMs is hard only where the workload cannot raise its cap (an MPS v3
  // namespace); a MIG instance under hard isolation is taken whole, its SMs with it.
  if (demand.hard_isolation && demand.compute > 0 && d.kind == DeviceKind::kGpu && !d.hard_compute_isolation) {
    return false;
  }
  return ModelMatches(d.model, demand.models);
}

namespace {

bool NamesDevice(const Device& d, const std::vector<std::string>& uuids) {
  for (const std::string& u : uuids) {
    if (u == d.uuid || (!d.parent_uuid.empty() && u == d.parent_uuid)) return true;
  }
  return false;
}

}  // namespace

Rule FailedRule(const Device& d, const Demand& demand, const PlacementOptions& options) {
  if (demand.excluded_models != nullptr && !demand.excluded_models->empty() &&
      ModelMatches(d.model, demand.excluded_models)) {
    return Rule::kModelExclude;
  }
  if (demand.uuids != nullptr && !demand.uuids->empty() && !NamesDevice(d, *demand.uuids)) return Rule::kUuidAllow;
  if (demand.excluded_uuids != nullptr && NamesDevice(d, *demand.excluded_uuids)) return Rule::kUuidExclude;
  if (d.excluded) return Rule::kAdminExcluded;
  if (demand.spread_key != nullptr && !demand.spread_key->empty()) {
    for (const DeviceShare& s : d.shares) {
      if (s.spread_key == *demand.spread_key && s.pod_uid != *demand.pod_uid) return Rule::kSpreadKey;
    }
  }
  // A demand without a ceiling of its own needs no more room than its memory, which its free
  // memory (DeviceFreeMiB, never above the room) already decides.
  if (demand.ceiling > demand.mem && CeilingRoomMiB(d, options) < demand.ceiling) return Rule::kCeilingBound;
  return Rule::kNone;
}

bool Allowed(const Device& d, const Demand& demand, const PlacementOptions& options) {
  return d.healthy && SortMatches(d, demand) && FailedRule(d, demand, options) == Rule::kNone;
}

std::string DescribeRules(const std::array<int, static_cast<int>(Rule::kCount)>& refused, const Demand& demand,
                          const PlacementOptions& options) {
  std::string out;
  for (int r = 1; r < static_cast<int>(Rule::kCount); ++r) {
    const int n = refused[r];
    if (n == 0) continue;
    const std::string devices = std::to_string(n) + (n == 1 ? " device " : " devices ");
    std::string clause;
    switch (static_cast<Rule>(r)) {
      case Rule::kModelExclude:
        clause = devices + "of a model excluded by " + std::string(model::kRuleGpuModelExclude);
        break;
      case Rule::kUuidAllow:
        clause = devices + "not allowed by " + std::string(model::kRuleGpuUuids);
        break;
      case Rule::kUuidExclude:
        clause = devices + "excluded by " + std::string(model::kRuleGpuUuidsExclude);
        break;
      case Rule::kAdminExcluded:
        clause = devices + "taken out of the pool by the administrator (node annotation " +
                 std::string(model::kRuleNodeExcludedDevices) + ")";
        break;
      case Rule::kSpreadKey:
        clause = devices + (n == 1 ? "holds" : "hold") + " a pod with the same " + std::string(model::kRuleSpreadKey) +
                 " \"" + *demand.spread_key + "\"";
        break;
      case Rule::kCeilingBound:
        clause = devices + "would hold more than " + std::to_string(options.ceiling_overcommit_pct) + " % of " +
                 (n == 1 ? "its" : "their") + " memory in ceilings with this pod's " + std::to_string(demand.ceiling) +
                 " MiB " + std::string(model::kRuleGpuMemoryLimit);
        break;
      default:
        break;
    }
    out += (out.empty() ? "" : ", ") + clause;
  }
  return out;
}

Demand DemandOfSpec(const TypicalSpec& s) {
  Demand d;
  d.count = s.device_count;
  d.mem = s.mem_per_device_mib;
  d.compute = s.compute_pct;
  d.kind = s.device_kind;
  d.mig_profile = &s.mig_profile;
  d.models = &s.gpu_models;
  return d;
}

Demand DemandOfContainer(const PodRequest& pod, const ContainerRequest& c) {
  Demand d;
  d.count = c.device_count;
  d.mem = c.mem_per_device_mib;
  d.compute = c.compute_pct;
  d.ceiling = c.mem_limit_per_device_mib;
  d.kind = pod.device_kind;
  d.mig_profile = &pod.mig_profile;
  d.models = &pod.gpu_models;
  d.hard_isolation = pod.hard_isolation;
  d.uuids = &pod.gpu_uuids;
  d.excluded_uuids = &pod.excluded_gpu_uuids;
  d.excluded_models = &pod.excluded_gpu_models;
  d.spread_key = &pod.spread_key;
  d.pod_uid = &pod.uid;
  return d;
}

std::string DescribeSort(const Demand& d) {
  std::string out;
  if (d.mig_profile != nullptr && !d.mig_profile->empty()) {
    out = "MIG profile " + *d.mig_profile;
  } else if (d.kind == DeviceKindPreference::kGpu) {
    out = "device kind gpu";
  } else if (d.kind == DeviceKindPreference::kMig) {
    out = "device kind mig";
  } else {
    out = "any device";
  }
  if (d.models != nullptr && !d.models->empty()) {
    out += ", model ";
    for (size_t i = 0; i < d.models->size(); ++i) out += (i ? "|" : "") + (*d.models)[i];
  }
  if (d.hard_isolation) out += d.compute > 0 ? ", hard isolation of memory and compute" : ", hard isolation";
  return out;
}

}  // namespace gpupack::placement

#include "api/allocation.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "api/annotations.h"

namespace gpupack::api {

namespace {

using nlohmann::json;

Status Bad(const std::string& where, const std::string& what) {
  return Status::InvalidArgument("gpupack.io/allocation: " + where + ": " + what);
}

// Reads an optional field of the given JSON type; absent or null leaves `out` unchanged.
template <typename T>
Status ReadField(const json& obj, const char* key, const std::string& where, T& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return Bad(where + "." + key, "must be a string");
    out = it->template get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return Bad(where + "." + key, "must be a boolean");
    out = it->template get<bool>();
  } else {
    if (!it->is_number_integer()) return Bad(where + "." + key, "must be an integer");
    out = it->template get<T>();
    if (out < 0) return Bad(where + "." + key, "must not be negative");
  }
  return Status::Ok();
}

}  // namespace

std::string EncodeAllocation(const Allocation& allocation) {
  // ordered_json keeps the documented key order, so equal allocations encode to equal strings
  // that read like docs/annotations.md's example.
  using ojson = nlohmann::ordered_json;
  ojson containers = ojson::array();
  for (const ContainerAllocation& c : allocation.containers) {
    ojson devices = ojson::array();
    for (const AllocatedDevice& d : c.devices) {
      ojson dj = {{"uuid", d.uuid}, {"index", d.index}, {"memMiB", d.mem_mib}};
      if (d.limit_mib > d.mem_mib) dj["limitMiB"] = d.limit_mib;
      if (d.compute_pct != kComputeNotRecorded) dj["computePct"] = d.compute_pct;
      if (!d.parent_uuid.empty()) dj["parent"] = d.parent_uuid;
      if (!d.profile.empty()) dj["profile"] = d.profile;
      devices.push_back(std::move(dj));
    }
    ojson cj = {{"name", c.name}, {"index", c.index}};
    if (c.init) cj["init"] = true;
    if (c.exclusive) cj["exclusive"] = true;
    if (c.within_pod) cj["withinPod"] = true;
    cj["devices"] = std::move(devices);
    containers.push_back(std::move(cj));
  }
  ojson doc = {{"v", kAllocationVersion}, {"node", allocation.node}, {"containers", std::move(containers)}};
  if (!allocation.spread_key.empty()) doc["spreadKey"] = allocation.spread_key;
  if (allocation.mps_client_priority != kMpsClientPriorityNormal)
    doc["mpsClientPriority"] = allocation.mps_client_priority;
  return doc.dump();
}

StatusOr<Allocation> DecodeAllocation(std::string_view text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Bad("document", "not valid JSON");
  if (!doc.is_object()) return Bad("document", "must be a JSON object");
  auto v = doc.find("v");
  if (v == doc.end() || !v->is_number_integer()) return Bad("v", "missing or not an integer");
  if (v->get<int64_t>() != kAllocationVersion) {
    return Bad("v", "unsupported version " + v->dump() + " (this build reads 1)");
  }
  Allocation out;
  GPUPACK_RETURN_IF_ERROR(ReadField(doc, "node", "document", out.node));
  if (out.node.empty()) return Bad("node", "missing or empty");
  GPUPACK_RETURN_IF_ERROR(ReadField(doc, "spreadKey", "document", out.spread_key));
  GPUPACK_RETURN_IF_ERROR(ReadField(doc, "mpsClientPriority", "document", out.mps_client_priority));
  if (out.mps_client_priority > kMpsClientPriorityBelowNormal) return Bad("mpsClientPriority", "must be 0 or 1");
  auto cs = doc.find("containers");
  if (cs == doc.end() || !cs->is_array()) return Bad("containers", "missing or not an array");
  for (size_t i = 0; i < cs->size(); ++i) {
    const json& cj = (*cs)[i];
    const std::string where = "containers[" + std::to_string(i) + "]";
    if (!cj.is_object()) return Bad(where, "must be an object");
    ContainerAllocation c;
    GPUPACK_RETURN_IF_ERROR(ReadField(cj, "name", where, c.name));
    GPUPACK_RETURN_IF_ERROR(ReadField(cj, "index", where, c.index));
    GPUPACK_RETURN_IF_ERROR(ReadField(cj, "init", where, c.init));
    GPUPACK_RETURN_IF_ERROR(ReadField(cj, "exclusive", where, c.exclusive));
    GPUPACK_RETURN_IF_ERROR(ReadField(cj, "withinPod", where, c.within_pod));
    auto ds = cj.find("devices");
    if (ds == cj.end() || !ds->is_array()) return Bad(where + ".devices", "missing or not an array");
    for (size_t j = 0; j < ds->size(); ++j) {
      const json& dj = (*ds)[j];
      const std::string dwhere = where + ".devices[" + std::to_string(j) + "]";
      if (!dj.is_object()) return Bad(dwhere, "must be an object");
      AllocatedDevice d;
      GPUPACK_RETURN_IF_ERROR(ReadField(dj, "uuid", dwhere, d.uuid));
      if (d.uuid.empty()) return Bad(dwhere + ".uuid", "missing or empty");
      GPUPACK_RETURN_IF_ERROR(ReadField(dj, "index", dwhere, d.index));
      GPUPACK_RETURN_IF_ERROR(ReadField(dj, "memMiB", dwhere, d.mem_mib));
      GPUPACK_RETURN_IF_ERROR(ReadField(dj, "limitMiB", dwhere, d.limit_mib));
      if (d.limit_mib != 0 && d.limit_mib < d.mem_mib) {
        return Bad(dwhere + ".limitMiB", "must not be below memMiB (the ceiling is at least the guaranteed amount)");
      }
      GPUPACK_RETURN_IF_ERROR(ReadField(dj, "computePct", dwhere, d.compute_pct));
      if (d.compute_pct > model::kDeviceComputePct) return Bad(dwhere + ".computePct", "must be at most 100");
      GPUPACK_RETURN_IF_ERROR(ReadField(dj, "parent", dwhere, d.parent_uuid));
      GPUPACK_RETURN_IF_ERROR(ReadField(dj, "profile", dwhere, d.profile));
      c.devices.push_back(std::move(d));
    }
    // The index keys the container's env annotations (c<i>-*, i<i>-*): two entries on one index
    // would hand one container the other's devices and cap. A missing index reads as 0, so this
    // is also what a multi-container allocation without indexes hits.
    // The node-side injection finds a container by its name (unique in a pod, init containers
    // included): two entries of one name would leave which devices it gets to their order.
    for (size_t k = 0; k < out.containers.size(); ++k) {
      if (out.containers[k].index == c.index && out.containers[k].init == c.init) {
        return Bad(where + ".index", std::string(c.init ? "init" : "app") + " container index " +
                                         std::to_string(c.index) + " appears twice (also containers[" +
                                         std::to_string(k) + "]); each container needs its own index");
      }
      if (!c.name.empty() && out.containers[k].name == c.name) {
        return Bad(where + ".name", "container \"" + c.name + "\" appears twice (also containers[" + std::to_string(k) +
                                        "]); container names are unique in a pod");
      }
    }
    out.containers.push_back(std::move(c));
  }
  return out;
}

std::map<std::string, std::string> AllocationAnnotations(const Allocation& allocation, double request_ratio) {
  std::map<std::string, std::string> out;
  out[std::string(kAnnotationAllocation)] = EncodeAllocation(allocation);
  for (const ContainerAllocation& c : allocation.containers) {
    if (c.devices.empty()) continue;
    std::string visible;
    std::string mps;
    for (size_t i = 0; i < c.devices.size(); ++i) {
      if (i > 0) {
        visible += ',';
        mps += ',';
      }
      visible += c.devices[i].uuid;
      mps += std::to_string(i) + "=" + std::to_string(HardLimitMiB(c.devices[i])) + "M";
    }
    // Every device of a container carries the same cap and ceiling (memory is split evenly,
    // docs/annotations.md).
    const AllocatedDevice& first = c.devices.front();
    const model::MiB limit = HardLimitMiB(first);
    const model::MiB request =
        limit > first.mem_mib
            ? first.mem_mib
            : std::max<model::MiB>(1, static_cast<model::MiB>(std::floor(static_cast<double>(limit) * request_ratio)));
    out[ContainerAnnotationKey(c.init, c.index, ContainerEnvKey::kVisibleDevices)] = visible;
    out[ContainerAnnotationKey(c.init, c.index, ContainerEnvKey::kMemoryLimitMiB)] = std::to_string(limit);
    out[ContainerAnnotationKey(c.init, c.index, ContainerEnvKey::kMemoryRequestMiB)] =
        std::to_string(std::min(request, limit));
    out[ContainerAnnotationKey(c.init, c.index, ContainerEnvKey::kMpsMemoryLimit)] = mps;
    out[ContainerAnnotationKey(c.init, c.index, ContainerEnvKey::kMpsActiveThreadPercentage)] =
        std::to_string(ActiveThreadPercentage(c));
    out[ContainerAnnotationKey(c.init, c.index, ContainerEnvKey::kMpsClientPriority)] =
        std::to_string(allocation.mps_client_priority);
  }
  return out;
}

int MpsClientPriorityOf(int64_t pod_priority) {
  return pod_priority < 0 ? kMpsClientPriorityBelowNormal : kMpsClientPriorityNormal;
}

int ActiveThreadPercentage(const ContainerAllocation& c) {
  int least = model::kDeviceComputePct;
  for (const AllocatedDevice& d : c.devices) {
    if (d.compute_pct != kComputeNotRecorded) least = std::min(least, d.compute_pct);
  }
  return std::max(1, least);
}

model::MiB HardLimitMiB(const AllocatedDevice& d) { return std::max(d.limit_mib, d.mem_mib); }

model::MiB SoftLimitMiB(model::MiB request_mib, const AllocatedDevice& d) {
  return request_mib >= 1 && request_mib <= HardLimitMiB(d) ? request_mib : d.mem_mib;
}

}  // namespace gpupack::api

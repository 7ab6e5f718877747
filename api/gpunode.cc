#include "api/gpunode.h"

#include <algorithm>
#include <cstdio>

#include "api/annotations.h"
#include "common/rfc3339.h"

namespace gpupack::api {
namespace {

using Json = nlohmann::json;

// Field readers: absent keys keep the default; present keys must have the right type.
Status ReadString(const Json& obj, const char* key, const std::string& where, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return Status::InvalidArgument(where + "." + key + ": expected a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

Status ReadInt(const Json& obj, const char* key, const std::string& where, int64_t* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer()) return Status::InvalidArgument(where + "." + key + ": expected an integer");
  *out = it->get<int64_t>();
  return Status::Ok();
}

Status ReadInt32(const Json& obj, const char* key, const std::string& where, int* out) {
  int64_t v = *out;
  GPUPACK_RETURN_IF_ERROR(ReadInt(obj, key, where, &v));
  if (v < -1 || v > 1'000'000'000) return Status::InvalidArgument(where + "." + key + ": out of range");
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status ReadMiB(const Json& obj, const char* key, const std::string& where, model::MiB* out) {
  GPUPACK_RETURN_IF_ERROR(ReadInt(obj, key, where, out));
  if (*out < 0) return Status::InvalidArgument(where + "." + key + ": negative memory");
  return Status::Ok();
}

Status ReadBool(const Json& obj, const char* key, const std::string& where, bool* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return Status::InvalidArgument(where + "." + key + ": expected true or false");
  *out = it->get<bool>();
  return Status::Ok();
}

// Calls `each(element, "where.key[i]")` for every element of an optional array.
template <typename F>
Status ForEach(const Json& obj, const char* key, const std::string& where, F each) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return Status::InvalidArgument(where + "." + key + ": expected a list");
  for (size_t i = 0; i < it->size(); ++i) {
    std::string at = where + "." + key + "[" + std::to_string(i) + "]";
    if (!(*it)[i].is_object()) return Status::InvalidArgument(at + ": expected an object");
    GPUPACK_RETURN_IF_ERROR(each((*it)[i], at));
  }
  return Status::Ok();
}

Status ReadComputeEnforcement(const Json& obj, const std::string& where, std::string* out) {
  GPUPACK_RETURN_IF_ERROR(ReadString(obj, "computeEnforcement", where, out));
  if (*out != kComputeEnforcementMpsNamespace && *out != kComputeEnforcementMpsClient &&
      *out != kComputeEnforcementNone) {
    return Status::InvalidArgument(where + ".computeEnforcement: unknown \"" + *out +
                                   "\" (want mps-namespace, mps-client or none)");
  }
  return Status::Ok();
}

Status RequireUuid(const std::string& uuid, const std::string& where) {
  if (uuid.empty()) return Status::InvalidArgument(where + ".uuid: missing");
  return Status::Ok();
}

Json MigToJson(const GpuNodeMigInstance& m) {
  Json j = {{"uuid", m.uuid},
            {"profile", m.profile},
            {"memoryMiB", m.memory_mib},
            {"usedMiB", m.used_mib},
            {"gpuInstanceId", m.gpu_instance_id}};
  if (m.placement_start >= 0) j["placement"] = {{"start", m.placement_start}, {"size", m.placement_size}};
  if (m.excluded) j["excluded"] = true;
  j["computeEnforcement"] = m.compute_enforcement;
  return j;
}

Status MigFromJson(const Json& j, const std::string& where, GpuNodeMigInstance* m) {
  GPUPACK_RETURN_IF_ERROR(ReadString(j, "uuid", where, &m->uuid));
  GPUPACK_RETURN_IF_ERROR(RequireUuid(m->uuid, where));
  GPUPACK_RETURN_IF_ERROR(ReadString(j, "profile", where, &m->profile));
  GPUPACK_RETURN_IF_ERROR(ReadMiB(j, "memoryMiB", where, &m->memory_mib));
  GPUPACK_RETURN_IF_ERROR(ReadMiB(j, "usedMiB", where, &m->used_mib));
  GPUPACK_RETURN_IF_ERROR(ReadInt32(j, "gpuInstanceId", where, &m->gpu_instance_id));
  GPUPACK_RETURN_IF_ERROR(ReadBool(j, "excluded", where, &m->excluded));
  GPUPACK_RETURN_IF_ERROR(ReadComputeEnforcement(j, where, &m->compute_enforcement));
  auto p = j.find("placement");
  if (p != j.end() && !p->is_null()) {
    if (!p->is_object()) return Status::InvalidArgument(where + ".placement: expected an object");
    GPUPACK_RETURN_IF_ERROR(ReadInt32(*p, "start", where + ".placement", &m->placement_start));
    GPUPACK_RETURN_IF_ERROR(ReadInt32(*p, "size", where + ".placement", &m->placement_size));
  }
  return Status::Ok();
}

Status DeviceFromJson(const Json& j, const std::string& where, GpuNodeDevice* d) {
  GPUPACK_RETURN_IF_ERROR(ReadString(j, "uuid", where, &d->uuid));
  GPUPACK_RETURN_IF_ERROR(RequireUuid(d->uuid, where));
  GPUPACK_RETURN_IF_ERROR(ReadInt32(j, "index", where, &d->index));
  GPUPACK_RETURN_IF_ERROR(ReadString(j, "model", where, &d->model));
  GPUPACK_RETURN_IF_ERROR(ReadMiB(j, "memoryMiB", where, &d->memory_mib));
  GPUPACK_RETURN_IF_ERROR(ReadMiB(j, "usedMiB", where, &d->used_mib));
  GPUPACK_RETURN_IF_ERROR(ReadMiB(j, "allocatedMiB", where, &d->allocated_mib));
  GPUPACK_RETURN_IF_ERROR(ReadBool(j, "healthy", where, &d->healthy));
  GPUPACK_RETURN_IF_ERROR(ReadBool(j, "migEnabled", where, &d->mig_enabled));
  GPUPACK_RETURN_IF_ERROR(ReadBool(j, "excluded", where, &d->excluded));
  GPUPACK_RETURN_IF_ERROR(ReadComputeEnforcement(j, where, &d->compute_enforcement));
  GPUPACK_RETURN_IF_ERROR(ReadInt32(j, "allocatedComputePct", where, &d->allocated_compute_pct));
  GPUPACK_RETURN_IF_ERROR(ReadInt32(j, "smUtilPct", where, &d->sm_util_pct));
  return ForEach(j, "migInstances", where, [&](const Json& m, const std::string& at) {
    GpuNodeMigInstance mig;
    GPUPACK_RETURN_IF_ERROR(MigFromJson(m, at, &mig));
    d->mig_instances.push_back(std::move(mig));
    return Status::Ok();
  });
}

Json UsageToJson(const GpuNodeContainerUsage& u) {
  return Json{{"podUID", u.pod_uid},
              {"pod", u.pod},
              {"container", u.container},
              {"workloadKind", u.workload_kind},
              {"workloadName", u.workload_name},
              {"devices", u.devices},
              {"deviceMemoryMiB", u.device_memory_mib},
              {"capMiB", u.cap_mib},
              {"peakMiB", u.peak_mib},
              {"p95MiB", u.p95_mib},
              {"p99MiB", u.p99_mib},
              {"samples", u.samples},
              {"since", FormatRfc3339(u.since)}};
}

Status UsageFromJson(const Json& j, const std::string& at, GpuNodeContainerUsage* u) {
  GPUPACK_RETURN_IF_ERROR(ReadString(j, "podUID", at, &u->pod_uid));
  GPUPACK_RETURN_IF_ERROR(ReadString(j, "pod", at, &u->pod));
  GPUPACK_RETURN_IF_ERROR(ReadString(j, "container", at, &u->container));
  GPUPACK_RETURN_IF_ERROR(ReadString(j, "workloadKind", at, &u->workload_kind));
  GPUPACK_RETURN_IF_ERROR(ReadString(j, "workloadName", at, &u->workload_name));
  GPUPACK_RETURN_IF_ERROR(ReadInt32(j, "devices", at, &u->devices));
  GPUPACK_RETURN_IF_ERROR(ReadMiB(j, "deviceMemoryMiB", at, &u->device_memory_mib));
  GPUPACK_RETURN_IF_ERROR(ReadMiB(j, "capMiB", at, &u->cap_mib));
  GPUPACK_RETURN_IF_ERROR(ReadMiB(j, "peakMiB", at, &u->peak_mib));
  GPUPACK_RETURN_IF_ERROR(ReadMiB(j, "p95MiB", at, &u->p95_mib));
  GPUPACK_RETURN_IF_ERROR(ReadMiB(j, "p99MiB", at, &u->p99_mib));
  GPUPACK_RETURN_IF_ERROR(ReadInt(j, "samples", at, &u->samples));
  std::string since;
  GPUPACK_RETURN_IF_ERROR(ReadString(j, "since", at, &since));
  if (!since.empty()) {
    auto t = ParseRfc3339(since);
    if (!t.ok()) return t.status().WithContext(at + ".since");
    u->since = *t;
  }
  return Status::Ok();
}

}  // namespace

nlohmann::json GpuNodeStatusToJson(const GpuNodeStatus& status) {
  Json devices = Json::array();
  model::MiB total = 0, allocated = 0, used = 0;
  int excluded = 0;
  for (const GpuNodeDevice& d : status.devices) {
    Json migs = Json::array();
    for (const GpuNodeMigInstance& m : d.mig_instances) {
      migs.push_back(MigToJson(m));
      excluded += m.excluded ? 1 : 0;
    }
    devices.push_back({{"uuid", d.uuid},
                       {"index", d.index},
                       {"model", d.model},
                       {"memoryMiB", d.memory_mib},
                       {"usedMiB", d.used_mib},
                       {"allocatedMiB", d.allocated_mib},
                       {"healthy", d.healthy},
                       {"migEnabled", d.mig_enabled},
                       {"migInstances", std::move(migs)},
                       {"computeEnforcement", d.compute_enforcement},
                       {"allocatedComputePct", d.allocated_compute_pct}});
    if (d.sm_util_pct >= 0) devices.back()["smUtilPct"] = d.sm_util_pct;
    if (d.excluded) {
      devices.back()["excluded"] = true;
      excluded += d.mig_enabled ? 0 : 1;
    }
    total += d.memory_mib;
    allocated += d.allocated_mib;
    used += d.used_mib;
  }
  Json processes = Json::array();
  for (const GpuNodeProcess& p : status.processes) {
    processes.push_back({{"pid", p.pid},
                         {"device", p.device},
                         {"usedMiB", p.used_mib},
                         {"podUID", p.pod_uid},
                         {"pod", p.pod},
                         {"container", p.container},
                         {"containerID", p.container_id}});
    if (p.sm_util_pct >= 0) processes.back()["smUtilPct"] = p.sm_util_pct;
  }
  Json audit = Json::array();
  for (const GpuNodeAuditFinding& a : status.audit) {
    audit.push_back({{"kind", a.kind},
                     {"device", a.device},
                     {"podUID", a.pod_uid},
                     {"pod", a.pod},
                     {"container", a.container},
                     {"pid", a.pid},
                     {"usedMiB", a.used_mib},
                     {"capMiB", a.cap_mib},
                     {"message", a.message}});
    if (a.kind == kAuditOverCompute) {
      audit.back()["usedComputePct"] = a.used_compute_pct;
      audit.back()["computePct"] = a.compute_pct;
    }
  }
  Json conditions = Json::array();
  for (const GpuNodeCondition& c : status.conditions) {
    conditions.push_back({{"type", c.type},
                          {"status", c.status ? "True" : "False"},
                          {"reason", c.reason},
                          {"message", c.message},
                          {"lastTransitionTime", FormatRfc3339(c.last_transition_time)}});
  }
  Json out{{"devices", std::move(devices)},
           {"processes", std::move(processes)},
           {"conditions", std::move(conditions)},
           {"enforcement",
            {{"mode", status.enforcement.mode},
             {"driverVersion", status.enforcement.driver_version},
             {"cudaVersion", status.enforcement.cuda_version},
             {"reason", status.enforcement.reason},
             {"computeReason", status.enforcement.compute_reason}}},
           {"audit", std::move(audit)},
           {"gpus", status.devices.size()},
           {"memoryMiB", total},
           {"allocatedMiB", allocated},
           {"usedMiB", used},
           {"maxPodsPerDevice", status.max_pods_per_device},
           {"excludedGpus", excluded},
           {"heartbeatTime", FormatRfc3339(status.heartbeat_time)}};
  if (!status.usage.empty()) {
    Json usage = Json::array();
    for (const GpuNodeContainerUsage& u : status.usage) usage.push_back(UsageToJson(u));
    out["usage"] = std::move(usage);
  }
  return out;
}

StatusOr<GpuNodeStatus> GpuNodeStatusFromJson(const nlohmann::json& j) {
  const std::string where = "status";
  if (!j.is_object()) return Status::InvalidArgument("status: expected an object");
  GpuNodeStatus s;
  GPUPACK_RETURN_IF_ERROR(ForEach(j, "devices", where, [&](const Json& d, const std::string& at) {
    GpuNodeDevice device;
    GPUPACK_RETURN_IF_ERROR(DeviceFromJson(d, at, &device));
    s.devices.push_back(std::move(device));
    return Status::Ok();
  }));
  GPUPACK_RETURN_IF_ERROR(ForEach(j, "processes", where, [&](const Json& p, const std::string& at) {
    GpuNodeProcess proc;
    GPUPACK_RETURN_IF_ERROR(ReadInt(p, "pid", at, &proc.pid));
    GPUPACK_RETURN_IF_ERROR(ReadString(p, "device", at, &proc.device));
    GPUPACK_RETURN_IF_ERROR(ReadMiB(p, "usedMiB", at, &proc.used_mib));
    GPUPACK_RETURN_IF_ERROR(ReadInt32(p, "smUtilPct", at, &proc.sm_util_pct));
    GPUPACK_RETURN_IF_ERROR(ReadString(p, "podUID", at, &proc.pod_uid));
    GPUPACK_RETURN_IF_ERROR(ReadString(p, "pod", at, &proc.pod));
    GPUPACK_RETURN_IF_ERROR(ReadString(p, "container", at, &proc.container));
    GPUPACK_RETURN_IF_ERROR(ReadString(p, "containerID", at, &proc.container_id));
    s.processes.push_back(std::move(proc));
    return Status::Ok();
  }));
  auto e = j.find("enforcement");
  if (e != j.end() && !e->is_null()) {
    if (!e->is_object()) return Status::InvalidArgument("status.enforcement: expected an object");
    const std::string at = "status.enforcement";
    GPUPACK_RETURN_IF_ERROR(ReadString(*e, "mode", at, &s.enforcement.mode));
    GPUPACK_RETURN_IF_ERROR(ReadString(*e, "driverVersion", at, &s.enforcement.driver_version));
    GPUPACK_RETURN_IF_ERROR(ReadString(*e, "cudaVersion", at, &s.enforcement.cuda_version));
    GPUPACK_RETURN_IF_ERROR(ReadString(*e, "reason", at, &s.enforcement.reason));
    GPUPACK_RETURN_IF_ERROR(ReadString(*e, "computeReason", at, &s.enforcement.compute_reason));
    const std::string& m = s.enforcement.mode;
    if (m != kEnforcementCgroupDmem && m != kEnforcementCgroupMisc && m != kEnforcementMps && m != kEnforcementNone) {
      return Status::InvalidArgument("status.enforcement.mode: unknown mode \"" + m +
                                     "\" (want cgroup-dmem, cgroup-misc, mps or none)");
    }
  }
  GPUPACK_RETURN_IF_ERROR(ForEach(j, "audit", where, [&](const Json& a, const std::string& at) {
    GpuNodeAuditFinding f;
    GPUPACK_RETURN_IF_ERROR(ReadString(a, "kind", at, &f.kind));
    GPUPACK_RETURN_IF_ERROR(ReadString(a, "device", at, &f.device));
    GPUPACK_RETURN_IF_ERROR(ReadString(a, "podUID", at, &f.pod_uid));
    GPUPACK_RETURN_IF_ERROR(ReadString(a, "pod", at, &f.pod));
    GPUPACK_RETURN_IF_ERROR(ReadString(a, "container", at, &f.container));
    GPUPACK_RETURN_IF_ERROR(ReadInt(a, "pid", at, &f.pid));
    GPUPACK_RETURN_IF_ERROR(ReadMiB(a, "usedMiB", at, &f.used_mib));
    GPUPACK_RETURN_IF_ERROR(ReadMiB(a, "capMiB", at, &f.cap_mib));
    GPUPACK_RETURN_IF_ERROR(ReadInt32(a, "usedComputePct", at, &f.used_compute_pct));
    GPUPACK_RETURN_IF_ERROR(ReadInt32(a, "computePct", at, &f.compute_pct));
    GPUPACK_RETURN_IF_ERROR(ReadString(a, "message", at, &f.message));
    s.audit.push_back(std::move(f));
    return Status::Ok();
  }));
  GPUPACK_RETURN_IF_ERROR(ForEach(j, "conditions", where, [&](const Json& c, const std::string& at) {
    GpuNodeCondition condition;
    std::string status, transition;
    GPUPACK_RETURN_IF_ERROR(ReadString(c, "type", at, &condition.type));
    GPUPACK_RETURN_IF_ERROR(ReadString(c, "status", at, &status));
    GPUPACK_RETURN_IF_ERROR(ReadString(c, "reason", at, &condition.reason));
    GPUPACK_RETURN_IF_ERROR(ReadString(c, "message", at, &condition.message));
    GPUPACK_RETURN_IF_ERROR(ReadString(c, "lastTransitionTime", at, &transition));
    if (status != "True" && status != "False" && status != "Unknown") {
      return Status::InvalidArgument(at + ".status: expected True, False or Unknown");
    }
    condition.status = status == "True";
    if (!transition.empty()) {
      auto t = ParseRfc3339(transition);
      if (!t.ok()) return t.status().WithContext(at + ".lastTransitionTime");
      condition.last_transition_time = *t;
    }
    s.conditions.push_back(std::move(condition));
    return Status::Ok();
  }));
  GPUPACK_ASSIGN_OR_RETURN(s.usage, GpuNodeUsageFromJson(j));
  int64_t max_pods = 0;
  GPUPACK_RETURN_IF_ERROR(ReadInt(j, "maxPodsPerDevice", where, &max_pods));
  if (max_pods < 0 || max_pods > 1'000'000) return Status::InvalidArgument("status.maxPodsPerDevice: out of range");
  s.max_pods_per_device = static_cast<int>(max_pods);
  std::string heartbeat;
  GPUPACK_RETURN_IF_ERROR(ReadString(j, "heartbeatTime", where, &heartbeat));
  if (!heartbeat.empty()) {
    auto t = ParseRfc3339(heartbeat);
    if (!t.ok()) return t.status().WithContext("status.heartbeatTime");
    s.heartbeat_time = *t;
  }
  return s;
}

StatusOr<std::vector<GpuNodeContainerUsage>> GpuNodeUsageFromJson(const nlohmann::json& status) {
  std::vector<GpuNodeContainerUsage> out;
  if (!status.is_object()) return Status::InvalidArgument("status: expected an object");
  GPUPACK_RETURN_IF_ERROR(ForEach(status, "usage", "status", [&](const Json& u, const std::string& at) {
    GpuNodeContainerUsage usage;
    GPUPACK_RETURN_IF_ERROR(UsageFromJson(u, at, &usage));
    out.push_back(std::move(usage));
    return Status::Ok();
  }));
  return out;
}

const GpuNodeCondition* FindCondition(const std::vector<GpuNodeCondition>& conditions, std::string_view type) {
  for (const GpuNodeCondition& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

nlohmann::json GpuNodeObject(std::string_view node_name, const GpuNodeStatus& status) {
  return Json{{"apiVersion", std::string(kGpuNodeGroup) + "/" + std::string(kGpuNodeVersion)},
              {"kind", kGpuNodeKind},
              {"metadata", {{"name", node_name}}},
              {"status", GpuNodeStatusToJson(status)}};
}

StatusOr<std::vector<std::string>> ExcludedDevicesOfNode(const nlohmann::json& node) {
  std::vector<std::string> out;
  const std::string annotation(kNodeAnnotationExcludedDevices);
  if (!node.is_object() || !node.contains("metadata") || !node["metadata"].is_object()) return out;
  const Json& meta = node["metadata"];
  auto ann = meta.find("annotations");
  if (ann == meta.end() || !ann->is_object()) return out;
  auto it = ann->find(annotation);
  if (it == ann->end() || it->is_null()) return out;
  if (!it->is_string()) return Status::InvalidArgument("node annotation " + annotation + " must be a string");
  const std::string text = it->get<std::string>();
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    part.erase(0, part.find_first_not_of(" \t"));
    part.erase(part.find_last_not_of(" \t") + 1);
    if (part.empty()) {
      return Status::InvalidArgument("node annotation " + annotation + ": \"" + text + "\" has an empty UUID");
    }
    out.push_back(std::move(part));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void MarkExcluded(GpuNodeStatus& status, const std::vector<std::string>& uuids) {
  auto named = [&](const std::string& uuid) { return std::find(uuids.begin(), uuids.end(), uuid) != uuids.end(); };
  for (GpuNodeDevice& d : status.devices) {
    d.excluded = named(d.uuid);
    for (GpuNodeMigInstance& m : d.mig_instances) m.excluded = d.excluded || named(m.uuid);
  }
}

}  // namespace gpupack::api

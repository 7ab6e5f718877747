#include "translate/node_from_gpunode.h"

#include <string>
#include <utility>

#include "api/gpunode.h"

namespace gpupack::translate {

using Json = nlohmann::json;

namespace {

// What a whole GPU and each of its MIG instances share: the GPU's index, model and health.
model::Device DeviceOf(const api::GpuNodeDevice& gpu, const std::string& uuid, model::MiB capacity_mib,
                       model::MiB used_mib, bool excluded, bool hard_isolation) {
  model::Device dev;
  dev.uuid = uuid;
  dev.index = gpu.index;
  dev.model = gpu.model;
  dev.kind = model::DeviceKind::kGpu;
  dev.capacity_mib = capacity_mib;
  dev.used_mib = used_mib;
  dev.healthy = gpu.healthy;
  dev.excluded = excluded;
  dev.hard_isolation = hard_isolation;
  return dev;
}

}  // namespace

StatusOr<model::Node> NodeFromGpuNode(const nlohmann::json& gpunode, std::chrono::seconds heartbeat_ttl,
                                      const Clock& clock) {
  if (!gpunode.is_object()) return Status::InvalidArgument("GPUNode: expected an object");
  const Json* name = nullptr;
  if (auto m = gpunode.find("metadata"); m != gpunode.end() && m->is_object()) {
    if (auto n = m->find("name"); n != m->end() && n->is_string()) name = &*n;
  }
  if (name == nullptr || name->get<std::string>().empty()) {
    return Status::InvalidArgument("GPUNode: metadata.name missing");
  }
  model::Node node;
  node.name = name->get<std::string>();
  api::GpuNodeStatus status;
  bool has_heartbeat = false;
  if (auto s = gpunode.find("status"); s != gpunode.end() && !s->is_null()) {
    auto parsed = api::GpuNodeStatusFromJson(*s);
    if (!parsed.ok()) return parsed.status().WithContext("GPUNode " + node.name);
    status = std::move(parsed).value();
    has_heartbeat = s->is_object() && s->contains("heartbeatTime") && (*s)["heartbeatTime"].is_string();
  }
  bool driver_caps =
      status.enforcement.mode == api::kEnforcementCgroupDmem || status.enforcement.mode == api::kEnforcementCgroupMisc;
  // The agent's doctor can know better than the mode (dmem not enabled on the pods' cgroups); an
  // agent that reports no conditions is taken at its mode.
  if (const api::GpuNodeCondition* memory = api::FindCondition(status.conditions, api::kConditionMemoryEnforced);
      memory != nullptr && !memory->status) {
    driver_caps = false;
    node.memory_unenforced_reason =
        std::string(api::kConditionMemoryEnforced) + " is False (" + memory->reason + "): " + memory->message;
  }
  for (const api::GpuNodeDevice& d : status.devices) {
    if (!d.mig_enabled) {
      node.devices.push_back(DeviceOf(d, d.uuid, d.memory_mib, d.used_mib, d.excluded, driver_caps));
      node.devices.back().hard_compute_isolation = d.compute_enforcement == api::kComputeEnforcementMpsNamespace;
      continue;
    }
    for (const api::GpuNodeMigInstance& m : d.mig_instances) {
      // A MIG instance is a hardware partition: hard isolation whatever the driver's caps.
      model::Device dev = DeviceOf(d, m.uuid, m.memory_mib, m.used_mib, d.excluded || m.excluded, true);
      dev.kind = model::DeviceKind::kMig;
      dev.parent_uuid = d.uuid;
      dev.mig_profile = m.profile;
      dev.gpu_instance_id = m.gpu_instance_id;
      dev.placement_start = m.placement_start;
      dev.placement_size = m.placement_size;
      node.devices.push_back(std::move(dev));
    }
  }
  if (!has_heartbeat) {
    node.stale_reason = "GPUNode has no heartbeat";
  } else {
    const auto age =
        std::chrono::duration_cast<std::chrono::seconds>(SaturatingElapsed(status.heartbeat_time, clock.Now()));
    if (age > heartbeat_ttl) {
      node.stale_reason = "GPUNode heartbeat " + std::to_string(age.count()) + "s old > TTL " +
                          std::to_string(heartbeat_ttl.count()) + "s";
    }
  }
  return node;
}

}  // namespace gpupack::translate

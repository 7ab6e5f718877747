#include "translate/allocation_ledger.h"

#include "common/status.h"

namespace gpupack::translate {

api::Allocation AllocationFromPlacement(const model::Node& node, const model::Placement& placement) {
  api::Allocation out;
  out.node = node.name;
  for (const model::ContainerPlacement& cp : placement.containers) {
    api::ContainerAllocation c;
    c.name = cp.container;
    c.index = cp.container_index;
    c.init = cp.init;
    c.exclusive = cp.exclusive;
    c.within_pod = cp.within_pod_devices;
    for (size_t i = 0; i < cp.device_slots.size(); ++i) {
      const int slot = cp.device_slots[i];
      GPUPACK_CHECK(slot >= 0 && static_cast<size_t>(slot) < node.devices.size());
      const model::Device& dev = node.devices[slot];
      api::AllocatedDevice d;
      d.uuid = dev.uuid;
      d.index = dev.index;
      d.mem_mib = cp.mem_per_device_mib;
      if (cp.mem_limit_per_device_mib > cp.mem_per_device_mib) d.limit_mib = cp.mem_limit_per_device_mib;
      d.compute_pct = model::ShareComputePct(cp, i, dev);
      if (dev.kind == model::DeviceKind::kMig) {
        d.parent_uuid = dev.parent_uuid;
        d.profile = dev.mig_profile;
      }
      c.devices.push_back(std::move(d));
    }
    out.containers.push_back(std::move(c));
  }
  return out;
}

std::vector<std::pair<std::string, model::DeviceShare>> AllocationShares(const api::Allocation& allocation,
                                                                         std::string_view pod_uid,
                                                                         std::string_view pod_key,
                                                                         const model::Node* node) {
  std::vector<std::pair<std::string, model::DeviceShare>> out;
  // An allocation that predates compute shares reserves its memory's share of the device.
  auto capacity = [&](const std::string& uuid) -> model::MiB {
    if (node == nullptr) return 0;
    for (const model::Device& d : node->devices) {
      if (d.uuid == uuid) return d.capacity_mib;
    }
    return 0;
  };
  for (const api::ContainerAllocation& c : allocation.containers) {
    if (c.within_pod) continue;
    for (const api::AllocatedDevice& d : c.devices) {
      model::DeviceShare share;
      share.pod_uid = std::string(pod_uid);
      share.pod_key = std::string(pod_key);
      share.container = c.name;
      share.mem_mib = d.mem_mib;
      share.mem_limit_mib = d.limit_mib;
      share.exclusive = c.exclusive;
      share.spread_key = allocation.spread_key;
      if (d.compute_pct != api::kComputeNotRecorded) {
        share.compute_pct = d.compute_pct;
      } else {
        share.compute_pct =
            c.exclusive ? model::kDeviceComputePct : model::ProportionalComputePct(d.mem_mib, capacity(d.uuid));
      }
      out.emplace_back(d.uuid, std::move(share));
    }
  }
  return out;
}

}  // namespace gpupack::translate

#include "placement/ledger.h"

#include <algorithm>
#include <array>
#include <string>

namespace gpupack::placement {

Status ApplyPlacement(Node& node, const PodRequest& pod, const Placement& placement, const PlacementOptions& options) {
  // Check everything first, so a failure leaves the node untouched.
  std::array<MiB, kMaxDevicesPerNode> add{};
  std::array<MiB, kMaxDevicesPerNode> add_ceiling{};  // Σ of the new shares' CeilingMiB
  std::array<int, kMaxDevicesPerNode> add_processes{};
  std::array<int, kMaxDevicesPerNode> add_compute{};
  std::array<bool, kMaxDevicesPerNode> excl{};
  const int n = static_cast<int>(node.devices.size());
  for (const auto& cp : placement.containers) {
    if (cp.within_pod_devices) continue;
    for (size_t i = 0; i < cp.device_slots.size(); ++i) {
      const int slot = cp.device_slots[i];
      if (slot < 0 || slot >= n || slot >= kMaxDevicesPerNode) {
        return Status::FailedPrecondition("placement names device slot " + std::to_string(slot) + " but node " +
                                          node.name + " has " + std::to_string(n) + " devices");
      }
      add[slot] += cp.mem_per_device_mib;
      add_ceiling[slot] += std::max(cp.mem_per_device_mib, cp.mem_limit_per_device_mib);
      ++add_processes[slot];
      add_compute[slot] += model::ShareComputePct(cp, i, node.devices[slot]);
      excl[slot] = excl[slot] || cp.exclusive;
    }
  }
  for (int g = 0; g < n && g < kMaxDevicesPerNode; ++g) {
    if (add[g] == 0 && !excl[g]) continue;
    const Device& d = node.devices[g];
    if (excl[g] && !d.shares.empty()) {
      return Status::FailedPrecondition("device " + d.uuid + " on " + node.name + " is no longer empty");
    }
    // DeviceFreeMiB and CeilingRoomMiB count one new process's overhead; each further one of
    // this placement on the device pays its own.
    const MiB more_overhead = static_cast<MiB>(std::max(0, add_processes[g] - 1)) * ProcessOverheadMiB(d, options);
    MiB free = DeviceFreeMiB(d, options);
    MiB need = excl[g] ? 0 : add[g] + more_overhead;
    if (!excl[g] && need > free) {
      return Status::FailedPrecondition("device " + d.uuid + " on " + node.name + " has " + std::to_string(free) +
                                        " MiB free, placement needs " + std::to_string(need) + " MiB");
    }
    if (!excl[g] && add_ceiling[g] > add[g] && add_ceiling[g] + more_overhead > CeilingRoomMiB(d, options)) {
      return Status::FailedPrecondition("device " + d.uuid + " on " + node.name + " has room for " +
                                        std::to_string(std::max<MiB>(0, CeilingRoomMiB(d, options))) +
                                        " MiB of ceilings under the " + std::to_string(options.ceiling_overcommit_pct) +
                                        " % bound, placement needs " + std::to_string(add_ceiling[g]) + " MiB");
    }
    if (add_compute[g] > DeviceFreeComputePct(d)) {
      return Status::FailedPrecondition("device " + d.uuid + " on " + node.name + " has " +
                                        std::to_string(DeviceFreeComputePct(d)) + " % compute free, placement needs " +
                                        std::to_string(add_compute[g]) + " %");
    }
  }
  for (const auto& cp : placement.containers) {
    if (cp.within_pod_devices) continue;
    for (size_t i = 0; i < cp.device_slots.size(); ++i) {
      const int slot = cp.device_slots[i];
      node.devices[slot].shares.push_back(
          DeviceShare{pod.uid, pod.Key(), cp.container, cp.mem_per_device_mib, cp.exclusive, pod.spread_key,
                      model::ShareComputePct(cp, i, node.devices[slot]), cp.mem_limit_per_device_mib});
    }
  }
  node.requested_cpu_milli += pod.cpu_milli;
  node.requested_memory_bytes += pod.memory_bytes;
  return Status::Ok();
}

int RemovePod(Node& node, std::string_view pod_uid) {
  int removed = 0;
  for (auto& d : node.devices) {
    auto it =
        std::remove_if(d.shares.begin(), d.shares.end(), [&](const DeviceShare& s) { return s.pod_uid == pod_uid; });
    removed += static_cast<int>(d.shares.end() - it);
    d.shares.erase(it, d.shares.end());
  }
  return removed;
}

Status CheckLedgerInvariant(const Node& node) {
  for (const auto& d : node.devices) {
    MiB caps = 0;
    int compute = 0;
    bool exclusive = false;
    for (const auto& s : d.shares) {
      caps += s.mem_mib;
      compute += s.compute_pct;
      exclusive = exclusive || s.exclusive;
    }
    if (compute > model::kDeviceComputePct) {
      return Status::Internal("device " + d.uuid + " on " + node.name + ": compute shares " + std::to_string(compute) +
                              " % exceed " + std::to_string(model::kDeviceComputePct) + " %");
    }
    if (caps > d.capacity_mib) {
      return Status::Internal("device " + d.uuid + " on " + node.name + ": caps " + std::to_string(caps) +
                              " MiB exceed capacity " + std::to_string(d.capacity_mib) + " MiB");
    }
    if (exclusive && d.shares.size() > 1) {
      return Status::Internal("device " + d.uuid + " on " + node.name + " is held exclusively but has " +
                              std::to_string(d.shares.size()) + " shares");
    }
  }
  return Status::Ok();
}

}  // namespace gpupack::placement

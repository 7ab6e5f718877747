#include "scheduler/core/reservation.h"

#include <algorithm>

#include "scheduler/core/placement.h"

namespace gpupack::core {
namespace {

MiB UsableCapacity(const Device& d, MiB reserve_mib_per_device) {
  return std::max<MiB>(0, d.capacity_mib - reserve_mib_per_device);
}

// What decides which shapes a node can host: its CPU and its devices' sorts and sizes. Nodes of
// one hardware type share a signature, so CanHost runs once per type, not once per node.
std::string HostSignature(const Node& node) {
  std::string key = std::to_string(node.cpu_milli);
  for (const Device& d : node.devices) {
    key += '|';
    key += d.model;
    key += static_cast<char>('a' + static_cast<int>(d.kind) * 4 + (d.healthy ? 2 : 0) + (d.hard_isolation ? 1 : 0));
    key += d.mig_profile;
    key += ':';
    key += std::to_string(d.capacity_mib);
  }
  return key;
}

}  // namespace

CapacityReservation::Builder::Builder(TypicalWorkload workload, const PlacementOptions& placement)
    : workload_(std::move(workload)),
      reserve_mib_per_device_(placement.reserve_mib_per_device),
      count_foreign_usage_(placement.count_foreign_usage) {
  if (workload_.specs.size() > static_cast<size_t>(kMaxTypicalSpecs)) workload_.specs.resize(kMaxTypicalSpecs);
}

void CapacityReservation::Builder::AddNode(const Node& node) {
  const PlacementOptions placement{reserve_mib_per_device_, count_foreign_usage_};
  double capacity = 0;
  double free = 0;
  for (const Device& d : node.devices) {
    if (!d.healthy) continue;
    const MiB usable = UsableCapacity(d, reserve_mib_per_device_);
    capacity += static_cast<double>(usable);
    free += static_cast<double>(DeviceFreeMiB(d, placement));
    ++devices_by_capacity_[usable];
  }
  auto [it, added] = type_of_.emplace(HostSignature(node), types_.size());
  if (added) {
    HostType type;
    for (size_t m = 0; m < workload_.specs.size(); ++m) {
      const TypicalSpec& spec = workload_.specs[m];
      if (spec.device_count > 0 && CanHost(node, spec, placement)) type.hosts |= uint64_t{1} << m;
    }
    types_.push_back(type);
  }
  types_[it->second].capacity += capacity;
  types_[it->second].free += free;
}

CapacityReservation CapacityReservation::Builder::Build() && {
  CapacityReservation out;
  out.reserve_mib_per_device_ = reserve_mib_per_device_;
  out.count_foreign_usage_ = count_foreign_usage_;
  double total_capacity = 0;
  double total_free = 0;
  for (const HostType& t : types_) {
    total_capacity += t.capacity;
    total_free += t.free;
  }
  if (total_capacity <= 0 || total_free <= 0) return out;
  // Whole-device shapes take devices of whatever size their hosts have; the most common size
  // stands for them (on most clusters there is one).
  MiB common_capacity = 0;
  int64_t most = 0;
  for (const auto& [capacity, count] : devices_by_capacity_) {
    if (count > most || (count == most && capacity > common_capacity)) {
      most = count;
      common_capacity = capacity;
    }
  }

  const std::vector<TypicalSpec>& specs = workload_.specs;
  const int n = static_cast<int>(specs.size());
  std::vector<double> demand(n, 0.0);
  double total_demand = 0;
  for (int m = 0; m < n; ++m) {
    const TypicalSpec& s = specs[m];
    if (s.device_count == 0) continue;
    const MiB per_device = s.mem_per_device_mib > 0 ? s.mem_per_device_mib : common_capacity;
    demand[m] = s.weight * s.device_count * static_cast<double>(per_device);
    total_demand += demand[m];
  }
  if (total_demand <= 0) return out;

  // H_a ⊆ H_b  ⇔  every type that hosts a also hosts b. A shape no node can host is confined
  // nowhere (it fails wherever it goes), not to every set.
  uint64_t hosted = 0;
  for (const HostType& t : types_) hosted |= t.hosts;
  auto subset = [&](int a, int b) {
    if (!((hosted >> a) & 1)) return false;
    for (const HostType& t : types_) {
      if (((t.hosts >> a) & 1) && !((t.hosts >> b) & 1)) return false;
    }
    return true;
  };
  std::vector<double> tightness(n, 0.0);
  for (int m = 0; m < n; ++m) {
    if (demand[m] <= 0) continue;
    double capacity = 0;
    double free = 0;
    for (const HostType& t : types_) {
      if ((t.hosts >> m) & 1) {
        capacity += t.capacity;
        free += t.free;
      }
    }
    const double capacity_share = capacity / total_capacity;
    // No free host: the shape fails wherever it goes, and nothing is left to keep for it.
    if (free <= 0 || capacity_share > kMaxReservingCapacityShare) continue;
    double confined = 0;
    for (int other = 0; other < n; ++other) {
      if (demand[other] > 0 && subset(other, m)) confined += demand[other];
    }
    tightness[m] = (confined / total_demand) * total_free / free;
    out.reserving_.push_back(Reserving{specs[m], tightness[m], capacity_share});
  }
  std::stable_sort(out.reserving_.begin(), out.reserving_.end(),
                   [](const Reserving& a, const Reserving& b) { return a.tightness > b.tightness; });
  for (const auto& [signature, index] : type_of_) {
    double max_tightness = 0;
    for (int m = 0; m < n; ++m) {
      if ((types_[index].hosts >> m) & 1) max_tightness = std::max(max_tightness, tightness[m]);
    }
    out.tightness_by_type_.emplace(signature, max_tightness);
  }
  return out;
}

double CapacityReservation::Tightness(const Node& node) const {
  if (reserving_.empty()) return 0;
  auto it = tightness_by_type_.find(HostSignature(node));
  if (it != tightness_by_type_.end()) return it->second;
  // A node that joined after Build: reserving_ is tightest first, so the first shape it can
  // host gives its maximum.
  const PlacementOptions placement{reserve_mib_per_device_, count_foreign_usage_};
  for (const Reserving& r : reserving_) {
    if (CanHost(node, r.spec, placement)) return r.tightness;
  }
  return 0;
}

}  // namespace gpupack::core

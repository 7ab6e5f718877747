#include "placement/reservation.h"

#include <algorithm>
#include <map>

#include "placement/placement.h"

namespace gpupack::placement {
namespace {

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

// The device size held by the most devices (the larger on a tie); 0 without devices.
MiB MostCommonCapacity(const std::unordered_map<MiB, int64_t>& devices_by_capacity) {
  MiB common_capacity = 0;
  int64_t most = 0;
  for (const auto& [capacity, count] : devices_by_capacity) {
    if (count > most || (count == most && capacity > common_capacity)) {
      most = count;
      common_capacity = capacity;
    }
  }
  return common_capacity;
}

// Each shape's device memory demand, weight · devices · MiB per device (whole devices count as
// `common_capacity`); CPU-only shapes demand 0. Adds them up in `total_demand`.
std::vector<double> ShapeDemand(const std::vector<TypicalSpec>& specs, MiB common_capacity, double& total_demand) {
  const int n = static_cast<int>(specs.size());
  std::vector<double> demand(n, 0.0);
  for (int m = 0; m < n; ++m) {
    const TypicalSpec& s = specs[m];
    if (s.device_count == 0) continue;
    const MiB per_device = s.mem_per_device_mib > 0 ? s.mem_per_device_mib : common_capacity;
    demand[m] = s.weight * s.device_count * static_cast<double>(per_device);
    total_demand += demand[m];
  }
  return demand;
}

// H_a ⊆ H_b  ⇔  every type in a is in b (one flag per host type). A set with no type (shapes no
// node can host) is confined nowhere (they fail wherever they go), not inside every set.
bool HostSetWithin(const std::vector<bool>& a, const std::vector<bool>& b) {
  bool any = false;
  for (size_t t = 0; t < a.size(); ++t) {
    if (a[t] && !b[t]) return false;
    any = any || a[t];
  }
  return any;
}

}  // namespace

CapacityReservation::Builder::Builder(TypicalWorkload workload, const PlacementOptions& placement)
    : workload_(std::move(workload)), placement_(placement) {}

void CapacityReservation::Builder::AddNode(const Node& node) {
  const PlacementOptions& placement = placement_;
  double capacity = 0;
  double free = 0;
  for (const Device& d : node.devices) {
    if (!d.healthy) continue;
    const MiB usable = DeviceUsableMiB(d, placement);
    capacity += static_cast<double>(usable);
    free += static_cast<double>(DeviceFreeMiB(d, placement));
    ++devices_by_capacity_[usable];
  }
  auto [it, added] = type_of_.emplace(HostSignature(node), types_.size());
  if (added) {
    HostType type;
    type.hosts.resize(workload_.specs.size());
    for (size_t m = 0; m < workload_.specs.size(); ++m) {
      const TypicalSpec& spec = workload_.specs[m];
      type.hosts[m] = spec.device_count > 0 && CanHost(node, spec, placement);
    }
    types_.push_back(std::move(type));
  }
  types_[it->second].capacity += capacity;
  types_[it->second].free += free;
}

CapacityReservation CapacityReservation::Builder::Build() && {
  CapacityReservation out;
  out.placement_ = placement_;
  double total_capacity = 0;
  double total_free = 0;
  for (const HostType& t : types_) {
    total_capacity += t.capacity;
    total_free += t.free;
  }
  if (total_capacity <= 0 || total_free <= 0) return out;
  // Whole-device shapes take devices of whatever size their hosts have; the most common size
  // stands for them (on most clusters there is one).
  const MiB common_capacity = MostCommonCapacity(devices_by_capacity_);

  const std::vector<TypicalSpec>& specs = workload_.specs;
  const int n = static_cast<int>(specs.size());
  double total_demand = 0;
  const std::vector<double> demand = ShapeDemand(specs, common_capacity, total_demand);
  if (total_demand <= 0) return out;

  // Shapes with the same host set (the same node types can host them) are one set H for the
  // price: group them, so any number of shapes costs only as many subset tests as there are
  // distinct sets.
  struct HostSet {
    std::vector<bool> types;  // which of types_ host it
    double demand = 0;        // Σ demand of its shapes
    int heaviest = -1;        // the shape that names it in reserving()
  };
  std::vector<HostSet> sets;
  std::map<std::vector<bool>, size_t> set_of;
  for (int m = 0; m < n; ++m) {
    if (demand[m] <= 0) continue;
    std::vector<bool> key(types_.size());
    for (size_t t = 0; t < types_.size(); ++t) key[t] = types_[t].hosts[m];
    auto [it, added] = set_of.emplace(key, sets.size());
    if (added) sets.push_back(HostSet{std::move(key), 0, m});
    HostSet& set = sets[it->second];
    set.demand += demand[m];
    if (specs[m].weight > specs[set.heaviest].weight) set.heaviest = m;
  }
  std::vector<double> tightness(sets.size(), 0.0);
  for (size_t g = 0; g < sets.size(); ++g) {
    double capacity = 0;
    double free = 0;
    for (size_t t = 0; t < types_.size(); ++t) {
      if (sets[g].types[t]) {
        capacity += types_[t].capacity;
        free += types_[t].free;
      }
    }
    const double capacity_share = capacity / total_capacity;
    // No free host: the shapes fail wherever they go, and nothing is left to keep for them.
    if (free <= 0 || capacity_share > kMaxReservingCapacityShare) continue;
    double confined = 0;
    for (const HostSet& other : sets) {
      if (HostSetWithin(other.types, sets[g].types)) confined += other.demand;
    }
    tightness[g] = (confined / total_demand) * total_free / free;
    out.reserving_.push_back(Reserving{specs[sets[g].heaviest], tightness[g], capacity_share});
  }
  std::stable_sort(out.reserving_.begin(), out.reserving_.end(),
                   [](const Reserving& a, const Reserving& b) { return a.tightness > b.tightness; });
  for (const auto& [signature, index] : type_of_) {
    double max_tightness = 0;
    for (size_t g = 0; g < sets.size(); ++g) {
      if (sets[g].types[index]) max_tightness = std::max(max_tightness, tightness[g]);
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
  for (const Reserving& r : reserving_) {
    if (CanHost(node, r.spec, placement_)) return r.tightness;
  }
  return 0;
}

}  // namespace gpupack::placement

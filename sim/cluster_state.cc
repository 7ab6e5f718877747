#include "sim/cluster_state.h"

#include <algorithm>

#include "placement/placement.h"

namespace gpupack::sim {
namespace {

// The device's free memory with `caps` of caps on it (placement::DeviceFreeMiB without a reserve).
MiB FreeWithCaps(const SimDevice& dev, MiB caps) {
  return std::max<MiB>(0, dev.capacity - caps - std::max<MiB>(0, dev.used - caps));
}

bool SameType(const model::Device& a, const model::Device& b) {
  return a.model == b.model && a.kind == b.kind && a.mig_profile == b.mig_profile &&
         a.hard_isolation == b.hard_isolation;
}

}  // namespace

int ClusterState::InternConstraint(const ConstraintKey& key) {
  for (size_t i = 0; i < constraints_.size(); ++i) {
    if (constraints_[i] == key) return static_cast<int>(i);
  }
  std::vector<uint8_t> allowed(device_types_.size(), 0);
  for (size_t t = 0; t < device_types_.size(); ++t) {
    const model::Device& d = device_types_[t];
    bool ok = true;
    if (!key.profile.empty()) {
      ok = d.kind == model::DeviceKind::kMig && d.mig_profile == key.profile;
    } else if (key.kind == model::DeviceKindPreference::kGpu) {
      ok = d.kind == model::DeviceKind::kGpu;
    } else if (key.kind == model::DeviceKindPreference::kMig) {
      ok = d.kind == model::DeviceKind::kMig;
    }
    if (ok && key.hard && d.kind == model::DeviceKind::kGpu && !d.hard_isolation) ok = false;
    if (ok && !key.models.empty()) {
      ok = std::any_of(key.models.begin(), key.models.end(),
                       [&](const std::string& m) { return model::GpuModelMatches(m, d.model); });
    }
    allowed[t] = ok ? 1 : 0;
  }
  constraints_.push_back(key);
  allowed_.push_back(std::move(allowed));
  return static_cast<int>(constraints_.size()) - 1;
}

ClusterState::ClusterState(const std::vector<model::Node>& nodes, const placement::TypicalWorkload& typical) {
  const placement::PlacementOptions options;
  std::map<MiB, int> capacity_votes;
  nodes_.reserve(nodes.size());
  for (const model::Node& node : nodes) {
    SimNode sn;
    sn.name = node.name;
    sn.stale = !node.stale_reason.empty();
    if (node.cpu_milli >= 0) {
      sn.cpu_free = std::max<int64_t>(0, node.cpu_milli - node.requested_cpu_milli);
      max_node_cpu_ = std::max(max_node_cpu_, node.cpu_milli);
    }
    if (node.memory_bytes >= 0) sn.memory_free = std::max<int64_t>(0, node.memory_bytes - node.requested_memory_bytes);
    for (const model::Device& d : node.devices) {
      SimDevice sd;
      sd.capacity = d.capacity_mib;
      sd.free = placement::DeviceFreeMiB(d, options);
      sd.used = d.used_mib;
      for (const model::DeviceShare& share : d.shares) sd.caps += share.mem_mib;
      sd.shares = static_cast<int>(d.shares.size());
      sd.exclusive = !d.healthy || std::any_of(d.shares.begin(), d.shares.end(),
                                               [](const model::DeviceShare& s) { return s.exclusive; });
      sd.compute_free = placement::DeviceFreeComputePct(d);
      compute_capacity_ += model::kDeviceComputePct;
      compute_allocated_ += model::kDeviceComputePct - sd.compute_free;
      auto it = std::find_if(device_types_.begin(), device_types_.end(),
                             [&](const model::Device& t) { return SameType(t, d); });
      sd.type = static_cast<int>(it - device_types_.begin());
      if (it == device_types_.end()) device_types_.push_back(d);
      sn.total_free += sd.free;
      sn.capacity += sd.capacity;
      ++capacity_votes[d.capacity_mib];
      sn.devices.push_back(sd);
    }
    total_capacity_ += sn.capacity;
    total_free_ += sn.total_free;
    max_node_capacity_ = std::max(max_node_capacity_, sn.capacity);
    nodes_.push_back(std::move(sn));
  }
  if (max_node_cpu_ == 0) max_node_cpu_ = 1;
  if (max_node_capacity_ == 0) max_node_capacity_ = 1;
  int best_votes = 0;
  for (const auto& [capacity, votes] : capacity_votes) {
    if (votes > best_votes) {
      best_votes = votes;
      unit_mib_ = capacity;
    }
  }

  for (const placement::TypicalSpec& s : typical.specs) {
    TypicalShape shape;
    shape.weight = s.weight;
    shape.demand.cpu_milli = s.cpu_milli;
    shape.demand.device_count = s.device_count;
    shape.demand.mem_per_device = s.mem_per_device_mib;
    shape.demand.constraint = InternConstraint(ConstraintKey{s.gpu_models, s.device_kind, s.mig_profile, false,
                                                             s.device_count > 0 && s.mem_per_device_mib == 0});
    typical_.push_back(shape);
  }
  const size_t shapes = typical_.size();
  usable_.assign(nodes_.size() * shapes, 0);
  unusable_free_.assign(nodes_.size() * shapes, 0);
  frag_.assign(nodes_.size(), 0);
  for (size_t n = 0; n < nodes_.size(); ++n) {
    Resummarize(static_cast<int>(n));
    total_frag_ += frag_[n];
  }
}

StatusOr<Demand> ClusterState::DemandOf(const model::PodRequest& pod) {
  Demand d;
  d.cpu_milli = pod.cpu_milli;
  d.memory_bytes = pod.memory_bytes;
  const model::ContainerRequest* shape = nullptr;
  for (const auto& c : pod.containers) {
    if (c.init || c.device_count == 0) continue;
    if (shape != nullptr) {
      return Status::InvalidArgument("pod " + pod.Key() +
                                     ": the simulator replays one device container per pod, this pod has several");
    }
    shape = &c;
  }
  if (shape != nullptr) {
    d.device_count = shape->device_count;
    d.mem_per_device = shape->mem_per_device_mib;
    d.compute = shape->compute_pct;
  }
  d.constraint =
      InternConstraint(ConstraintKey{pod.gpu_models, pod.device_kind, pod.mig_profile, pod.hard_isolation, d.whole()});
  return d;
}

int ClusterState::ComputeNeed(const SimDevice& dev, const Demand& d) {
  if (d.whole()) return model::kDeviceComputePct;
  return d.compute > 0 ? d.compute : model::ProportionalComputePct(d.mem_per_device, dev.capacity);
}

bool ClusterState::UsableForShape(const SimDevice& dev, const Demand& shape, bool check_compute) const {
  if (dev.exclusive || !TypeAllowed(shape.constraint, dev.type)) return false;
  if (shape.whole()) return dev.shares == 0 && dev.free == dev.capacity;
  return dev.free >= shape.mem_per_device && (!check_compute || dev.compute_free >= ComputeNeed(dev, shape));
}

bool ClusterState::DeviceFits(int n, int slot, const Demand& d) const {
  return UsableForShape(nodes_[n].devices[slot], d, true);
}

bool ClusterState::HostFits(int n, const Demand& d) const {
  return nodes_[n].cpu_free >= d.cpu_milli && nodes_[n].memory_free >= d.memory_bytes;
}

bool ClusterState::AnyHostFits(const Demand& d) const {
  for (int n = 0; n < static_cast<int>(nodes_.size()); ++n) {
    if (HostFits(n, d)) return true;
  }
  return false;
}

bool ClusterState::Fits(int n, const Demand& d) const {
  const SimNode& node = nodes_[n];
  if (node.stale || !HostFits(n, d)) return false;
  if (d.device_count == 0) return true;
  int usable = 0;
  for (const SimDevice& dev : node.devices) {
    if (UsableForShape(dev, d, true) && ++usable >= d.device_count) return true;
  }
  return false;
}

double ClusterState::ShapeFrag(int m, int usable, MiB unusable_free, MiB total_free, int64_t cpu_free) const {
  const Demand& s = typical_[m].demand;
  if (s.device_count == 0 || cpu_free < s.cpu_milli || usable < s.device_count) return static_cast<double>(total_free);
  return static_cast<double>(unusable_free);
}

void ClusterState::Resummarize(int n) {
  const SimNode& node = nodes_[n];
  const size_t shapes = typical_.size();
  double f = 0;
  for (size_t m = 0; m < shapes; ++m) {
    int usable = 0;
    MiB unusable = 0;
    for (const SimDevice& dev : node.devices) {
      if (UsableForShape(dev, typical_[m].demand)) {
        ++usable;
      } else {
        unusable += dev.free;
      }
    }
    usable_[n * shapes + m] = static_cast<int16_t>(usable);
    unusable_free_[n * shapes + m] = unusable;
    f += typical_[m].weight * ShapeFrag(static_cast<int>(m), usable, unusable, node.total_free, node.cpu_free);
  }
  frag_[n] = f;
}

double ClusterState::FragmentationAfter(int n, const Demand& d, std::span<const int> slots) const {
  const SimNode& node = nodes_[n];
  const size_t shapes = typical_.size();
  MiB total_free = node.total_free;
  for (int slot : slots) {
    const SimDevice& dev = node.devices[slot];
    total_free -= d.whole() ? dev.free : dev.free - FreeWithCaps(dev, dev.caps + d.mem_per_device);
  }
  const int64_t cpu_free = node.cpu_free - d.cpu_milli;
  double f = 0;
  for (size_t m = 0; m < shapes; ++m) {
    const Demand& shape = typical_[m].demand;
    int usable = usable_[n * shapes + m];
    MiB unusable = unusable_free_[n * shapes + m];
    for (int slot : slots) {
      const SimDevice& before = node.devices[slot];
      SimDevice after = before;
      if (d.whole()) {
        after.free = 0;
        after.exclusive = true;
      } else {
        after.caps += d.mem_per_device;
        after.free = FreeWithCaps(after, after.caps);
      }
      ++after.shares;
      const bool was = UsableForShape(before, shape);
      const bool now = UsableForShape(after, shape);
      usable += (now ? 1 : 0) - (was ? 1 : 0);
      unusable += (now ? 0 : after.free) - (was ? 0 : before.free);
    }
    f += typical_[m].weight * ShapeFrag(static_cast<int>(m), usable, unusable, total_free, cpu_free);
  }
  return f;
}

void ClusterState::Apply(const Choice& choice, const Demand& d) {
  SimNode& node = nodes_[choice.node];
  node.cpu_free -= d.cpu_milli;
  node.memory_free -= d.memory_bytes;
  for (int slot : choice.slots) {
    SimDevice& dev = node.devices[slot];
    MiB free_after = 0;
    if (d.whole()) {
      dev.caps += dev.capacity;
      dev.exclusive = true;
    } else {
      dev.caps += d.mem_per_device;
      free_after = FreeWithCaps(dev, dev.caps);
    }
    const MiB taken = dev.free - free_after;
    const int compute = ComputeNeed(dev, d);
    dev.compute_free -= compute;
    compute_allocated_ += compute;
    dev.free = free_after;
    node.total_free -= taken;
    total_free_ -= taken;
    ++dev.shares;
  }
  if (d.device_count > 0) ++node.tags[d.whole() ? d.device_count : 0];
  total_frag_ -= frag_[choice.node];
  Resummarize(choice.node);
  total_frag_ += frag_[choice.node];
}

}  // namespace gpupack::sim

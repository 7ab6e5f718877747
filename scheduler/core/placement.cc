#include "scheduler/core/placement.h"

#include <algorithm>
#include <limits>

namespace gpupack::core {
namespace {

// A device demand in the shape both typical specs and pod containers share.
struct Demand {
  int count = 0;                 // distinct devices
  MiB mem = 0;                   // per device; 0 = whole device
  DeviceKindPreference kind = DeviceKindPreference::kAny;
  const std::string* mig_profile = nullptr;         // empty or null = any
  const std::vector<std::string>* models = nullptr; // null or empty = any
  bool hard_isolation = false;
};

bool ModelMatches(const std::string& model, const std::vector<std::string>* wanted) {
  if (wanted == nullptr || wanted->empty()) return true;
  for (const auto& w : *wanted) {
    if (!w.empty() && model.find(w) != std::string::npos) return true;
  }
  return false;
}

// Kind, profile and model: whether the device is of a sort the demand accepts at all.
bool SortMatches(const Device& d, const Demand& demand) {
  if (demand.mig_profile != nullptr && !demand.mig_profile->empty()) {
    if (d.kind != DeviceKind::kMig || d.mig_profile != *demand.mig_profile) return false;
  } else if (demand.kind == DeviceKindPreference::kGpu && d.kind != DeviceKind::kGpu) {
    return false;
  } else if (demand.kind == DeviceKindPreference::kMig && d.kind != DeviceKind::kMig) {
    return false;
  }
  if (demand.hard_isolation && d.kind == DeviceKind::kGpu && !d.hard_isolation) return false;
  return ModelMatches(d.model, demand.models);
}

// Whole-device demands, and hard isolation on a MIG instance, take the device exclusively.
bool TakesExclusively(const Device& d, const Demand& demand) {
  return demand.mem == 0 || (demand.hard_isolation && d.kind == DeviceKind::kMig);
}

MiB Usable(const Device& d, const PlacementOptions& o) { return std::max<MiB>(0, d.capacity_mib - o.reserve_mib_per_device); }

Demand DemandOfSpec(const TypicalSpec& s) {
  Demand d;
  d.count = s.device_count;
  d.mem = s.mem_per_device_mib;
  d.kind = s.device_kind;
  d.mig_profile = &s.mig_profile;
  d.models = &s.gpu_models;
  return d;
}

Demand DemandOfContainer(const PodRequest& pod, const ContainerRequest& c) {
  Demand d;
  d.count = c.device_count;
  d.mem = c.mem_per_device_mib;
  d.kind = pod.device_kind;
  d.mig_profile = &pod.mig_profile;
  d.models = &pod.gpu_models;
  d.hard_isolation = pod.hard_isolation;
  return d;
}

// The mutable part of a node during a tentative placement. Lives on the stack: the hot loop
// allocates nothing per node.
struct WorkState {
  std::array<MiB, kMaxDevicesPerNode> free;
  std::array<bool, kMaxDevicesPerNode> empty;
  std::array<int16_t, kMaxTypicalSpecs> usable;
  std::array<MiB, kMaxTypicalSpecs> unusable_free;
  MiB total_free;
  int64_t free_cpu;
  int64_t free_mem;
};

bool UsableFor(const TypicalSpec& s, MiB free, bool empty) {
  return s.mem_per_device_mib == 0 ? empty : free >= s.mem_per_device_mib;
}

double Fragmentation(const TypicalWorkload& w, const WorkState& st) {
  double f = 0;
  const int n = static_cast<int>(w.specs.size());
  for (int m = 0; m < n; ++m) {
    const TypicalSpec& s = w.specs[m];
    MiB frag;
    if (s.device_count == 0) {
      frag = st.total_free;
    } else if ((st.free_cpu >= 0 && st.free_cpu < s.cpu_milli) || st.usable[m] < s.device_count) {
      frag = st.total_free;
    } else {
      frag = st.unusable_free[m];
    }
    f += s.weight * static_cast<double>(frag);
  }
  return f;
}

// Moves device `slot` from (free, empty) to (new_free, false), updating the per-spec tallies.
void ChangeDevice(const TypicalWorkload& w, const NodeSummary& sum, WorkState& st, int slot, MiB new_free) {
  const MiB old_free = st.free[slot];
  const bool old_empty = st.empty[slot];
  const uint64_t match = sum.spec_match[slot];
  const int n = static_cast<int>(w.specs.size());
  for (int m = 0; m < n; ++m) {
    const TypicalSpec& s = w.specs[m];
    bool was = false, now = false;
    if (match >> m & 1) {
      was = UsableFor(s, old_free, old_empty);
      now = UsableFor(s, new_free, false);
    }
    st.usable[m] = static_cast<int16_t>(st.usable[m] + (now ? 1 : 0) - (was ? 1 : 0));
    st.unusable_free[m] += (now ? 0 : new_free) - (was ? 0 : old_free);
  }
  st.total_free += new_free - old_free;
  st.free[slot] = new_free;
  st.empty[slot] = false;
}

// Fragmentation(w, st) as it would be after ChangeDevice(w, sum, st, slot, new_free), computed
// without copying the state: this is the inner loop of every FGD evaluation.
double FragmentationAfterChange(const TypicalWorkload& w, const NodeSummary& sum, const WorkState& st, int slot,
                                MiB new_free) {
  const MiB old_free = st.free[slot];
  const bool old_empty = st.empty[slot];
  const uint64_t match = sum.spec_match[slot];
  const MiB total_free = st.total_free + new_free - old_free;
  double f = 0;
  const int n = static_cast<int>(w.specs.size());
  for (int m = 0; m < n; ++m) {
    const TypicalSpec& s = w.specs[m];
    MiB frag;
    if (s.device_count == 0) {
      frag = total_free;
    } else {
      bool was = false, now = false;
      if (match >> m & 1) {
        was = UsableFor(s, old_free, old_empty);
        now = UsableFor(s, new_free, false);
      }
      const int usable = st.usable[m] + (now ? 1 : 0) - (was ? 1 : 0);
      if ((st.free_cpu >= 0 && st.free_cpu < s.cpu_milli) || usable < s.device_count) {
        frag = total_free;
      } else {
        frag = st.unusable_free[m] + (now ? 0 : new_free) - (was ? 0 : old_free);
      }
    }
    f += s.weight * static_cast<double>(frag);
  }
  return f;
}

Verdict ResourceVerdict(const NodeSummary& sum, const PodRequest& pod) {
  if (sum.free_cpu_milli >= 0 && pod.cpu_milli > sum.free_cpu_milli) {
    return Verdict::Reject(RejectReason::kInsufficientCpu, false, pod.cpu_milli, sum.free_cpu_milli);
  }
  if (sum.free_memory_bytes >= 0 && pod.memory_bytes > sum.free_memory_bytes) {
    return Verdict::Reject(RejectReason::kInsufficientMemory, false, pod.memory_bytes, sum.free_memory_bytes);
  }
  return Verdict::Fits();
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
  if (d.hard_isolation) out += ", hard isolation";
  return out;
}

// Why a demand cannot be placed on the node in its current tentative state. Distinguishes what
// no amount of eviction fixes (unresolvable) from a shortage of free memory / devices.
Verdict ShortageVerdict(const Node& node, const WorkState& st, const Demand& demand,
                        const std::array<bool, kMaxDevicesPerNode>& taken, const PlacementOptions& o) {
  int matching = 0, large_enough = 0, usable_now = 0;
  MiB largest_capacity = 0, largest_free = 0;
  const int n = static_cast<int>(node.devices.size());
  for (int g = 0; g < n; ++g) {
    const Device& d = node.devices[g];
    if (!d.healthy || !SortMatches(d, demand)) continue;
    ++matching;
    largest_capacity = std::max(largest_capacity, Usable(d, o));
    if (demand.mem == 0 || Usable(d, o) >= demand.mem) ++large_enough;
    if (taken[g]) continue;
    largest_free = std::max(largest_free, st.free[g]);
    bool ok = TakesExclusively(d, demand) ? st.empty[g] && (demand.mem == 0 || st.free[g] >= demand.mem)
                                          : st.free[g] >= demand.mem;
    if (ok) ++usable_now;
  }
  if (matching == 0) return Verdict::Reject(RejectReason::kNoMatchingDevice, true, 0, 0, DescribeSort(demand));
  if (large_enough == 0) return Verdict::Reject(RejectReason::kDeviceTooSmall, true, demand.mem, largest_capacity);
  if (large_enough < demand.count) {
    return Verdict::Reject(RejectReason::kTooFewMatchingDevices, true, demand.count, large_enough, DescribeSort(demand));
  }
  if (demand.mem == 0) return Verdict::Reject(RejectReason::kInsufficientEmptyDevices, false, demand.count, usable_now);
  if (demand.count == 1) return Verdict::Reject(RejectReason::kInsufficientDeviceMemory, false, demand.mem, largest_free);
  return Verdict::Reject(RejectReason::kInsufficientDevices, false, demand.count, usable_now,
                         std::to_string(demand.mem) + " MiB");
}

}  // namespace

StatusOr<PolicyKind> ParsePolicyKind(std::string_view name) {
  if (name == "fgd") return PolicyKind::kFgd;
  if (name == "binpack") return PolicyKind::kBinpack;
  if (name == "spread") return PolicyKind::kSpread;
  return Status::InvalidArgument("unknown policy \"" + std::string(name) + "\" (want fgd, binpack or spread)");
}

std::string_view PolicyKindName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kFgd: return "fgd";
    case PolicyKind::kBinpack: return "binpack";
    case PolicyKind::kSpread: return "spread";
  }
  return "?";
}

MiB DeviceFreeMiB(const Device& d, const PlacementOptions& o) {
  if (!d.healthy) return 0;
  MiB caps = 0;
  for (const auto& s : d.shares) {
    if (s.exclusive) return 0;
    caps += s.mem_mib;
  }
  MiB foreign = 0;
  if (o.count_foreign_usage) foreign = std::max<MiB>(0, d.used_mib - caps - o.reserve_mib_per_device);
  return std::max<MiB>(0, d.capacity_mib - o.reserve_mib_per_device - caps - foreign);
}

Policy::Policy(PolicyKind kind, TypicalWorkload workload, PlacementOptions options)
    : kind_(kind), workload_(std::move(workload)), options_(options) {
  workload_.Normalize();
}

NodeSummary Policy::Summarize(const Node& node) const {
  NodeSummary sum;
  const int n = std::min<int>(static_cast<int>(node.devices.size()), kMaxDevicesPerNode);
  sum.device_count = n;
  const int specs = static_cast<int>(workload_.specs.size());
  std::array<bool, kMaxDevicesPerNode> empty{};
  for (int g = 0; g < n; ++g) {
    const Device& d = node.devices[g];
    sum.free[g] = DeviceFreeMiB(d, options_);
    empty[g] = d.healthy && d.shares.empty() && sum.free[g] == Usable(d, options_);
    sum.total_free += sum.free[g];
    uint64_t mask = 0;
    for (int m = 0; m < specs; ++m) {
      const TypicalSpec& s = workload_.specs[m];
      if (s.device_count == 0 || !d.healthy) continue;
      Demand dem = DemandOfSpec(s);
      if (!SortMatches(d, dem)) continue;
      if (s.mem_per_device_mib > 0 && Usable(d, options_) < s.mem_per_device_mib) continue;
      mask |= uint64_t{1} << m;
    }
    sum.spec_match[g] = mask;
  }
  for (int m = 0; m < specs; ++m) {
    const TypicalSpec& s = workload_.specs[m];
    int16_t usable = 0;
    MiB unusable = 0;
    for (int g = 0; g < n; ++g) {
      bool ok = (sum.spec_match[g] >> m & 1) && UsableFor(s, sum.free[g], empty[g]);
      if (ok) ++usable; else unusable += sum.free[g];
    }
    sum.usable[m] = usable;
    sum.unusable_free[m] = unusable;
  }
  sum.free_cpu_milli = node.cpu_milli < 0 ? -1 : std::max<int64_t>(0, node.cpu_milli - node.requested_cpu_milli);
  sum.free_memory_bytes =
      node.memory_bytes < 0 ? -1 : std::max<int64_t>(0, node.memory_bytes - node.requested_memory_bytes);
  WorkState st;
  st.usable = sum.usable;
  st.unusable_free = sum.unusable_free;
  st.total_free = sum.total_free;
  st.free_cpu = sum.free_cpu_milli;
  sum.fragmentation = Fragmentation(workload_, st);
  return sum;
}

NodeEvaluation Policy::Evaluate(const Node& node, const NodeSummary& sum, const PodRequest& pod) const {
  NodeEvaluation out;
  if (!node.stale_reason.empty()) {
    out.verdict = Verdict::Reject(RejectReason::kNodeStale, true, 0, 0, node.stale_reason);
    return out;
  }
  if (pod.WantsDevices() && node.devices.empty()) {
    out.verdict = Verdict::Reject(RejectReason::kNoDevices, true);
    return out;
  }
  out.verdict = ResourceVerdict(sum, pod);
  if (!out.verdict.fits()) return out;

  const int n = sum.device_count;
  WorkState st;
  std::array<bool, kMaxDevicesPerNode> pod_holds{};  // devices this pod already got
  std::array<MiB, kMaxDevicesPerNode> pod_cap{};     // the pod's cap on each such device
  for (int g = 0; g < n; ++g) {
    st.free[g] = sum.free[g];
    const Device& d = node.devices[g];
    st.empty[g] = d.healthy && d.shares.empty() && sum.free[g] == Usable(d, options_);
  }
  st.usable = sum.usable;
  st.unusable_free = sum.unusable_free;
  st.total_free = sum.total_free;
  st.free_cpu = sum.free_cpu_milli < 0 ? -1 : sum.free_cpu_milli - pod.cpu_milli;
  st.free_mem = sum.free_memory_bytes < 0 ? -1 : sum.free_memory_bytes - pod.memory_bytes;
  const bool fgd = kind_ == PolicyKind::kFgd;

  // Largest demands first (whole devices, then by memory), app containers before init ones:
  // the hardest to place chooses first, like best-fit decreasing.
  std::array<int, 32> order{};
  const int containers = std::min<int>(static_cast<int>(pod.containers.size()), 32);
  for (int i = 0; i < containers; ++i) order[i] = i;
  std::sort(order.begin(), order.begin() + containers, [&](int a, int b) {
    const auto& ca = pod.containers[a];
    const auto& cb = pod.containers[b];
    if (ca.init != cb.init) return !ca.init;
    auto key = [](const ContainerRequest& c) { return c.mem_per_device_mib == 0 ? std::numeric_limits<MiB>::max() : c.mem_per_device_mib; };
    if (key(ca) != key(cb)) return key(ca) > key(cb);
    return a < b;
  });

  out.placement.containers.resize(containers);
  for (int oi = 0; oi < containers; ++oi) {
    const ContainerRequest& c = pod.containers[order[oi]];
    ContainerPlacement& cp = out.placement.containers[oi];
    cp.container = c.name;
    cp.container_index = c.index;
    cp.init = c.init;
    const Demand demand = DemandOfContainer(pod, c);
    std::array<bool, kMaxDevicesPerNode> taken{};

    if (c.init) {
      // Reuse devices the pod already holds when k of them carry enough of the pod's cap.
      std::array<int, kMaxDevicesPerNode> held{};
      int held_n = 0;
      for (int g = 0; g < n; ++g) {
        if (!pod_holds[g] || !SortMatches(node.devices[g], demand)) continue;
        bool ok = c.mem_per_device_mib == 0 ? pod_cap[g] >= Usable(node.devices[g], options_)
                                            : pod_cap[g] >= c.mem_per_device_mib;
        if (ok) held[held_n++] = g;
      }
      if (held_n >= c.device_count) {
        cp.within_pod_devices = true;
        cp.exclusive = false;
        cp.mem_per_device_mib = c.mem_per_device_mib;
        for (int i = 0; i < c.device_count; ++i) {
          cp.device_slots.push_back(held[i]);
          if (c.mem_per_device_mib == 0) cp.mem_per_device_mib = std::max(cp.mem_per_device_mib, pod_cap[held[i]]);
        }
        continue;
      }
    }

    const WorkState before_container = st;
    for (int round = 0; round < c.device_count; ++round) {
      int best = -1;
      double best_cost = 0;
      MiB best_new_free = 0;
      // Devices in identical states give identical costs: evaluate each state once.
      std::array<int, kMaxDevicesPerNode> seen{};
      int seen_n = 0;
      for (int g = 0; g < n; ++g) {
        if (taken[g]) continue;
        const Device& d = node.devices[g];
        if (!d.healthy || !SortMatches(d, demand)) continue;
        const bool exclusive = TakesExclusively(d, demand);
        if (exclusive) {
          if (!st.empty[g] || (demand.mem > 0 && st.free[g] < demand.mem)) continue;
        } else if (st.free[g] < demand.mem) {
          continue;
        }
        bool duplicate = false;
        for (int i = 0; i < seen_n && !duplicate; ++i) {
          const int h = seen[i];
          const Device& e = node.devices[h];
          duplicate = st.free[h] == st.free[g] && st.empty[h] == st.empty[g] &&
                      sum.spec_match[h] == sum.spec_match[g] && e.capacity_mib == d.capacity_mib &&
                      e.kind == d.kind && exclusive == TakesExclusively(e, demand);
        }
        if (duplicate) continue;
        seen[seen_n++] = g;
        const MiB new_free = exclusive ? 0 : st.free[g] - demand.mem;
        double cost;
        if (fgd) {
          cost = FragmentationAfterChange(workload_, sum, st, g, new_free);
        } else if (kind_ == PolicyKind::kBinpack) {
          cost = static_cast<double>(new_free);  // best fit: least left over
        } else {
          cost = -static_cast<double>(new_free);  // worst fit: most left over
        }
        if (best < 0 || cost < best_cost) {
          best = g;
          best_cost = cost;
          best_new_free = new_free;
        }
      }
      if (best < 0) {
        // Report the shortage as the container found the node, not after its own partial picks.
        out.verdict = ShortageVerdict(node, before_container, demand, std::array<bool, kMaxDevicesPerNode>{}, options_);
        out.placement.containers.clear();
        return out;
      }
      ChangeDevice(workload_, sum, st, best, best_new_free);
      taken[best] = true;
      pod_holds[best] = true;
      const Device& d = node.devices[best];
      const bool exclusive = TakesExclusively(d, demand);
      const MiB cap = exclusive && demand.mem == 0 ? d.capacity_mib : demand.mem;
      pod_cap[best] += cap;
      cp.device_slots.push_back(best);
      cp.mem_per_device_mib = cap;
      cp.exclusive = exclusive;
    }
  }

  // Cost of the whole placement.
  if (fgd) {
    out.cost = Fragmentation(workload_, st) - sum.fragmentation;
  } else {
    MiB left = 0;
    for (int g = 0; g < n; ++g) left += st.free[g];
    out.cost = kind_ == PolicyKind::kBinpack ? static_cast<double>(left) : -static_cast<double>(left);
    if (!pod.WantsDevices()) out.cost = 0;  // CPU-only pods: neutral under the simple policies
  }
  out.verdict = Verdict::Fits();
  return out;
}

Status ApplyPlacement(Node& node, const PodRequest& pod, const Placement& placement, const PlacementOptions& options) {
  // Check everything first, so a failure leaves the node untouched.
  std::array<MiB, kMaxDevicesPerNode> add{};
  std::array<bool, kMaxDevicesPerNode> excl{};
  const int n = static_cast<int>(node.devices.size());
  for (const auto& cp : placement.containers) {
    if (cp.within_pod_devices) continue;
    for (int slot : cp.device_slots) {
      if (slot < 0 || slot >= n || slot >= kMaxDevicesPerNode) {
        return Status::FailedPrecondition("placement names device slot " + std::to_string(slot) + " but node " +
                                          node.name + " has " + std::to_string(n) + " devices");
      }
      add[slot] += cp.mem_per_device_mib;
      excl[slot] = excl[slot] || cp.exclusive;
    }
  }
  for (int g = 0; g < n && g < kMaxDevicesPerNode; ++g) {
    if (add[g] == 0 && !excl[g]) continue;
    const Device& d = node.devices[g];
    if (excl[g] && !d.shares.empty()) {
      return Status::FailedPrecondition("device " + d.uuid + " on " + node.name + " is no longer empty");
    }
    MiB free = DeviceFreeMiB(d, options);
    MiB need = excl[g] ? 0 : add[g];
    if (!excl[g] && need > free) {
      return Status::FailedPrecondition("device " + d.uuid + " on " + node.name + " has " + std::to_string(free) +
                                        " MiB free, placement needs " + std::to_string(need) + " MiB");
    }
  }
  for (const auto& cp : placement.containers) {
    if (cp.within_pod_devices) continue;
    for (int slot : cp.device_slots) {
      node.devices[slot].shares.push_back(DeviceShare{pod.uid, pod.Key(), cp.container, cp.mem_per_device_mib, cp.exclusive});
    }
  }
  node.requested_cpu_milli += pod.cpu_milli;
  node.requested_memory_bytes += pod.memory_bytes;
  return Status::Ok();
}

int RemovePod(Node& node, std::string_view pod_uid) {
  int removed = 0;
  for (auto& d : node.devices) {
    auto it = std::remove_if(d.shares.begin(), d.shares.end(), [&](const DeviceShare& s) { return s.pod_uid == pod_uid; });
    removed += static_cast<int>(d.shares.end() - it);
    d.shares.erase(it, d.shares.end());
  }
  return removed;
}

Status CheckLedgerInvariant(const Node& node) {
  for (const auto& d : node.devices) {
    MiB caps = 0;
    bool exclusive = false;
    for (const auto& s : d.shares) {
      caps += s.mem_mib;
      exclusive = exclusive || s.exclusive;
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

}  // namespace gpupack::core

#include "placement/node_summary.h"

#include <algorithm>
#include <array>
#include <bit>
#include <vector>

#include "model/process_overhead.h"
#include "placement/compute_cost.h"
#include "placement/demand.h"
#include "placement/fgd_cost.h"
#include "placement/policy.h"

namespace gpupack::placement {

MiB ProcessOverheadMiB(const Device& d, const PlacementOptions& o) {
  switch (o.process_overhead) {
    case ProcessOverheadMode::kOff:
      return 0;
    case ProcessOverheadMode::kFamilyDefault:
      return model::DefaultProcessOverheadMiB(d.model, d.capacity_mib);
    case ProcessOverheadMode::kFixed:
      return o.process_overhead_mib;
  }
  return 0;
}

MiB DeviceUsableMiB(const Device& d, const PlacementOptions& o) {
  return std::max<MiB>(0, d.capacity_mib - o.reserve_mib_per_device - ProcessOverheadMiB(d, o));
}

MiB CeilingRoomMiB(const Device& d, const PlacementOptions& o) {
  MiB ceilings = 0;
  for (const auto& s : d.shares) ceilings += s.CeilingMiB();
  const MiB bound = std::max<MiB>(0, d.capacity_mib - o.reserve_mib_per_device) * o.ceiling_overcommit_pct / 100;
  return bound - ceilings - static_cast<MiB>(d.shares.size() + 1) * ProcessOverheadMiB(d, o);
}

MiB DeviceFreeMiB(const Device& d, const PlacementOptions& o) {
  if (!InPool(d)) return 0;
  MiB caps = 0, ceilings = 0;
  for (const auto& s : d.shares) {
    if (s.exclusive) return 0;
    caps += s.mem_mib;
    ceilings += s.CeilingMiB();
  }
  const MiB overhead = ProcessOverheadMiB(d, o);
  const MiB held = static_cast<MiB>(d.shares.size()) * overhead;  // the processes already there
  // Live use up to the ceilings is the shares' own (a burst is theirs, and evictable); beyond
  // them, something outside gpupack holds it.
  MiB foreign = 0;
  if (o.count_foreign_usage) foreign = std::max<MiB>(0, d.used_mib - ceilings - held - o.reserve_mib_per_device);
  const MiB free = d.capacity_mib - o.reserve_mib_per_device - caps - held - overhead - foreign;
  if (ceilings == caps) return std::max<MiB>(0, free);  // no burst: the bound (≥ 100 %) cannot bind
  return std::max<MiB>(0, std::min(free, CeilingRoomMiB(d, o)));
}

int DeviceFreeComputePct(const Device& d) {
  if (!InPool(d)) return 0;
  return std::max(0, model::kDeviceComputePct - model::AllocatedComputePct(d));
}

bool CanHost(const Node& node, const TypicalSpec& spec, const PlacementOptions& options) {
  if (node.cpu_milli >= 0 && node.cpu_milli < spec.cpu_milli) return false;
  if (spec.device_count == 0) return true;
  const Demand demand = DemandOfSpec(spec);
  int matching = 0;
  for (const Device& d : node.devices) {
    if (!InPool(d) || !SortMatches(d, demand)) continue;
    if (spec.mem_per_device_mib > 0 && DeviceUsableMiB(d, options) < spec.mem_per_device_mib) continue;
    if (++matching == spec.device_count) return true;
  }
  return false;
}

namespace {

// Bit m: the device can serve spec m at all (in the pool, of a sort the spec accepts, and large
// enough for its slice). `usable` is DeviceUsableMiB(d, options).
uint64_t SpecMatch(const Device& d, MiB usable, const std::vector<TypicalSpec>& specs, const Columns& cols) {
  if (!InPool(d)) return 0;
  uint64_t mask = 0;
  for (int m = 0; m < cols.n_device; ++m) {
    const TypicalSpec& s = specs[m];
    if (s.mem_per_device_mib > usable) continue;
    if (!((cols.any_sort >> m) & 1) && !SortMatches(d, DemandOfSpec(s))) continue;
    mask |= uint64_t{1} << m;
  }
  return mask;
}

// Devices of one sort (model, kind, profile, size, health) match the same specs.
bool SameSort(const Device& p, const Device& d) {
  return p.healthy == d.healthy && p.excluded == d.excluded && p.kind == d.kind && p.capacity_mib == d.capacity_mib &&
         p.hard_isolation == d.hard_isolation && p.model == d.model && p.mig_profile == d.mig_profile;
}

// The device slots and R_n.
void SummarizeDevices(const Node& node, const Columns& cols, const std::vector<TypicalSpec>& specs,
                      const PlacementOptions& options, const CompletionValue& completion, NodeSummary& sum) {
  auto* slots = sum.devices();
  for (int g = 0; g < sum.device_count; ++g) {
    const Device& d = node.devices[g];
    NodeSummary::DeviceSlot& slot = slots[g];
    const MiB usable = DeviceUsableMiB(d, options);
    slot.free = DeviceFreeMiB(d, options);
    slot.empty = InPool(d) && d.shares.empty() && slot.free == usable;
    sum.total_free += slot.free;
    slot.completion_table = static_cast<int16_t>(completion.TableFor(usable));
    slot.completion_value = slot.completion_table < 0 ? 0 : completion.Value(slot.completion_table, slot.free);
    slot.fractional_fit = static_cast<int8_t>(cols.FractionalFit(slot.free));
    slot.free_compute = static_cast<int8_t>(DeviceFreeComputePct(d));
    sum.device_capacity = g == 0 || sum.device_capacity == d.capacity_mib ? d.capacity_mib : -1;
    sum.compute_slack =
        sum.compute_slack && slot.free_compute >= model::ProportionalComputePct(slot.free, d.capacity_mib);
    // A node's GPUs are usually identical, so compute the mask once per sort.
    slot.spec_match =
        g > 0 && SameSort(node.devices[g - 1], d) ? slots[g - 1].spec_match : SpecMatch(d, usable, specs, cols);
    auto twin = [&](const NodeSummary::DeviceSlot& other) {
      return other.free == slot.free && other.empty == slot.empty && other.spec_match == slot.spec_match &&
             other.completion_table == slot.completion_table;
    };
    if (std::none_of(slots, slots + g, twin)) sum.distinct |= uint64_t{1} << g;
  }
}

// q_n(m), the free memory no device of spec m can use, and which specs are satisfied. A device can
// use the fractional specs its free memory holds (a prefix) and, while empty, the whole ones, of
// those its sort matches; so each device adds itself to the specs it can use, and q_n(m) is the
// node's free memory less theirs.
void SummarizeSpecs(const Columns& cols, NodeSummary& sum) {
  const auto* slots = sum.devices();
  const uint64_t whole = FirstBits(cols.n_device) & ~FirstBits(cols.n_fractional);
  std::array<MiB, kMaxTypicalSpecs> usable_free{};
  int16_t* usable = sum.usable();
  for (int g = 0; g < sum.device_count; ++g) {
    for (uint64_t bits = UsableByMemory(slots[g], whole); bits != 0; bits &= bits - 1) {
      const int m = std::countr_zero(bits);
      ++usable[m];
      usable_free[m] += slots[g].free;
    }
  }
  for (int m = 0; m < cols.n; ++m) {
    sum.unusable_free()[m] = sum.total_free - usable_free[m];
    sum.satisfied |= static_cast<uint64_t>(usable[m] >= cols.count[m]) << m;
    sum.spare |= static_cast<uint64_t>(usable[m] > cols.count[m]) << m;
  }
}

// The per-spec sums FGD's per-pick delta reads (DeltaEvaluator), for the first device's specs.
void SummarizePrefixes(const Columns& cols, NodeSummary& sum) {
  sum.prefix_mask = sum.devices()[0].spec_match;
  const uint64_t bits = sum.prefix_mask & sum.satisfied & ~sum.cpu_short;
  auto dropping = [&](int m) { return cols.weight[m] * static_cast<double>(sum.total_free - sum.unusable_free()[m]); };
  for (int m = 0; m < cols.n_fractional; ++m) {
    const bool satisfied = (bits >> m) & 1;
    const bool spare = (sum.spare >> m) & 1;
    sum.satisfied_prefix()[m + 1] = sum.satisfied_prefix()[m] + (satisfied ? cols.weight[m] : 0.0);
    sum.staying_prefix()[m + 1] = sum.staying_prefix()[m] + (satisfied && spare ? cols.weight[m] : 0.0);
    sum.dropping_prefix()[m + 1] = sum.dropping_prefix()[m] + (satisfied && !spare ? dropping(m) : 0.0);
  }
  for (int m = cols.n_fractional; m < cols.n_device; ++m) {
    if (!((bits >> m) & 1)) continue;
    if ((sum.spare >> m) & 1)
      sum.whole_staying_weight += cols.weight[m];
    else
      sum.whole_dropping += dropping(m);
  }
}

// The fill fragmentation's tallies, F̂_n(M) and the CPU from which it stops depending on CPU.
void SummarizeFill(const Columns& cols, NodeSummary& sum) {
  const auto* slots = sum.devices();
  for (int g = 0; g < sum.device_count; ++g) {
    FillPick(cols, slots[g].spec_match, 0, false, slots[g].free, sum.fill_empty_devices(), sum.fill_usable_free());
    if (!slots[g].empty) continue;
    for (int m = cols.n_fractional; m < cols.n_device; ++m) {
      if (!((slots[g].spec_match >> m) & 1)) continue;
      ++sum.fill_empty_devices()[m];
      sum.fill_usable_free()[m] += slots[g].free;
    }
  }
  sum.fill_fragmentation = FillFragmentation(cols, sum.fill_empty_devices(), sum.fill_usable_free(), sum.free_cpu_milli,
                                             sum.free_memory_bytes, sum.total_free);
  sum.fill_cpu_ample = FillAmple(cols, sum.fill_empty_devices(), sum.fill_usable_free(), cols.cpu.data());
  sum.fill_memory_ample = FillAmple(cols, sum.fill_empty_devices(), sum.fill_usable_free(), cols.host_memory.data());
}

}  // namespace

void NodeSummary::Resize(int devices, int specs, int fractional, bool compute_tallies) {
  device_count = devices;
  spec_count = specs;
  fractional_count = fractional;
  compute_tallies_ = compute_tallies;
  block_.assign(End(), std::byte{0});
}

NodeSummary Policy::Summarize(const Node& node) const {
  const Columns& cols = columns_;
  NodeSummary sum;
  const int n = std::min<int>(static_cast<int>(node.devices.size()), kMaxDevicesPerNode);
  sum.Resize(n, cols.n, cols.n_fractional, cols.own_compute != 0);
  sum.stale = !node.stale_reason.empty();
  SummarizeDevices(node, cols, workload_.specs, options_, completion_, sum);
  SummarizeSpecs(cols, sum);
  sum.free_cpu_milli = node.cpu_milli < 0 ? -1 : std::max<int64_t>(0, node.cpu_milli - node.requested_cpu_milli);
  sum.free_memory_bytes =
      node.memory_bytes < 0 ? -1 : std::max<int64_t>(0, node.memory_bytes - node.requested_memory_bytes);
  WorkState st;
  std::copy_n(sum.usable(), cols.n, st.usable.begin());
  std::copy_n(sum.unusable_free(), cols.n, st.unusable_free.begin());
  st.total_free = sum.total_free;
  sum.cpu_short = CpuShortMask(cols, sum.free_cpu_milli);
  if (n > 0) SummarizePrefixes(cols, sum);
  sum.fragmentation = Fragmentation(cols, st, sum.cpu_short);
  SummarizeFill(cols, sum);
  sum.reservation_tightness = reservation_.Tightness(node);
  if (sum.has_compute_tallies()) {
    std::array<ComputeDevice, kMaxDevicesPerNode> devices;
    for (int g = 0; g < n; ++g) devices[g] = ComputeDeviceOf(sum.devices()[g], node.devices[g].capacity_mib);
    ComputeFragmentation tallies;
    tallies.Start(cols, devices.data(), n, sum.cpu_short, nullptr);
    tallies.Export(sum);
  }
  return sum;
}

}  // namespace gpupack::placement

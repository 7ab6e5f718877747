// Free device memory and the per-node summary a Policy precomputes for its typical workload
// (Policy::Summarize, defined in node_summary.cc): what Score reads instead of the Node.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "placement/columns.h"
#include "placement/vocabulary.h"
#include "placement/workload.h"

namespace gpupack::placement {

// The default bound on Σ ceilings per device (docs/placement.md, "Burstable memory"): 150 % of the
// device's memory less the reserve.
inline constexpr int kDefaultCeilingOvercommitPct = 150;

// Which per-process overhead placement counts (model/process_overhead.h; docs/placement.md,
// "Per-process overhead"): none, each device's family default, or one figure for every device.
enum class ProcessOverheadMode : uint8_t { kOff, kFamilyDefault, kFixed };

struct PlacementOptions {
  MiB reserve_mib_per_device = 0;   // kept free on every device (driver reserve)
  bool count_foreign_usage = true;  // live usage beyond the ceilings reduces free memory
  // Σ ceilings (DeviceShare::CeilingMiB) on a device ≤ this percent of its memory less the reserve;
  // at least 100, so that shares without a ceiling above their cap never meet the bound.
  int ceiling_overcommit_pct = kDefaultCeilingOvercommitPct;
  ProcessOverheadMode process_overhead = ProcessOverheadMode::kOff;
  MiB process_overhead_mib = 0;  // kFixed's figure
};

// What each process (share) on `device` holds outside its cap under `options`: 0 when off.
MiB ProcessOverheadMiB(const Device& device, const PlacementOptions& options);
// Free memory of a device for one more process: capacity − reserve − Σ caps − (shares + 1) ×
// overhead − max(0, live usage − Σ ceilings − shares × overhead − reserve), and no more than its
// ceiling room (CeilingRoomMiB), floored at 0; a device held exclusively or unhealthy has none.
// Without ceilings above caps and with the overhead off: capacity − reserve − Σ caps − foreign use.
MiB DeviceFreeMiB(const Device& device, const PlacementOptions& options);
// A device's capacity less the reserve and one process's overhead, floored at 0: its free memory
// when nothing holds it.
MiB DeviceUsableMiB(const Device& device, const PlacementOptions& options);
// How large a ceiling one more process may have on `device` under the overcommit bound:
// ⌊(capacity − reserve) × pct / 100⌋ − Σ ceilings − (shares + 1) × overhead (may be negative).
MiB CeilingRoomMiB(const Device& device, const PlacementOptions& options);
// Free compute of a device, percent: kDeviceComputePct − AllocatedComputePct, floored at 0; a
// device out of the pool has none.
int DeviceFreeComputePct(const Device& device);

// Whether the node, were it empty, could host one pod of the spec: enough allocatable CPU and
// enough healthy devices of a matching sort with the usable capacity the spec asks for. The
// static part of the fit, which capacity reservation (reservation.h) groups nodes by.
bool CanHost(const Node& node, const TypicalSpec& spec, const PlacementOptions& options);

// Per-node precomputation against a policy's typical workload (FGD's F_n(M) ingredients).
// Laid out for Score, which reads every node's summary once per pod and finds few of them in a
// cache: the scalars here, and the per-device slots and per-spec tallies in one block sized to
// the node's devices and the policy's specs (about 1.4 KB for 8 devices and 30 specs, where
// arrays of the maxima took 3.5 KB: 5,000 nodes' summaries then fit in a last-level cache).
struct NodeSummary {
  int device_count = 0;
  int spec_count = 0;        // the policy's: the length of every per-spec tally
  int fractional_count = 0;  // the policy's fractional specs: the prefix sums have one more
  bool stale = false;        // node.stale_reason is set: Score reads the Node only to explain it
  // On every device the free compute covers the proportional share of all its free memory
  // (≥ ProportionalComputePct(free, capacity)), so a demand without a compute share of its own
  // that fits a device's memory fits its compute too: the memory-only arithmetic is exact. True
  // whenever no share on the node names a compute share larger than its memory's.
  bool compute_slack = true;
  // Every device's Device::capacity_mib when they are all the same (most nodes), else -1: the
  // proportional compute shares read it here rather than from the node's devices.
  MiB device_capacity = -1;
  MiB total_free = 0;           // R_n
  int64_t free_cpu_milli = -1;  // -1 = unlimited
  int64_t free_memory_bytes = -1;
  uint64_t satisfied = 0;  // bit m: at least count_m devices can hold spec m (CPU not considered)
  uint64_t cpu_short = 0;  // bit m: the node's free CPU is below spec m's
  uint64_t spare = 0;      // bit m: more than count_m devices can hold spec m (one pick leaves it satisfied)
  // Bit g: no earlier device has device g's free memory, emptiness, spec match and completion
  // table. A pick of a device costs the same as of its earlier twin for a pod without device rules.
  uint64_t distinct = 0;
  // The first device's match mask, which satisfied_prefix() and the other prefixes are for.
  uint64_t prefix_mask = 0;
  // For that mask, the whole-device specs' parts of staying_prefix() and dropping_prefix().
  double whole_staying_weight = 0;
  double whole_dropping = 0;
  int64_t fill_cpu_ample = 0;        // free CPU from which no device spec is CPU-limited in F̂
  int64_t fill_memory_ample = 0;     // free host memory from which none is memory-limited in F̂
  double fragmentation = 0;          // F_n(M) in MiB
  double fill_fragmentation = 0;     // F̂_n(M) in MiB
  double reservation_tightness = 0;  // the policy's CapacityReservation::Tightness(node)
  struct DeviceSlot {
    MiB free = 0;
    uint64_t spec_match = 0;  // bit m: the device can serve spec m at all
    // K(free) of the completion table (completion.h), in MiB; 0 without one. A pick's loss is
    // this less K(free after): one table lookup per candidate device instead of two.
    double completion_value = 0;
    // The policy's CompletionValue table for the device's capacity (-1: none).
    int16_t completion_table = 0;
    // How many fractional specs (the memory-sorted prefix) the device's free memory could hold:
    // Columns::FractionalFit(free), kept because every candidate's ΔF reads it, so that it is
    // computed once per summary rather than once per candidate.
    int8_t fractional_fit = 0;
    bool empty = false;       // healthy, in the pool, no shares, no foreign use
    int8_t free_compute = 0;  // DeviceFreeComputePct
  };

  // Sizes the block for `devices` slots, `specs` tallies and `fractional` specs' prefix sums, all
  // zero; with `compute_tallies`, room for the two-dimensional tallies too.
  void Resize(int devices, int specs, int fractional, bool compute_tallies);
  // Starts loading the block into the cache, for a caller about to score it soon: a caller that
  // scores many nodes in a row finds few summaries in a cache, and the loads cost as much as the
  // arithmetic unless the next node's are under way while this one is scored. No effect on values.
  void Prefetch() const {
    const size_t hot = ColdAt();
    for (size_t offset = 0; offset < hot; offset += kCacheLine) __builtin_prefetch(block_.data() + offset);
  }
  // The first device_count slots.
  DeviceSlot* devices() { return reinterpret_cast<DeviceSlot*>(block_.data()); }
  const DeviceSlot* devices() const { return reinterpret_cast<const DeviceSlot*>(block_.data()); }
  // The fill fragmentation's ingredients (NodeEvaluation::fill_cost), per device spec m: the free
  // memory m could use, CPU aside (fractional: Σ free of the matching devices that hold one;
  // whole: Σ free of the matching empty devices), and for whole specs how many such devices.
  // Both have kFillLanes − 1 zero entries past spec_count, so F̂'s loops read whole lane groups.
  MiB* fill_usable_free() { return At<MiB>(FillUsableFreeAt()); }
  const MiB* fill_usable_free() const { return At<MiB>(FillUsableFreeAt()); }
  int32_t* fill_empty_devices() { return At<int32_t>(FillEmptyDevicesAt()); }
  const int32_t* fill_empty_devices() const { return At<int32_t>(FillEmptyDevicesAt()); }
  // Σ free of devices that cannot hold spec m.
  MiB* unusable_free() { return At<MiB>(UnusableFreeAt()); }
  const MiB* unusable_free() const { return At<MiB>(UnusableFreeAt()); }
  // For the first device's match mask: satisfied_prefix()[i] = Σ weight of fractional specs j < i
  // that the mask matches and that are satisfied (devices and CPU); fractional_count + 1 entries. FGD's
  // per-pick delta needs it; precomputing it here keeps it off the per-pod path.
  double* satisfied_prefix() { return At<double>(SatisfiedPrefixAt()); }
  const double* satisfied_prefix() const { return At<double>(SatisfiedPrefixAt()); }
  // Of those specs, the ones the node would still satisfy after losing one device (spare):
  // staying_prefix()[i] = Σ weight over j < i; and the others: dropping_prefix()[i] =
  // Σ weight · (R_n − unusable free) over j < i. What FGD's per-pick delta sums over the specs a
  // pick takes the device from, while the node is as summarised; fractional_count + 1 entries each.
  double* staying_prefix() { return At<double>(StayingPrefixAt()); }
  const double* staying_prefix() const { return At<double>(StayingPrefixAt()); }
  double* dropping_prefix() { return At<double>(DroppingPrefixAt()); }
  const double* dropping_prefix() const { return At<double>(DroppingPrefixAt()); }
  // q_n(m): devices with room for spec m.
  int16_t* usable() { return At<int16_t>(UsableAt()); }
  const int16_t* usable() const { return At<int16_t>(UsableAt()); }
  // The two-dimensional tallies (compute_cost.h) of the node as it is, kept where some typical
  // spec names a compute share of its own (Columns::own_compute), so that a pod scored in two
  // dimensions does not count them per node: per device the specs it can hold, per spec the
  // devices that can hold it and the free memory none can, and which specs enough devices can
  // hold. Absent (has_compute_tallies() false) otherwise.
  bool has_compute_tallies() const { return compute_tallies_; }
  uint64_t compute_satisfied = 0;
  uint64_t* compute_usable_masks() { return At<uint64_t>(ComputeMasksAt()); }
  const uint64_t* compute_usable_masks() const { return At<uint64_t>(ComputeMasksAt()); }
  MiB* compute_unusable_free() { return At<MiB>(ComputeUnusableFreeAt()); }
  const MiB* compute_unusable_free() const { return At<MiB>(ComputeUnusableFreeAt()); }
  int16_t* compute_usable() { return At<int16_t>(ComputeUsableAt()); }
  const int16_t* compute_usable() const { return At<int16_t>(ComputeUsableAt()); }

 private:
  // Byte offsets in the block, widest members first so each stays aligned.
  size_t FillUsableFreeAt() const { return sizeof(DeviceSlot) * static_cast<size_t>(device_count); }
  // The parts a single pick reads come first, up to ColdAt(): Prefetch loads only those.
  size_t FillTallies() const { return static_cast<size_t>(spec_count + kFillLanes - 1); }
  size_t SatisfiedPrefixAt() const { return FillUsableFreeAt() + sizeof(MiB) * FillTallies(); }
  size_t PrefixBytes() const { return sizeof(double) * static_cast<size_t>(fractional_count + 1); }
  size_t StayingPrefixAt() const { return SatisfiedPrefixAt() + PrefixBytes(); }
  size_t DroppingPrefixAt() const { return StayingPrefixAt() + PrefixBytes(); }
  size_t FillEmptyDevicesAt() const { return DroppingPrefixAt() + PrefixBytes(); }
  // Rounded up to an even count of int32s, so the 8-byte members after it stay aligned.
  size_t ColdAt() const { return FillEmptyDevicesAt() + sizeof(int32_t) * ((FillTallies() + 1) & ~size_t{1}); }
  size_t UnusableFreeAt() const { return ColdAt(); }
  size_t UsableAt() const { return UnusableFreeAt() + sizeof(MiB) * static_cast<size_t>(spec_count); }
  size_t UsableEnd() const { return UsableAt() + sizeof(int16_t) * static_cast<size_t>(spec_count); }
  // The two-dimensional tallies, when kept, after the rest: rounded up to 8 bytes for the masks.
  size_t ComputeMasksAt() const { return (UsableEnd() + 7) & ~size_t{7}; }
  size_t ComputeUnusableFreeAt() const {
    return ComputeMasksAt() + sizeof(uint64_t) * static_cast<size_t>(device_count);
  }
  size_t ComputeUsableAt() const { return ComputeUnusableFreeAt() + sizeof(MiB) * static_cast<size_t>(spec_count); }
  size_t End() const {
    return compute_tallies_ ? ComputeUsableAt() + sizeof(int16_t) * static_cast<size_t>(spec_count) : UsableEnd();
  }
  template <typename T>
  T* At(size_t offset) {
    return reinterpret_cast<T*>(block_.data() + offset);
  }
  template <typename T>
  const T* At(size_t offset) const {
    return reinterpret_cast<const T*>(block_.data() + offset);
  }

  static constexpr size_t kCacheLine = 64;
  bool compute_tallies_ = false;
  std::vector<std::byte> block_;  // operator new's alignment suits every member
};

// The specs a device can hold one copy of by its memory alone (q_n(m)'s devices): of those its sort
// matches, the fractional prefix its free memory holds and, while it is empty, the whole-device
// specs in `whole`.
inline uint64_t UsableByMemory(const NodeSummary::DeviceSlot& slot, uint64_t whole) {
  return slot.spec_match & (FirstBits(slot.fractional_fit) | (slot.empty ? whole : 0));
}

}  // namespace gpupack::placement

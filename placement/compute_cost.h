// Internal to placement/ (not for callers outside it): FGD's expected fragmentation F_n(M) in two
// dimensions, memory and compute, for the evaluations that need it (a pod or a typical shape that
// names a compute share, device_pick.cc).
//
// A device can hold one copy of spec m when it matches m's sort and, for a fractional spec, has
// m's memory free and m's compute share free (the spec's own, else ProportionalComputePct of its
// memory on that device); a whole-device spec needs the device empty. Then, as in one dimension,
// F_n(m) = R_n when the node cannot host m (fewer such devices than m needs, or too little CPU),
// else the free memory of the devices that cannot hold m, and F_n(M) = Σ_m p_m · F_n(m) in MiB. So
// the free memory of a device whose compute is gone is a fragment for every spec that needs
// compute. On a node whose shares all reserve their memory's share (NodeSummary::compute_slack)
// and specs without compute shares of their own it equals the one-dimensional F (fgd_cost.h), and
// the tallies start as the node summary's.
//
// A candidate device's ΔF costs O(specs whose usability on it flips) plus a sum of weights; a
// pick O(specs); the start O(specs) from the summary, else O(devices × specs) (each device's
// usable specs found once per state: twins share them).
#pragma once

#include <array>
#include <cstdint>

#include "placement/columns.h"
#include "placement/node_summary.h"
#include "placement/vocabulary.h"

namespace gpupack::placement {

// One device as the two-dimensional tallies see it.
// No member initialisers: the arrays of them the evaluations keep per node are filled, never zeroed.
struct ComputeDevice {
  MiB free;
  int free_compute;
  bool empty;
  uint64_t spec_match;  // NodeSummary::DeviceSlot::spec_match
  MiB capacity;         // Device::capacity_mib, for the proportional shares
};

// Device g of a summary, of Device::capacity_mib `capacity`.
inline ComputeDevice ComputeDeviceOf(const NodeSummary::DeviceSlot& slot, MiB capacity) {
  return ComputeDevice{slot.free, slot.free_compute, slot.empty, slot.spec_match, capacity};
}

class ComputeFragmentation {
 public:
  // User-provided, so that optional::emplace (once per node evaluated) does not zero the arrays
  // first; Start fills what is read.
  ComputeFragmentation() {}
  // The tallies of `devices` (n of them) with the node's CPU short of the specs in `cpu_short`.
  // `summary`: the node's summary (of these devices) when it has the tallies, so they are copied
  // rather than counted again: its two-dimensional ones where it keeps them, else its
  // one-dimensional ones, which are these too when its shares leave every device its memory's
  // compute (NodeSummary::compute_slack) and no spec names a share of its own. Else null.
  void Start(const Columns& c, const ComputeDevice* devices, int n, uint64_t cpu_short, const NodeSummary* summary);
  // Whether `summary` has the tallies Start can copy, for specs `c`.
  static bool SummaryHasTallies(const Columns& c, const NodeSummary& summary) {
    return summary.has_compute_tallies() || (summary.compute_slack && c.own_compute == 0);
  }
  // Writes the tallies as they are into `summary`'s two-dimensional ones.
  // REQUIRES: summary.has_compute_tallies(), of the devices Start was given.
  void Export(NodeSummary& summary) const;
  // F_n(M) of the current state.
  double Value() const { return ValueWith(cpu_short_); }
  // F_n(M) of the current state were the node's CPU short of the specs in `cpu_short` instead.
  double ValueWith(uint64_t cpu_short) const;
  // F after device `g` goes to (new_free, new_compute), no longer empty, less F now.
  double Delta(int g, MiB new_free, int new_compute) const;
  // Applies that change.
  void Apply(int g, MiB new_free, int new_compute);
  // Devices in the same state give the same Delta for the same change.
  static bool SameState(const ComputeDevice& a, const ComputeDevice& b);
  const ComputeDevice& device(int g) const { return devices_[g]; }

 private:
  // Bit m: d can hold one copy of spec m (above).
  uint64_t UsableMask(const ComputeDevice& d) const;
  // Delta, given the usable mask of device g after the change.
  double DeltaTo(int g, MiB new_free, uint64_t now_mask) const;
  double Term(int m, int usable, MiB unusable_free, MiB total_free) const;
  static ComputeDevice After(const ComputeDevice& d, MiB new_free, int new_compute);
  // Bit m: usable_[m] ≥ spec m's count.
  uint64_t CountSatisfied() const;
  // satisfied_, and feasible_ from it and cpu_short_.
  void SetSatisfied(uint64_t satisfied);

  const Columns* c_ = nullptr;
  uint64_t specs_ = 0;           // bit m for every spec
  uint64_t zero_mem_specs_ = 0;  // whole-device and CPU-only specs: they need an empty device
  uint64_t cpu_short_ = 0;
  std::array<uint64_t, kMaxDevicesPerNode> usable_mask_;
  uint64_t satisfied_ = 0;  // bit m: enough devices can hold spec m (usable_[m] ≥ its count)
  uint64_t feasible_ = 0;   // satisfied_ less cpu_short_: bit m, spec m's term is its unusable free memory
  MiB total_free_ = 0;
  std::array<ComputeDevice, kMaxDevicesPerNode> devices_;
  std::array<int16_t, kMaxTypicalSpecs> usable_;
  std::array<MiB, kMaxTypicalSpecs> unusable_free_;
};

}  // namespace gpupack::placement

// Internal to placement/ (not for callers outside it): FGD's expected fragmentation F_n(M) and
// the fill fragmentation F̂_n(M) of a node (docs/fragmentation.md), and their change when a pod
// takes devices. Policy::Summarize computes both once per node state; the device pick
// (device_pick.cc) asks DeltaEvaluator for the ΔF of each candidate device and follows F̂ with
// FillPick. The per-pick pieces are inline: they run once per (node, pod, device) on the hot path.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

#include "placement/columns.h"
#include "placement/node_summary.h"

namespace gpupack::placement {

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

// ⌊a / b⌋ for a ≥ 0, b > 0 as a multiplication by the precomputed 1/b: the hot loop cannot
// afford a division per spec. The epsilon absorbs the rounding of 1/b, which is far below the
// distance 1/b from any exact quotient to the next integer for the sizes involved (< 2^31).
inline int64_t FloorDiv(int64_t a, double inverse) {
  return static_cast<int64_t>(static_cast<double>(a) * inverse + 1e-9);
}

// One device pick as the fill tallies see it: the device's spec match mask, and its free memory
// before (and whether it was empty) and after. A match of 0 is no pick.
struct FillMove {
  uint64_t match = 0;
  MiB old_free = 0;
  bool old_empty = false;
  MiB new_free = 0;
};

// F̂_n(M) of a state (NodeEvaluation::fill_cost): Σ_m p_m · (R_n − U_n(m)), with the tallies as
// `move` leaves them (so a single pick needs no copy of them). `free_cpu` and `free_memory` (host
// memory, bytes) < 0 mean unlimited.
double FillFragmentation(const Columns& c, const int32_t* empty_devices, const MiB* usable_free, int64_t free_cpu,
                         int64_t free_memory, MiB total_free, const FillMove& move = {});

// The change of spec m's usable free memory in the fill tallies when a device it matches goes from
// (old_free, old_empty) to new_free, no longer empty. `spec_mem` 0: a whole spec.
inline MiB UsableFreeChange(MiB spec_mem, MiB old_free, bool old_empty, MiB new_free) {
  if (spec_mem > 0) return (new_free >= spec_mem ? new_free : 0) - (old_free >= spec_mem ? old_free : 0);
  return old_empty ? -old_free : 0;
}

// Moves one device's contribution to the fill tallies from (old_free, old_empty) to new_free (no
// longer empty). Null tallies are skipped. Returns Σ_m p_m · Δusable_m: while the node's CPU
// feeds every spec and no whole spec needs several devices, U_n(m) = usable_m and so
// ΔF̂ = W·ΔR − that sum.
inline double FillPick(const Columns& c, uint64_t match, MiB old_free, bool old_empty, MiB new_free,
                       int32_t* empty_devices, MiB* usable_free) {
  double weighted = 0;
  for (uint64_t bits = match & FirstBits(c.n_device); bits != 0; bits &= bits - 1) {
    const int m = std::countr_zero(bits);
    const MiB delta = UsableFreeChange(c.mem[m], old_free, old_empty, new_free);
    if (empty_devices != nullptr && c.mem[m] == 0 && old_empty) empty_devices[m] -= 1;
    if (usable_free != nullptr) usable_free[m] += delta;
    weighted += c.weight[m] * static_cast<double>(delta);
  }
  return weighted;
}

// U_n(m) of a whole spec of `count` devices when the CPU feeds every copy: the free memory of
// the empty devices that whole copies take (FillFragmentation's rounding).
MiB WholeCopiesFree(MiB usable_free, int32_t empty_devices, int32_t count);

// The free amount of one resource (CPU, or host memory), of which spec m needs need[m] per copy
// (0: none), from which the node feeds every device spec all the device memory it could use.
int64_t FillAmple(const Columns& c, const int32_t* empty_devices, const MiB* usable_free, const int64_t* need);

inline bool UsableFor(MiB spec_mem, MiB free, bool empty) { return spec_mem == 0 ? empty : free >= spec_mem; }

// F_n(M) of a state. `cpu_short` has bit m set when the node's free CPU is below spec m's.
double Fragmentation(const Columns& c, const WorkState& st, uint64_t cpu_short);

// Moves device `slot` from (free, empty) to (new_free, not empty), updating the per-spec tallies.
inline void ChangeDevice(const Columns& c, const NodeSummary& sum, WorkState& st, int slot, MiB new_free) {
  const MiB old_free = st.free[slot];
  const bool old_empty = st.empty[slot];
  const uint64_t match = sum.devices()[slot].spec_match;
  for (int m = 0; m < c.n; ++m) {
    const bool matched = (match >> m) & 1;
    const bool was = matched && UsableFor(c.mem[m], old_free, old_empty);
    const bool now = matched && c.mem[m] != 0 && new_free >= c.mem[m];
    st.usable[m] = static_cast<int16_t>(st.usable[m] + now - was);
    st.unusable_free[m] += (now ? 0 : new_free) - (was ? 0 : old_free);
  }
  st.total_free += new_free - old_free;
  st.free[slot] = new_free;
  st.empty[slot] = false;
}

// Bit m: more than count_m devices can hold spec m in these tallies.
inline uint64_t SpareMask(const Columns& c, const int16_t* usable) {
  uint64_t mask = 0;
  for (int m = 0; m < c.n; ++m) mask |= static_cast<uint64_t>(usable[m] > c.count[m]) << m;
  return mask;
}

// Evaluates ΔF = F(after one device change) − F(now) in O(log M + specs whose usability
// flips), instead of O(M): for a spec that neither gains nor loses the device, F moves by
// exactly w·Δf unless the spec stays satisfied with the device usable before and after, when
// it moves by 0. Those specs are a prefix of the memory-sorted fractional specs, summed once per
// device match mask. A spec that loses the device moves by w·Δf plus: nothing if it was not
// satisfied (it stays so), w·f_old if it stays satisfied (the device's memory joins the
// unusable), w·(R − unusable) if it stops being satisfied. Valid until the state changes.
class DeltaEvaluator {
 public:
  // `feasible` bit m: spec m is satisfied in `st` (enough usable devices and CPU).
  // The per-spec tallies come from `usable` / `unusable_free` (the summary's until the first
  // pick changes them, so the common single-pick case copies nothing).
  DeltaEvaluator(const Columns& c, const NodeSummary& sum, const WorkState& st, const int16_t* usable,
                 const MiB* unusable_free, uint64_t feasible)
      : c_(c),
        sum_(sum),
        st_(st),
        unusable_free_(unusable_free),
        feasible_(feasible),
        spare_(usable == sum.usable() ? sum.spare : SpareMask(c, usable)),
        whole_(BitRange(c.n_fractional, c.n_device)),
        as_summarised_(usable == sum.usable() && feasible == (sum.satisfied & ~sum.cpu_short)),
        satisfied_prefix_(sum.satisfied_prefix()),
        staying_prefix_(sum.staying_prefix()),
        dropping_prefix_(sum.dropping_prefix()) {}

  double Delta(int slot, MiB new_free) {
    const MiB old_free = st_.free[slot];
    const MiB df = new_free - old_free;
    const NodeSummary::DeviceSlot& device = sum_.devices()[slot];
    const uint64_t match = device.spec_match;
    if (as_summarised_ && match == sum_.prefix_mask) return SummarisedDelta(device, slot, new_free);
    // Specs [ub_new, ub_old) could use the device before and cannot after (ub_old is in the
    // summary while the device is unchanged).
    const int ub_old = old_free == device.free ? device.fractional_fit : c_.FractionalFit(old_free);
    const int ub_new = c_.FractionalFit(new_free);
    uint64_t losing = BitRange(ub_new, ub_old) | (st_.empty[slot] ? whole_ : 0);
    losing &= match & feasible_;
    double staying_weight = 0;
    for (uint64_t bits = losing & spare_; bits != 0; bits &= bits - 1)
      staying_weight += c_.weight[std::countr_zero(bits)];
    double dropping = 0;
    for (uint64_t bits = losing & ~spare_; bits != 0; bits &= bits - 1) {
      const int m = std::countr_zero(bits);
      dropping += c_.weight[m] * static_cast<double>(st_.total_free - unusable_free_[m]);
    }
    return static_cast<double>(df) * (c_.total_weight - Prefix(match, ub_new)) +
           static_cast<double>(old_free) * staying_weight + dropping;
  }

 private:
  // Delta from the summary's prefix sums, in O(log M): the node as summarised (the device's free
  // memory too) and a device of the first device's specs.
  double SummarisedDelta(const NodeSummary::DeviceSlot& device, int slot, MiB new_free) const {
    const int ub_old = device.fractional_fit;
    const int ub_new = c_.FractionalFit(new_free);
    const bool empty = st_.empty[slot];
    const double staying_weight =
        staying_prefix_[ub_old] - staying_prefix_[ub_new] + (empty ? sum_.whole_staying_weight : 0.0);
    const double dropping = dropping_prefix_[ub_old] - dropping_prefix_[ub_new] + (empty ? sum_.whole_dropping : 0.0);
    return static_cast<double>(new_free - device.free) * (c_.total_weight - satisfied_prefix_[ub_new]) +
           static_cast<double>(device.free) * staying_weight + dropping;
  }

  // Bits [from, to).
  static uint64_t BitRange(int from, int to) { return from >= to ? 0 : FirstBits(to) & ~FirstBits(from); }

  // Σ weight of fractional specs j < upto that the mask matches and that are satisfied. Prefix
  // sums are kept per mask and extended only as far as a query needs.
  double Prefix(uint64_t match, int upto) {
    if (match == sum_.prefix_mask && feasible_ == (sum_.satisfied & ~sum_.cpu_short)) return satisfied_prefix_[upto];
    int slot = -1;
    for (int i = 0; i < cached_; ++i) {
      if (masks_[i] == match) slot = i;
    }
    if (slot < 0) {
      slot = cached_ < kCache ? cached_++ : 0;
      masks_[slot] = match;
      filled_[slot] = 0;
      prefixes_[slot][0] = 0;
    }
    auto& p = prefixes_[slot];
    const uint64_t bits = match & feasible_;
    for (int m = filled_[slot]; m < upto; ++m) p[m + 1] = p[m] + (((bits >> m) & 1) ? c_.weight[m] : 0.0);
    filled_[slot] = std::max(filled_[slot], upto);
    return p[upto];
  }

  static constexpr int kCache = 4;
  const Columns& c_;
  const NodeSummary& sum_;
  const WorkState& st_;
  const MiB* unusable_free_;
  const uint64_t feasible_;
  const uint64_t spare_;  // bit m: the tallies leave spec m satisfied after losing one device
  const uint64_t whole_;  // the whole-device specs
  // The tallies and the satisfied specs are the summary's: SummarisedDelta applies.
  const bool as_summarised_;
  // The summary's prefix sums, located once per pick rather than once per device.
  const double* const satisfied_prefix_;
  const double* const staying_prefix_;
  const double* const dropping_prefix_;
  int cached_ = 0;
  std::array<uint64_t, kCache> masks_;
  std::array<int, kCache> filled_;
  std::array<std::array<double, kMaxTypicalSpecs + 1>, kCache> prefixes_;
};

// Bit m set when the node's free CPU (< 0: unlimited) is below spec m's; 0 from max_cpu up.
inline uint64_t CpuShortMask(const Columns& c, int64_t free_cpu) {
  if (free_cpu < 0 || free_cpu >= c.max_cpu) return 0;
  uint64_t mask = 0;
  for (int m = 0; m < c.n; ++m) mask |= static_cast<uint64_t>(free_cpu < c.cpu[m]) << m;
  return mask;
}

}  // namespace gpupack::placement

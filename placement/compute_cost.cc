#include "placement/compute_cost.h"

#include <algorithm>
#include <bit>

namespace gpupack::placement {

uint64_t ComputeFragmentation::UsableMask(const ComputeDevice& d) const {
  const uint64_t candidates = d.spec_match & specs_;
  const uint64_t whole = d.empty ? candidates & zero_mem_specs_ : 0;
  // spec_match holds device specs only (SpecMatch), and those with memory are the fractional
  // prefix, ordered by it (columns.h).
  const uint64_t fits = FirstBits(c_->FractionalFit(d.free)) & candidates;
  if (fits == 0) return whole;
  // The specs without shares of their own whose memory's share the free compute holds are a
  // prefix by memory too (model::LargestMemoryWithinComputePct); those with one are checked one by
  // one.
  const MiB compute_bound = model::LargestMemoryWithinComputePct(d.free_compute, d.capacity);
  uint64_t compute_ok = FirstBits(c_->FractionalFit(compute_bound)) & ~c_->own_compute;
  for (uint64_t bits = fits & c_->own_compute; bits != 0; bits &= bits - 1) {
    const int m = std::countr_zero(bits);
    if (c_->compute[m] <= d.free_compute) compute_ok |= uint64_t{1} << m;
  }
  return whole | (fits & compute_ok);
}

double ComputeFragmentation::Term(int m, int usable, MiB unusable_free, MiB total_free) const {
  const bool infeasible = ((cpu_short_ >> m) & 1) || usable < c_->count[m];
  return c_->weight[m] * static_cast<double>(infeasible ? total_free : unusable_free);
}

void ComputeFragmentation::Start(const Columns& c, const ComputeDevice* devices, int n, uint64_t cpu_short,
                                 const NodeSummary* summary) {
  c_ = &c;
  cpu_short_ = cpu_short;
  specs_ = FirstBits(c.n);
  zero_mem_specs_ = specs_ & ~FirstBits(c.n_fractional);  // the specs after the fractional prefix
  total_free_ = 0;
  for (int g = 0; g < n; ++g) {
    devices_[g] = devices[g];
    total_free_ += devices[g].free;
  }
  if (summary != nullptr && summary->has_compute_tallies()) {
    std::copy_n(summary->compute_usable_masks(), n, usable_mask_.begin());
    std::copy_n(summary->compute_usable(), c.n, usable_.begin());
    std::copy_n(summary->compute_unusable_free(), c.n, unusable_free_.begin());
    SetSatisfied(summary->compute_satisfied);
    return;
  }
  if (summary != nullptr) {
    // Every spec's compute fits wherever its memory does: the masks are the summary's (SummarizeSpecs).
    const NodeSummary::DeviceSlot* slots = summary->devices();
    for (int g = 0; g < n; ++g) usable_mask_[g] = UsableByMemory(slots[g], zero_mem_specs_);
    std::copy_n(summary->usable(), c.n, usable_.begin());
    std::copy_n(summary->unusable_free(), c.n, unusable_free_.begin());
    SetSatisfied(summary->satisfied);
    return;
  }
  for (int g = 0; g < n; ++g) {
    // A device in the same state as an earlier one (most nodes have twins) has its mask.
    int twin = 0;
    while (twin < g && !SameState(devices_[twin], devices_[g])) ++twin;
    usable_mask_[g] = twin < g ? usable_mask_[twin] : UsableMask(devices_[g]);
  }
  std::array<MiB, kMaxTypicalSpecs> usable_free;
  for (int m = 0; m < c.n; ++m) {
    usable_[m] = 0;
    usable_free[m] = 0;
  }
  for (int g = 0; g < n; ++g) {
    for (uint64_t bits = usable_mask_[g]; bits != 0; bits &= bits - 1) {
      const int m = std::countr_zero(bits);
      ++usable_[m];
      usable_free[m] += devices_[g].free;
    }
  }
  for (int m = 0; m < c.n; ++m) unusable_free_[m] = total_free_ - usable_free[m];
  SetSatisfied(CountSatisfied());
}

void ComputeFragmentation::Export(NodeSummary& summary) const {
  std::copy_n(usable_mask_.begin(), summary.device_count, summary.compute_usable_masks());
  std::copy_n(usable_.begin(), c_->n, summary.compute_usable());
  std::copy_n(unusable_free_.begin(), c_->n, summary.compute_unusable_free());
  summary.compute_satisfied = satisfied_;
}

uint64_t ComputeFragmentation::CountSatisfied() const {
  uint64_t satisfied = 0;
  for (int m = 0; m < c_->n; ++m) satisfied |= uint64_t{usable_[m] >= c_->count[m]} << m;
  return satisfied;
}

void ComputeFragmentation::SetSatisfied(uint64_t satisfied) {
  satisfied_ = satisfied;
  feasible_ = satisfied & ~cpu_short_;
}

double ComputeFragmentation::ValueWith(uint64_t cpu_short) const {
  const uint64_t feasible = satisfied_ & ~cpu_short;
  double value = 0;
  for (int m = 0; m < c_->n; ++m) {
    value += c_->weight[m] * static_cast<double>((feasible >> m) & 1 ? unusable_free_[m] : total_free_);
  }
  return value;
}

bool ComputeFragmentation::SameState(const ComputeDevice& a, const ComputeDevice& b) {
  return a.free == b.free && a.free_compute == b.free_compute && a.empty == b.empty && a.spec_match == b.spec_match &&
         a.capacity == b.capacity;
}

double ComputeFragmentation::Delta(int g, MiB new_free, int new_compute) const {
  return DeltaTo(g, new_free, UsableMask(After(devices_[g], new_free, new_compute)));
}

double ComputeFragmentation::DeltaTo(int g, MiB new_free, uint64_t now_mask) const {
  const ComputeDevice& before = devices_[g];
  const MiB change = new_free - before.free;
  const uint64_t was_mask = usable_mask_[g];
  const uint64_t changed = was_mask ^ now_mask;
  // A spec the device can hold both before and after, or neither, keeps its usable count, so its
  // feasibility: a feasible one it holds keeps its unusable free memory too (its term is unchanged),
  // and every other one's term is its weight times free memory that changes by `change` (the
  // node's total when it is infeasible, the unusable memory when the device cannot hold it).
  const uint64_t steady = specs_ & ~changed & ~(was_mask & feasible_);
  double steady_weight = 0;
  for (uint64_t bits = steady; bits != 0; bits &= bits - 1) steady_weight += c_->weight[std::countr_zero(bits)];
  double delta = steady_weight * static_cast<double>(change);
  const MiB total_after = total_free_ + change;
  for (uint64_t bits = changed; bits != 0; bits &= bits - 1) {
    const int m = std::countr_zero(bits);
    const bool was = (was_mask >> m) & 1;
    const int usable = usable_[m] - was + !was;
    const MiB unusable_free = unusable_free_[m] - (was ? 0 : before.free) + (was ? new_free : 0);
    delta += Term(m, usable, unusable_free, total_after) - Term(m, usable_[m], unusable_free_[m], total_free_);
  }
  return delta;
}

void ComputeFragmentation::Apply(int g, MiB new_free, int new_compute) {
  ComputeDevice& d = devices_[g];
  const ComputeDevice after = After(d, new_free, new_compute);
  const uint64_t was_mask = usable_mask_[g];
  const uint64_t now_mask = UsableMask(after);
  for (int m = 0; m < c_->n; ++m) {
    const bool was = (was_mask >> m) & 1;
    const bool now = (now_mask >> m) & 1;
    usable_[m] = static_cast<int16_t>(usable_[m] - was + now);
    unusable_free_[m] += (now ? 0 : new_free) - (was ? 0 : d.free);
  }
  total_free_ += new_free - d.free;
  d = after;
  usable_mask_[g] = now_mask;
  SetSatisfied(CountSatisfied());
}

ComputeDevice ComputeFragmentation::After(const ComputeDevice& d, MiB new_free, int new_compute) {
  ComputeDevice after = d;
  after.free = new_free;
  after.free_compute = new_compute;
  after.empty = false;
  return after;
}

}  // namespace gpupack::placement

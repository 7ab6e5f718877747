#include "placement/compute_cost.h"

#include <bit>

namespace gpupack::placement {

uint64_t ComputeFragmentation::UsableMask(const ComputeDevice& d) const {
  const uint64_t candidates = d.spec_match & specs_;
  const uint64_t whole = d.empty ? candidates & zero_mem_specs_ : 0;
  // spec_match holds device specs only (SpecMatch), and those with memory are the fractional
  // prefix, ordered by it (columns.h).
  const uint64_t fits = FirstBits(c_->FractionalFit(d.free)) & candidates;
  if (fits == 0) return whole;
  uint64_t compute_ok = 0;
  if (d.capacity == proportional_capacity_) {
    const int last = std::bit_width(fits);  // fits is within the first `last` specs
    for (int m = 0; m < last; ++m) compute_ok |= uint64_t{need_[m] <= d.free_compute} << m;
  } else {
    for (uint64_t bits = fits; bits != 0; bits &= bits - 1) {
      const int m = std::countr_zero(bits);
      const int need = c_->compute[m] > 0 ? c_->compute[m] : model::ProportionalComputePct(c_->mem[m], d.capacity);
      if (need <= d.free_compute) compute_ok |= uint64_t{1} << m;
    }
  }
  return whole | (fits & compute_ok);
}

double ComputeFragmentation::Term(int m, int usable, MiB unusable_free, MiB total_free) const {
  const bool infeasible = ((cpu_short_ >> m) & 1) || usable < c_->count[m];
  return c_->weight[m] * static_cast<double>(infeasible ? total_free : unusable_free);
}

void ComputeFragmentation::Start(const Columns& c, const ComputeDevice* devices, int n, uint64_t cpu_short) {
  c_ = &c;
  specs_ = FirstBits(c.n);
  zero_mem_specs_ = 0;
  // Most nodes have one device size: the specs' shares are computed once for it.
  proportional_capacity_ = n > 0 ? devices[0].capacity : 0;
  for (int m = 0; m < c.n; ++m) {
    if (c.mem[m] == 0) zero_mem_specs_ |= uint64_t{1} << m;
    need_[m] = c.compute[m] > 0 ? c.compute[m] : model::ProportionalComputePct(c.mem[m], proportional_capacity_);
  }
  total_free_ = 0;
  for (int g = 0; g < n; ++g) {
    devices_[g] = devices[g];
    total_free_ += devices[g].free;
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
  SetCpuShort(cpu_short);
}

void ComputeFragmentation::SetCpuShort(uint64_t cpu_short) {
  cpu_short_ = cpu_short;
  value_ = 0;
  for (int m = 0; m < c_->n; ++m) {
    term_[m] = Term(m, usable_[m], unusable_free_[m], total_free_);
    value_ += term_[m];
  }
  UpdateFeasible();
}

void ComputeFragmentation::UpdateFeasible() {
  feasible_ = 0;
  for (int m = 0; m < c_->n; ++m) {
    if (!((cpu_short_ >> m) & 1) && usable_[m] >= c_->count[m]) feasible_ |= uint64_t{1} << m;
  }
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
  const MiB total_after = total_free_ + new_free - before.free;
  const uint64_t was_mask = usable_mask_[g];
  // A feasible spec the device can hold before and after keeps its usable count and its unusable
  // free memory, so its term is unchanged: its difference would be exactly +0.
  const uint64_t unchanged = was_mask & now_mask & feasible_;
  double delta = 0;
  for (uint64_t bits = specs_ & ~unchanged; bits != 0; bits &= bits - 1) {
    const int m = std::countr_zero(bits);
    const bool was = (was_mask >> m) & 1;
    const bool now = (now_mask >> m) & 1;
    const int usable = usable_[m] - was + now;
    const MiB unusable_free = unusable_free_[m] - (was ? 0 : before.free) + (now ? 0 : new_free);
    delta += Term(m, usable, unusable_free, total_after) - term_[m];
  }
  return delta;
}

void ComputeFragmentation::Apply(int g, MiB new_free, int new_compute) {
  ComputeDevice& d = devices_[g];
  const ComputeDevice after = After(d, new_free, new_compute);
  const uint64_t was_mask = usable_mask_[g];
  const uint64_t now_mask = UsableMask(after);
  const double delta = DeltaTo(g, new_free, now_mask);
  for (int m = 0; m < c_->n; ++m) {
    const bool was = (was_mask >> m) & 1;
    const bool now = (now_mask >> m) & 1;
    usable_[m] = static_cast<int16_t>(usable_[m] - was + now);
    unusable_free_[m] += (now ? 0 : new_free) - (was ? 0 : d.free);
  }
  total_free_ += new_free - d.free;
  d = after;
  usable_mask_[g] = now_mask;
  for (int m = 0; m < c_->n; ++m) term_[m] = Term(m, usable_[m], unusable_free_[m], total_free_);
  UpdateFeasible();
  value_ += delta;
}

ComputeDevice ComputeFragmentation::After(const ComputeDevice& d, MiB new_free, int new_compute) {
  ComputeDevice after = d;
  after.free = new_free;
  after.free_compute = new_compute;
  after.empty = false;
  return after;
}

}  // namespace gpupack::placement

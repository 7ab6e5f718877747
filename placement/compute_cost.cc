#include "placement/compute_cost.h"

namespace gpupack::placement {

bool ComputeFragmentation::Usable(int m, const ComputeDevice& d) const {
  if (!((d.spec_match >> m) & 1)) return false;
  const MiB mem = c_->mem[m];
  if (mem == 0) return d.empty;
  if (d.free < mem) return false;
  const int need = c_->compute[m] > 0 ? c_->compute[m] : model::ProportionalComputePct(mem, d.capacity);
  return d.free_compute >= need;
}

double ComputeFragmentation::Term(int m, int usable, MiB unusable_free, MiB total_free) const {
  const bool infeasible = ((cpu_short_ >> m) & 1) || usable < c_->count[m];
  return c_->weight[m] * static_cast<double>(infeasible ? total_free : unusable_free);
}

void ComputeFragmentation::Start(const Columns& c, const ComputeDevice* devices, int n, uint64_t cpu_short) {
  c_ = &c;
  n_ = n;
  cpu_short_ = cpu_short;
  total_free_ = 0;
  for (int g = 0; g < n; ++g) {
    devices_[g] = devices[g];
    total_free_ += devices[g].free;
  }
  value_ = 0;
  for (int m = 0; m < c.n; ++m) {
    int usable = 0;
    MiB unusable_free = 0;
    for (int g = 0; g < n; ++g) {
      if (Usable(m, devices_[g])) {
        ++usable;
      } else {
        unusable_free += devices_[g].free;
      }
    }
    usable_[m] = static_cast<int16_t>(usable);
    unusable_free_[m] = unusable_free;
    value_ += Term(m, usable, unusable_free, total_free_);
  }
}

double ComputeFragmentation::Delta(int g, MiB new_free, int new_compute) const {
  const ComputeDevice& before = devices_[g];
  ComputeDevice after = before;
  after.free = new_free;
  after.free_compute = new_compute;
  after.empty = false;
  const MiB total_after = total_free_ + new_free - before.free;
  double delta = 0;
  for (int m = 0; m < c_->n; ++m) {
    const bool was = Usable(m, before);
    const bool now = Usable(m, after);
    const int usable = usable_[m] - was + now;
    const MiB unusable_free = unusable_free_[m] - (was ? 0 : before.free) + (now ? 0 : new_free);
    delta += Term(m, usable, unusable_free, total_after) - Term(m, usable_[m], unusable_free_[m], total_free_);
  }
  return delta;
}

void ComputeFragmentation::Apply(int g, MiB new_free, int new_compute) {
  value_ += Delta(g, new_free, new_compute);
  ComputeDevice& d = devices_[g];
  ComputeDevice after = d;
  after.free = new_free;
  after.free_compute = new_compute;
  after.empty = false;
  for (int m = 0; m < c_->n; ++m) {
    const bool was = Usable(m, d);
    const bool now = Usable(m, after);
    usable_[m] = static_cast<int16_t>(usable_[m] - was + now);
    unusable_free_[m] += (now ? 0 : new_free) - (was ? 0 : d.free);
  }
  total_free_ += new_free - d.free;
  d = after;
}

}  // namespace gpupack::placement

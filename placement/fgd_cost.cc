#include "placement/fgd_cost.h"

namespace gpupack::placement {

double FillFragmentation(const Columns& c, const int32_t* empty_devices, const MiB* usable_free, int64_t free_cpu,
                         int64_t free_memory, MiB total_free, const FillMove& move) {
  constexpr int64_t kUnlimited = int64_t{1} << 40;
  // Copies of m the CPU and the host memory can feed; without a limit, as many as the devices hold.
  auto fed = [&](int m) {
    int64_t copies = free_cpu >= 0 && c.cpu[m] > 0 ? FloorDiv(free_cpu, c.inv_cpu[m]) : kUnlimited;
    if (free_memory >= 0 && c.host_memory[m] > 0)
      copies = std::min(copies, FloorDiv(free_memory, c.inv_host_memory[m]));
    return copies;
  };
  double f = 0;
  for (int m = 0; m < c.n_fractional; ++m) {
    MiB usable = usable_free[m];
    if ((move.match >> m) & 1) usable += UsableFreeChange(c.mem[m], move.old_free, move.old_empty, move.new_free);
    const MiB used = usable > 0 ? std::min<MiB>(usable, fed(m) * c.count[m] * c.mem[m]) : 0;
    f += c.weight[m] * static_cast<double>(total_free - std::min(used, total_free));
  }
  for (int m = c.n_fractional; m < c.n_device; ++m) {
    MiB usable = usable_free[m];
    int32_t empty = empty_devices[m];
    if ((move.match >> m) & 1) {
      usable += UsableFreeChange(0, move.old_free, move.old_empty, move.new_free);
      empty -= move.old_empty;
    }
    MiB used = 0;
    if (usable > 0) {
      // Whole devices: k copies take k·count of the empty devices, each with its free memory.
      const int64_t devices = std::min<int64_t>(empty / c.count[m], fed(m)) * c.count[m];
      used = usable * devices / empty;
    }
    f += c.weight[m] * static_cast<double>(total_free - std::min(used, total_free));
  }
  // Specs without devices use none of it.
  for (int m = c.n_device; m < c.n; ++m) f += c.weight[m] * static_cast<double>(total_free);
  return f;
}

MiB WholeCopiesFree(MiB usable_free, int32_t empty_devices, int32_t count) {
  if (usable_free <= 0 || empty_devices <= 0) return 0;
  return usable_free * ((empty_devices / count) * count) / empty_devices;
}

int64_t FillAmple(const Columns& c, const int32_t* empty_devices, const MiB* usable_free, const int64_t* need) {
  int64_t ample = 0;
  for (int m = 0; m < c.n_device; ++m) {
    if (need[m] <= 0 || usable_free[m] <= 0) continue;
    const int64_t copies = c.mem[m] > 0 ? (usable_free[m] + c.count[m] * c.mem[m] - 1) / (c.count[m] * c.mem[m])
                                        : empty_devices[m] / c.count[m];
    ample = std::max(ample, copies * need[m]);
  }
  return ample;
}

double Fragmentation(const Columns& c, const WorkState& st, uint64_t cpu_short) {
  double f = 0;
  for (int m = 0; m < c.n; ++m) {
    const bool infeasible = ((cpu_short >> m) & 1) || st.usable[m] < c.count[m];
    f += c.weight[m] * static_cast<double>(infeasible ? st.total_free : st.unusable_free[m]);
  }
  return f;
}

}  // namespace gpupack::placement

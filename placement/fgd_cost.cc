#include "placement/fgd_cost.h"

#include <bit>
#include <cstring>
#include <limits>

namespace gpupack::placement {

namespace {

// kFillLanes doubles (or int64s) as one value, the width of baseline x86-64's SSE2 registers (and
// of arm64's NEON ones), so the loop below is data-parallel without intrinsics.
using Lanes = double __attribute__((vector_size(kFillLanes * sizeof(double))));
using LaneInts = int64_t __attribute__((vector_size(kFillLanes * sizeof(int64_t))));
using LaneCounts = int32_t __attribute__((vector_size(kFillLanes * sizeof(int32_t))));

template <typename V, typename T>
V LoadLanes(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// kLaneMasks[b]: all ones in lane j when bit j of b is set.
constexpr LaneInts kLaneMasks[1 << kFillLanes] = {{0, 0}, {-1, 0}, {0, -1}, {-1, -1}};

Lanes Min(Lanes a, Lanes b) { return a < b ? a : b; }
Lanes Max(Lanes a, Lanes b) { return a > b ? a : b; }

// MiB values 0 ≤ x < 2^52 as doubles, exactly: x's bits under the exponent of 2^52 are x + 2^52.
Lanes MiBToDouble(LaneInts x) {
  constexpr int64_t kTwoTo52Bits = 0x4330000000000000;
  return std::bit_cast<Lanes>(x | kTwoTo52Bits) - 0x1p52;
}

// Rounds toward zero; REQUIRES |x| < 2^31 (garbage otherwise, for lanes the caller masks out).
Lanes Truncate(Lanes x) { return __builtin_convertvector(__builtin_convertvector(x, LaneCounts), Lanes); }

// Copies of each spec a free amount `free` of one resource feeds: ⌊free / need⌋ as FloorDiv
// rounds it, capped at kUnneededCopies (within the int32 truncation), and that many for a spec
// that does not need the resource (`unneeded`).
Lanes FedCopies(double free, Lanes inverse, Lanes unneeded) {
  return Max(Truncate(Min(Lanes{} + kUnneededCopies, free * inverse + 1e-9)), unneeded);
}

}  // namespace

double FillFragmentation(const Columns& c, const int32_t* empty_devices, const MiB* usable_free, int64_t free_cpu,
                         int64_t free_memory, MiB total_free, const FillMove& move) {
  // Without a limit CPU feeds kUnneededCopies of anything (FedCopies' cap).
  const double cpu = free_cpu < 0 ? 0x1p62 : static_cast<double>(free_cpu);
  const double memory = static_cast<double>(free_memory);
  const bool memory_limits = free_memory >= 0 && c.host_memory_needed;
  const double r = static_cast<double>(total_free);
  // Fractional specs, kFillLanes at a time: the pending move changes the usable memory of the
  // specs it matches (UsableFreeChange), and then used = min(usable, copies fed · count · mem, R).
  const double old_free = static_cast<double>(move.old_free);
  const double new_free = static_cast<double>(move.new_free);
  static_assert(kFillLanes == 2);
  Lanes unused{};
  for (int m = 0; m < c.n_fractional; m += kFillLanes) {
    const Lanes mem = LoadLanes<Lanes>(&c.fill_mem[m]);
    Lanes usable = MiBToDouble(LoadLanes<LaneInts>(usable_free + m));
    // All ones in the lanes of the specs the move matches.
    const LaneInts matched = kLaneMasks[(move.match >> m) & ((1 << kFillLanes) - 1)];
    const Lanes change = (new_free >= mem ? new_free : 0.0) - (old_free >= mem ? old_free : 0.0);
    usable += std::bit_cast<Lanes>(std::bit_cast<LaneInts>(change) & matched);
    Lanes copies = FedCopies(cpu, LoadLanes<Lanes>(&c.inv_cpu[m]), LoadLanes<Lanes>(&c.cpu_unneeded[m]));
    if (memory_limits) {
      copies = Min(copies, FedCopies(memory, LoadLanes<Lanes>(&c.inv_host_memory[m]),
                                     LoadLanes<Lanes>(&c.host_memory_unneeded[m])));
    }
    const Lanes used = Min(Min(usable, copies * LoadLanes<Lanes>(&c.copy_mib[m])), Lanes{} + r);
    unused += LoadLanes<Lanes>(&c.fill_weight[m]) * (r - used);
  }
  // Whole-device specs, kFillLanes at a time: the move takes an empty device's free memory and
  // the device from the specs it matches; k copies take k·count of the empty devices, each with
  // its free memory: used = ⌊usable · devices / empty⌋ (exact in doubles: the quotient of
  // integers under 2^40 by at most 64 is never within rounding of the next integer).
  const double taken_free = move.old_empty ? old_free : 0.0;
  const double taken_device = move.old_empty ? 1.0 : 0.0;
  for (int m = c.n_fractional; m < c.n_device; m += kFillLanes) {
    const LaneInts matched = kLaneMasks[(move.match >> m) & ((1 << kFillLanes) - 1)];
    const Lanes usable = MiBToDouble(LoadLanes<LaneInts>(usable_free + m)) -
                         std::bit_cast<Lanes>(std::bit_cast<LaneInts>(Lanes{} + taken_free) & matched);
    const Lanes empty = __builtin_convertvector(LoadLanes<LaneCounts>(empty_devices + m), Lanes) -
                        std::bit_cast<Lanes>(std::bit_cast<LaneInts>(Lanes{} + taken_device) & matched);
    Lanes copies = FedCopies(cpu, LoadLanes<Lanes>(&c.inv_cpu[m]), LoadLanes<Lanes>(&c.cpu_unneeded[m]));
    if (memory_limits) {
      copies = Min(copies, FedCopies(memory, LoadLanes<Lanes>(&c.inv_host_memory[m]),
                                     LoadLanes<Lanes>(&c.host_memory_unneeded[m])));
    }
    const Lanes whole_copies = Truncate(empty * LoadLanes<Lanes>(&c.whole_inv_count[m]) + 1e-9);
    const Lanes devices = Min(whole_copies, copies) * LoadLanes<Lanes>(&c.whole_count[m]);
    // No empty device: nothing usable (and 0/0 masked out).
    const Lanes used =
        std::bit_cast<Lanes>(std::bit_cast<LaneInts>(Truncate(usable * devices / empty)) & (empty > 0.0));
    unused += LoadLanes<Lanes>(&c.whole_weight[m]) * (r - Min(used, Lanes{} + r));
  }
  const double f = unused[0] + unused[1];
  // Specs without devices use none of it.
  return f + c.cpu_only_weight * r;
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

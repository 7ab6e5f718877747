// Internal to placement/ (not for callers outside it): a policy's typical specs laid out
// column-wise for the per-node arithmetic (fgd_cost.h, device_pick.cc), built once by Policy.
#pragma once

#include <array>
#include <cstdint>

#include "placement/vocabulary.h"
#include "placement/workload.h"

namespace gpupack::placement {

// Bits [0, k) of a spec or device mask, k ≤ 64 (k = 64: every bit).
inline constexpr uint64_t FirstBits(int k) { return k >= 64 ? ~uint64_t{0} : (uint64_t{1} << k) - 1; }

// F̂'s data-parallel loops (fgd_cost.cc) read per-spec columns and tallies this many at a time.
inline constexpr int kFillLanes = 2;
// The length of a column those loops read: a lane group may start at the last spec.
inline constexpr int kLaneColumns = kMaxTypicalSpecs + kFillLanes - 1;
// More copies of a spec than any node's device memory holds: what F̂ counts as fed by a resource
// the spec does not need, or the node does not limit.
inline constexpr double kUnneededCopies = 0x1p30;

// Specs are ordered fractional (ascending memory), then whole-device, then CPU-only, so that
// "specs a free slice of x MiB can hold" is a prefix found by binary search.
struct Columns {
  int n = 0;
  int n_fractional = 0;  // specs [0, n_fractional) ask for part of a device
  int n_device = 0;      // specs [n_fractional, n_device) ask for whole devices; the rest CPU only
  double total_weight = 0;
  int64_t max_cpu = 0;       // the largest spec CPU: a node with more free never lacks CPU
  uint64_t multi_whole = 0;  // bit m: spec m asks for several whole devices
  // Bit m: device spec m accepts every sort of device (no kind, profile, model or isolation rule),
  // so only a device's pool membership and size decide whether it can serve the spec.
  uint64_t any_sort = 0;
  std::array<MiB, kMaxTypicalSpecs> mem{};  // per-device need; 0 = whole device
  // Per-device compute share, percent; 0 = proportional to mem (TypicalSpec::compute_pct).
  std::array<int16_t, kMaxTypicalSpecs> compute{};
  bool any_compute = false;                       // some spec names a compute share: Score measures in two dimensions
  uint64_t own_compute = 0;                       // bit m: fractional spec m names its own compute share
  std::array<int32_t, kMaxTypicalSpecs> count{};  // devices needed; CPU-only specs: never satisfiable
  std::array<double, kMaxTypicalSpecs> weight{};
  std::array<int64_t, kMaxTypicalSpecs> cpu{};
  std::array<int64_t, kMaxTypicalSpecs> host_memory{};  // host memory bytes (0: not known)
  // F̂'s lane loops (FillFragmentation) read the columns from here to whole_weight kFillLanes at a
  // time from any spec index below n_device, so they have kFillLanes − 1 entries of padding.
  std::array<double, kLaneColumns> inv_cpu{};          // 1 / cpu (0 for specs without CPU)
  std::array<double, kLaneColumns> inv_host_memory{};  // 1 / host memory (0 when not known)
  // The copies of a device spec a resource it does not need feeds: kUnneededCopies, else 0.
  std::array<double, kLaneColumns> cpu_unneeded{};
  std::array<double, kLaneColumns> host_memory_unneeded{};
  // Per fractional spec, as doubles, and 0 for the other specs (so their lanes add nothing).
  std::array<double, kLaneColumns> fill_mem{};     // MiB per device
  std::array<double, kLaneColumns> copy_mib{};     // count · mem: the memory one copy takes
  std::array<double, kLaneColumns> fill_weight{};  // the fractional specs' weights
  // Per whole-device spec, and 0 for the other specs.
  std::array<double, kLaneColumns> whole_count{};
  std::array<double, kLaneColumns> whole_inv_count{};
  std::array<double, kLaneColumns> whole_weight{};  // the whole-device specs' weights
  double cpu_only_weight = 0;                       // Σ weight of the specs without devices
  bool host_memory_needed = false;                  // some device spec needs host memory
  // FractionalFit's table: fit_start[b] = the fractional specs under b · 2^fit_shift MiB, for b up
  // to the largest spec's bucket; fit_shift makes that at most kFitBuckets buckets.
  static constexpr int kFitBuckets = 256;
  int fit_shift = 0;
  int fit_buckets = 0;
  std::array<int8_t, kFitBuckets> fit_start{};

  // How many fractional specs a free slice of `free` MiB could hold (they are a prefix): a table
  // lookup and a walk over the specs within one bucket, instead of a binary search per pick.
  int FractionalFit(MiB free) const {
    const MiB bucket = free >> fit_shift;
    if (bucket >= fit_buckets) return n_fractional;
    int fit = fit_start[bucket];
    while (fit < n_fractional && mem[fit] <= free) ++fit;
    return fit;
  }

  // The columns of `specs`, which must already be in the order above.
  static Columns Of(const std::vector<TypicalSpec>& specs);
};

}  // namespace gpupack::placement

// Completion value: what a device's free slice is worth to the pods still to come.
//
// FGD's fragmentation asks whether the next pod could use a slice; it does not ask how the slice
// will end. Put a 0.32-device pod next to a 0.47 one and the 0.21 left is usable by nothing the
// workload sends often, while next to a 0.65 pod the same pod completes the device. Bin packing
// has a price for this: the dual of the cutting-stock LP over the workload's shapes. With y_s
// the dual price of a slice of size s (in devices; Σ y over any set of slices that fits one
// device ≤ 1, and the LP's optimal device fillings reach 1), the completion value of a free slice
// of g MiB is
//
//   K(g) = max Σ y_s over the slices that fit in g   (an unbounded knapsack)
//
// and a pick that turns a device's free memory from g into g' gives up K(g) − K(g') of it, of
// which the pod's own price y_pod is the part it uses; the rest is lost. For one pod, y_pod is
// the same on every device of a size, so ranking picks by K(g) − K(g') — the completion loss —
// ranks them by what is lost. Values here are in MiB (the price in devices times the device's
// capacity), so devices of different sizes compare.
//
// On the default Alibaba trace (docs/placement.md) the prices are the harmonic-like 1 (0.81),
// 2/3 (0.55–0.65), 1/2 (0.46–0.48), 1/3 (0.32–0.44), 1/4 (0.23), 1/12 (0.22) and 0 below: a
// 0.32 pod on an empty device has loss 1 − 2/3 = 1/3, its own price, so it wastes nothing; next
// to a 0.47 one its loss is 1/2 − 0, and it wastes 1/2 − 1/3 = 1/6 of a device.
//
// Memory is counted exactly whenever it can be cheaply, and otherwise rounded toward fitting,
// never away from it. Quanta of 1/1024 of the device, slices rounded up and free memory rounded
// down, made two slices that fill a device exactly look as if they do not fit (on a 9728 MiB
// MIG 1g.10gb, 10-MiB quanta, 7879 + 1848 MiB became 788 + 185 > 972 quanta), and the prices and
// losses then steer against the pairing that packs. A table over every MiB is exact but costs
// capacity × shapes per knapsack, and the LP solves one knapsack per simplex step, which is too
// slow to redo at every refresh on a large device. So each table counts in one of three ways
// (Table::quantum_mib, exact):
//
//  1. Quanta of d = the gcd of the slice sizes, when the device holds at most 1024 of them:
//     exact, since every slice is a whole number of quanta, so a set fits in g free MiB exactly
//     when its quanta fit in ⌊g/d⌋. Whole-GiB requests, and pods asking gpu_milli × 16 MiB of a
//     16000 MiB GPU, land here; the dense knapsack over ≤ 1024 quanta is cheap.
//  2. Otherwise MiB, exact, with a sparse knapsack that keeps only K's steps, the free amounts
//     at which K rises (K is a step function that rises only where some filling's total lies,
//     and a filling worth no more than a smaller one can be dropped with all its extensions),
//     found in order of size from a heap of one candidate per shape; K(g) is the last step at or
//     below g, by binary search. A workload of a few common sizes has few steps, so the tables
//     stay cheap (docs/placement.md gives their cost on the trace).
//  3. When the sparse search has drawn kSparseBudget candidates over the LP (2^16, several times
//     what the trace's tables draw), quanta of ⌈capacity/1024⌉ with slice
//     sizes and free memory both rounded down (a slice below one quantum counts as one). Many
//     small shapes at unrelated sizes get here: their fillings reach almost every MiB at prices
//     that differ a little. Slices that fit together still fit on this grid: Σ⌊s/q⌋ ≤ ⌊Σs/q⌋ ≤
//     ⌊g/q⌋. What errs is the other way, a set that overflows by less than a quantum per slice
//     can look as if it fits; the duals stay feasible for every real filling, at worst a little
//     low.
//
// Pure: values in, values out. Thread safety: immutable after Build.
#pragma once

#include <cstdint>
#include <vector>

#include "placement/node_summary.h"
#include "placement/vocabulary.h"
#include "placement/workload.h"

namespace gpupack::placement {

class CompletionValue {
 public:
  // No prices: every slice is worth 0, so every loss is 0.
  CompletionValue() = default;

  // Prices the fractional shapes of `workload` (per-device memory below a device's capacity,
  // demand weight × device count; MIG-profile shapes are fixed slices and take no part) for
  // devices of each of `device_capacities_mib` (usable MiB; duplicates and non-positive values
  // are ignored): one LP and one value table per capacity, counted as above; `sparse_budget` is
  // the candidates the sparse knapsacks of one table may draw before it falls back to the grid.
  static constexpr int64_t kSparseBudget = int64_t{1} << 16;
  static CompletionValue Build(const TypicalWorkload& workload, const std::vector<MiB>& device_capacities_mib,
                               int64_t sparse_budget = kSparseBudget);

  // Collects the device capacities of a cluster one node at a time (usable MiB, as placement
  // sees them), then builds.
  class Builder {
   public:
    Builder(TypicalWorkload workload, const PlacementOptions& placement);
    void AddNode(const Node& node);
    CompletionValue Build() &&;

   private:
    TypicalWorkload workload_;
    PlacementOptions placement_;
    std::vector<MiB> capacities_;
  };

  bool empty() const { return tables_.empty(); }
  // Which table prices devices of `capacity_mib`: its own, or for a capacity Build did not see
  // (a node that joined since), the nearest one. -1 when empty().
  int TableFor(MiB capacity_mib) const;
  // K(free_mib) in MiB (the price in devices times the table's capacity), by table index; free
  // memory beyond the capacity counts as the capacity. REQUIRES: 0 ≤ table < tables().size().
  double Value(int table, MiB free_mib) const;
  // K(free_before) − K(free_after) in MiB, ≥ 0 for free_after ≤ free_before.
  double Loss(int table, MiB free_before, MiB free_after) const {
    return Value(table, free_before) - Value(table, free_after);
  }

  struct Price {
    MiB slice_mib = 0;   // a distinct slice size (on the grid: rounded down to the quantum)
    double devices = 0;  // y_s
  };
  struct Table {
    MiB capacity_mib = 0;
    MiB quantum_mib = 1;        // memory counts in these; sizes and free memory round down
    bool exact = true;          // the quantum divides every slice size: no rounding at all
    std::vector<Price> prices;  // largest slice first; empty when no shape fits this capacity
    // K's steps: K is step_value[i] devices for free memory from step_mib[i] up to the next step
    // (the last: up to the capacity and beyond). step_mib ascends from 0; step_value rises.
    std::vector<MiB> step_mib;
    std::vector<double> step_value;
    // Counted in quanta (≤ 1025 of them): K in devices at each whole number of quanta, for a
    // lookup without a search. Empty when counted in MiB by the sparse knapsack.
    std::vector<double> value_by_quantum;
    // 1 / quantum_mib: Value divides by a multiplication (FloorDiv), as a division per lookup
    // would cost more than the rest of the lookup.
    double inv_quantum = 1;
  };
  const std::vector<Table>& tables() const { return tables_; }

 private:
  std::vector<Table> tables_;  // by ascending capacity
};

// A loss in MiB on the integer scale the rankings compare: thousandths of `unit_mib` (one device
// of the cluster's common size). The prices are ratios of small integers, so coarser steps would
// merge distinct losses and finer ones only add float noise. REQUIRES: unit_mib > 0.
// Levels are ≥ 0 for losses ≥ 0.
int64_t CompletionLossLevel(double loss_mib, MiB unit_mib);

}  // namespace gpupack::placement

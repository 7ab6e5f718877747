// Capacity reservation: which nodes the workload's constrained pod shapes depend on, priced so
// that pods with other options leave those nodes to them.
//
// FGD and the fill fragmentation look at one node at a time. Neither sees that a pod which could
// run anywhere, placed on one of the few nodes a constrained shape can use (a pinned GPU model, or
// the only nodes with 8 GPUs and 120 cores), takes capacity those pods will find missing later.
// Hall's condition names the risk: the demand of the shapes that can only run inside a set of
// nodes H must fit in what H has free. For each typical shape m, with host set H_m (the nodes
// that, empty, could host it),
//
//   r_m = D(H_m) · Free / Free(H_m),   D(H) = Σ_{m' : H_m' ⊆ H} demand share of m'
//
// compares the share of future demand that can only use H_m (D, assuming arrivals follow the
// workload until the cluster is full) with H_m's share of the free device memory. r_m = 1: H_m's
// free memory is exactly what its confined shapes need; an empty cluster has r_m = D / C(H_m),
// and r_m falls as other pods keep off H_m, so the price corrects itself. A node's tightness is the
// largest r_m over the shapes it can host whose host set is a minority of the cluster's capacity
// (C(H_m) ≤ kMaxReservingCapacityShare): a set holding most of the cluster cannot be avoided
// anyway, and pricing it would only rank the few small nodes first, which packs worse
// (docs/simulator.md).
//
// The price of a placement (NodeEvaluation::reservation_cost) is the node's tightness times the
// device memory the pod takes: the memory the confined shapes expect to lose. It joins the fill
// fragmentation's increase in the second ranking key (FillLevel), after FGD's level.
//
// Pure: values in, values out. Thread safety: immutable after Build; Tightness is const.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "placement/node_summary.h"
#include "placement/vocabulary.h"
#include "placement/workload.h"

namespace gpupack::placement {

// Host sets above this share of the cluster's device capacity reserve nothing.
inline constexpr double kMaxReservingCapacityShare = 0.5;

class CapacityReservation {
 public:
  // No reservation: every node's tightness is 0.
  CapacityReservation() = default;

  // Collects the cluster one node at a time (so callers need not copy their nodes), then builds.
  class Builder {
   public:
    // `workload`: the shapes to reserve for, weights summing to 1, any number of them (all the
    // shapes seen, WorkloadLearner::EveryShape, not only FGD's typical set: the rare large pods
    // are the ones that need it). Shapes that the same node types can host price as one set.
    Builder(TypicalWorkload workload, const PlacementOptions& placement);
    // The node's allocatable device capacity, its free device memory now, and which shapes it
    // could host at all (CanHost).
    void AddNode(const Node& node);
    CapacityReservation Build() &&;

   private:
    struct HostType {
      std::vector<bool> hosts;  // [m]: can host shape m
      double capacity = 0;      // Σ usable device MiB of its nodes
      double free = 0;          // Σ free device MiB of its nodes
    };
    TypicalWorkload workload_;
    PlacementOptions placement_;
    std::vector<HostType> types_;
    std::unordered_map<std::string, size_t> type_of_;  // HostSignature → types_ index
    std::unordered_map<MiB, int64_t> devices_by_capacity_;
  };

  // The node's tightness: max r_m over the reserving shapes it can host; 0 when none.
  double Tightness(const Node& node) const;

  // The host sets that reserve capacity, tightest first, for logs, metrics and tests; each named
  // by its most popular shape.
  struct Reserving {
    TypicalSpec spec;
    double tightness = 0;       // r_m
    double capacity_share = 0;  // C(H_m) / C
  };
  const std::vector<Reserving>& reserving() const { return reserving_; }

 private:
  std::vector<Reserving> reserving_;
  std::unordered_map<std::string, double> tightness_by_type_;  // HostSignature → tightness
  PlacementOptions placement_;                                 // for CanHost on nodes Build never saw
};

}  // namespace gpupack::placement

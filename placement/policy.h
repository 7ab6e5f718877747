// The placement policy: how good a node is for a pod (Score), and which devices the pod gets
// there (Evaluate); how policies are named and rebuilt; and the keys the extender ranks by.
//
// Thread safety: Policy is immutable after construction; Evaluate/Summarize are const and may
// run concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "placement/columns.h"
#include "placement/completion.h"
#include "placement/demand.h"
#include "placement/node_summary.h"
#include "placement/reservation.h"
#include "placement/verdict.h"
#include "placement/vocabulary.h"
#include "placement/workload.h"

namespace gpupack::placement {

struct EvaluationInputs;  // device_pick.h

// The node-level result without the device placement: what filter and prioritize need.
// Computing it allocates nothing when the pod fits.
struct NodeScore {
  Verdict verdict;
  double cost = 0;              // as NodeEvaluation::cost
  double fill_cost = 0;         // as NodeEvaluation::fill_cost
  double reservation_cost = 0;  // as NodeEvaluation::reservation_cost
  double completion_loss = 0;   // as NodeEvaluation::completion_loss
};

struct NodeEvaluation {
  Verdict verdict;
  // Lower is better; compare only between nodes evaluated by the same Policy for the same pod.
  // FGD: the increase of expected fragmentation ΔF in MiB; binpack: free MiB left on the touched
  // devices; spread: the negative of it.
  double cost = 0;
  // FGD only (0 otherwise): the increase of the fill fragmentation F̂ in MiB, the second key that
  // orders nodes FGD scores equally (lower is better). F̂_n(M) = Σ_m p_m · (R_n − U_n(m)), where
  // U_n(m) is the device memory copies of m could take on the node: the free memory of the
  // devices that can hold m, but no more than ⌊free CPU / cpu_m⌋ copies of it. FGD counts all of a
  // node's idle memory as fragmented for m once the node lacks the CPU for one more m, and none
  // of it before; F̂ counts the part the node's CPU cannot feed, so it sees GPUs being stranded
  // by CPU a few pods ahead.
  double fill_cost = 0;
  // FGD only (0 otherwise, and 0 without a reservation): the price of the capacity the pod takes
  // from shapes confined to few nodes, in MiB: the node's reservation tightness (reservation.h)
  // times the device memory the pod takes. Ranked with fill_cost, in one FillLevel.
  double reservation_cost = 0;
  // FGD only (0 otherwise, and 0 without completion values): the completion value (completion.h)
  // the pod's device picks give up, in MiB: Σ K(free before) − K(free after).
  double completion_loss = 0;
  Placement placement;  // empty unless verdict.fits()
};

// The pod-level half of scoring one pod on many nodes, like kube-scheduler's PreFilter state: the
// containers in the order their picks run and each one's device demand. Built once per pod, so
// Score spends on each node only that node's work. Refers into the pod, which must outlive it.
struct PreparedPod {
  explicit PreparedPod(const PodRequest& pod);

  const PodRequest* pod;
  // Largest demands first (whole devices, then by memory), app containers before init ones: the
  // hardest to place chooses first, like best-fit decreasing.
  std::vector<int> order;
  std::vector<Demand> demands;  // demands[i] is containers[order[i]]'s
  bool constrained;             // some kind, profile, model, isolation or device rule
  int picks = 0;                // devices the containers pick in all
  bool wants_compute = false;   // PodRequest::WantsCompute
};

StatusOr<PolicyKind> ParsePolicyKind(std::string_view name);  // "fgd" | "binpack" | "spread"
std::string_view PolicyKindName(PolicyKind kind);

class Policy {
 public:
  // `reservation`: prices capacity that constrained shapes depend on (reservation.h); built
  // against the cluster by the caller, since the policy sees one node at a time. Default: none.
  // `completion`: prices free slices by how they can still be completed (completion.h); with it,
  // a pod's device picks minimise the completion loss first, FGD's ΔF second. Default: none.
  Policy(PolicyKind kind, TypicalWorkload workload, PlacementOptions options, CapacityReservation reservation = {},
         CompletionValue completion = {});

  PolicyKind kind() const { return kind_; }
  // The normalised workload, in evaluation order (fractional specs by memory, whole, CPU-only).
  const TypicalWorkload& workload() const { return workload_; }
  const PlacementOptions& options() const { return options_; }
  const CapacityReservation& reservation() const { return reservation_; }
  const CompletionValue& completion() const { return completion_; }

  NodeSummary Summarize(const Node& node) const;
  // REQUIRES: summary == Summarize(node) for the node's current state.
  NodeEvaluation Evaluate(const Node& node, const NodeSummary& summary, const PodRequest& pod) const;
  // Convenience for callers without a cached summary.
  NodeEvaluation Evaluate(const Node& node, const PodRequest& pod) const {
    return Evaluate(node, Summarize(node), pod);
  }
  // Same verdict and cost as Evaluate, without building the placement (the per-node hot path:
  // it allocates nothing when the pod fits).
  NodeScore Score(const Node& node, const NodeSummary& summary, const PreparedPod& pod) const;
  // Convenience for scoring one node: prepares the pod on the spot.
  NodeScore Score(const Node& node, const NodeSummary& summary, const PodRequest& pod) const {
    return Score(node, summary, PreparedPod(pod));
  }

 private:
  EvaluationInputs Inputs(const Node& node, const NodeSummary& summary, const PreparedPod& pod) const;

  PolicyKind kind_;
  TypicalWorkload workload_;
  PlacementOptions options_;
  CapacityReservation reservation_;
  CompletionValue completion_;
  Columns columns_;  // the workload's specs, column-wise
};

// A policy rebuilt at a refresh, from the workload and the cluster as they are now. The extender
// and the simulator both rebuild through it, so what each part is built from cannot drift apart:
// FGD's typical set is `typical`; with `reserve`, the capacity reservation reads `every_shape`
// (a rare large shape seen once is what it is for); with `complete`, the completion value reads
// `frequent_shapes` (its LP grows with the number of slice sizes). Feed every node, then Build.
class PolicyRefresh {
 public:
  PolicyRefresh(PolicyKind kind, PlacementOptions options, TypicalWorkload typical, const TypicalWorkload& every_shape,
                const TypicalWorkload& frequent_shapes, bool reserve, bool complete);
  // From a learner: Snapshot(), EveryShape() and Snapshot(1.0).
  PolicyRefresh(PolicyKind kind, PlacementOptions options, const WorkloadLearner& learner, bool reserve, bool complete);
  void AddNode(const Node& node);
  Policy Build() &&;

 private:
  PolicyKind kind_;
  PlacementOptions options_;
  TypicalWorkload typical_;
  std::optional<CapacityReservation::Builder> reservation_;
  std::optional<CompletionValue::Builder> completion_;
};

// FGD's node score on its own integer scale: int(100 · σ(−ΔF / unit)), where `unit` is one
// device's memory (the paper's 1000 milli-GPU). One level is ≈ 0.04 device of ΔF near 0.
// Nodes on the same level are equally good: choosing among them packs better than taking the
// exact minimum (the simulator's `gpupack-exact` policy measures the difference; bench/RESULTS.md
// keeps the measurement), so the extender ranks FGD costs by this level. REQUIRES: unit_mib > 0.
int64_t FgdScoreLevel(double delta_mib, MiB unit_mib);

// The fill fragmentation's increase (NodeEvaluation::fill_cost), plus the reservation price
// (NodeEvaluation::reservation_cost) where there is one, on a scale of half devices: the second
// key, after the FGD level, by which the extender orders nodes (lower is better; the fixed node
// order breaks the remaining ties). Finer differences are noise for this key, and a finer
// key is harmful: it systematically prefers some node types among equals — e.g. it sends
// CPU-heavy pods to the few CPU-rich nodes that alone can host rare 8-GPU / 120-core pods, which
// then fail while the cluster is a third full (docs/simulator.md). REQUIRES: unit_mib > 0.
int64_t FillLevel(double fill_cost_mib, MiB unit_mib);

// A fixed pseudo-random order of nodes (FNV-1a of the name, salted): the tie-break among nodes on
// the same FGD level. A fixed order, like the FGD artifact's seeded node-name order, fills one node
// before the next among equals; a fresh random pick per pod (kube-scheduler's own tie-break)
// spreads pods and packs worse (docs/simulator.md). Lower rank wins.
uint64_t NodeTieBreakRank(std::string_view node_name, uint64_t salt);

}  // namespace gpupack::placement

// gpupack's decision: how the extender (and its twin in the simulator) turns the placement core's
// costs into a choice, and how it keeps the typical workload those costs are measured against.
// One module, one set of defaults: the extender's RankOf/Learn and the simulator's `gpupack`
// policy and HTTP mirror all call it and keep no copy, so in process and over HTTP the same
// arrivals get the same node and the same devices (decision_http_test).
//
//   * RankOf: the rank key of a node for a pod, lower first: the completion loss level, the fill
//     level (ΔF̂ plus the capacity reservation's price, in half devices), FGD's integer level,
//     then a fixed pseudo-random node order (docs/placement.md, "From cost to choice").
//   * Decision: the workload learner and its refresh. Every pod is evidence once, at its first
//     sighting (asked about in filter, bound, found holding devices or waiting after a restart),
//     keyed by its UID. The prior keeps a fixed share of the learned workload however few pods
//     were seen (the evidence rule), and the policy is rebuilt (PolicyRefresh) from the learner and the
//     nodes as they are when that can change its mind: after 1, 2, 4, 8, … pods, then every
//     `refresh_pods`, and sooner when the typical set gains or loses a shape (docs/placement.md,
//     "The evidence rule"). The device size that scales the keys and the cold-start prior is the
//     cluster's own (TypicalDeviceMiB), found again at every refresh, so nothing needs setting.
//
// Pure: values in, values out. Decision is not thread-safe (the owner serialises calls).
#pragma once

#include <compare>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "placement/placement.h"
#include "placement/vocabulary.h"
#include "placement/workload.h"

namespace gpupack::placement {

// The defaults are the product's: every field here is what a config without the key gets.
struct DecisionOptions {
  // The unit of the rank keys and of the cold-start prior; 0 = TypicalDeviceMiB of the cluster,
  // found at every refresh (the extender's fgdScoreUnit overrides it).
  MiB device_mib = 0;
  // Rank FGD costs on integer levels (completion, fill, FGD level). false: the exact cost alone.
  bool fgd_levels = true;
  bool rank_by_completion = true;       // the completion loss is the first key
  bool rank_by_fill = true;             // ΔF̂ is in the fill level (false: the reservation price alone)
  bool reserve_scarce_capacity = true;  // the capacity reservation's price is in the fill level
  bool fixed_tie_break = true;          // the last key is the node order (false: ties stay ties)
  // The learner (WorkloadLearner): half-life in pods; the prior's weight in pods once the
  // evidence reaches its steady state, and the same share of the blend before (6.5 % at these
  // defaults, so a handful of pods of a new mix outweigh it), and the same while pods of whole
  // GPUs come (20 %: the prior's whole and multi-GPU shapes keep room for the rare large pods);
  // the typical set's coverage; and the most pods between refreshes once the doubling schedule
  // reaches it (0: never learn, keep the starting policy).
  double half_life_pods = 1000;
  double prior_pods = 100;
  double whole_gpu_prior_pods = 360;
  double coverage = 0.95;
  int refresh_pods = 50;
};

// The cluster's typical device size: the capacity holding the most device memory (every device
// counts, GPUs and MIG instances; ties go to the larger). `fallback` when there is no device.
MiB TypicalDeviceMiB(std::span<const Node> nodes, MiB fallback = 81920);

// What RankOf reads of a node's evaluation for a pod (placement::NodeScore / NodeEvaluation fields).
struct RankInputs {
  double cost = 0;
  double fill_cost = 0;
  double reservation_cost = 0;
  double completion_loss = 0;
  uint64_t tie_break_rank = 0;  // NodeTieBreakRank of the node
  int gpu_count = 0;            // GpuCount of the node
};

// Where a node stands in the ranking, lower first, compared lexicographically.
struct RankKey {
  // With FGD levels the integer keys folded into one integer-valued double, exact in it; else
  // the policy's exact cost.
  double cost = 0;
  // With FGD levels and fixed_tie_break: the node's tie-break rank as a fraction in [0, 1);
  // otherwise 0. Kept apart from cost so it keeps its full precision.
  double tie = 0;
  friend auto operator<=>(const RankKey&, const RankKey&) = default;
};

// Whether a pod is ranked on the integer levels: options.fgd_levels, unless the pod's own
// gpupack.io/node-policy names another policy than FGD (then its exact binpack / spread cost).
bool RanksOnLevels(const DecisionOptions& options, std::optional<PolicyKind> pod_node_policy);

// REQUIRES: unit_mib > 0 when RanksOnLevels. With `fewer_gpus_first` (Decision::fewer_gpus_first)
// and the fixed tie-break, nodes the keys tie on rank by their reservation price (in 64ths of the
// unit device), then by their GPUs, fewer first, before the node order.
RankKey RankOf(const RankInputs& inputs, MiB unit_mib, const DecisionOptions& options,
               std::optional<PolicyKind> pod_node_policy = std::nullopt, bool fewer_gpus_first = false);

// The node's whole GPUs (devices of kind GPU; MIG instances are not counted).
int GpuCount(const Node& node);

// The learner and its refresh for one cluster.
class Decision {
 public:
  // `prior`: the learner's cold-start prior; by default DefaultPriorWorkload of the cluster's
  // device size, re-derived whenever that size changes. A given prior is kept as it is.
  Decision(PolicyKind kind, PlacementOptions placement, DecisionOptions options,
           std::optional<TypicalWorkload> prior = std::nullopt);
  // A fixed typical workload instead of a learned one (the simulator's `gpupack-pinned`): every
  // refresh builds from `workload` for every part.
  static Decision Pinned(PolicyKind kind, PlacementOptions placement, DecisionOptions options,
                         TypicalWorkload workload);

  const DecisionOptions& options() const { return options_; }
  bool learning() const { return options_.refresh_pods > 0 && !pinned_; }
  // The unit of the rank keys: options.device_mib, or the cluster's as of the last refresh (before
  // any: the fallback of TypicalDeviceMiB).
  MiB unit_mib() const { return unit_mib_; }
  // Whether, as of the last refresh, the ranking puts nodes with fewer GPUs first among equals:
  // while learning and the learner's hedges hold (WorkloadLearner::hedge_window). Before a few
  // hundred pods are seen, the pods that only the largest nodes can host may not have come yet,
  // and the node order would spend those nodes as readily as small ones; once they are seen the
  // learned shapes keep room for them, and the node order alone packs better (docs/placement.md,
  // "Room for pods not seen yet").
  bool fewer_gpus_first() const { return fewer_gpus_first_; }

  // The starting policy for a cluster of devices of `device_mib` (the prior, nothing priced).
  Policy InitialPolicy(MiB device_mib) const;

  // Records a pod as evidence: one asked about (demand, whether it fits or not), bound, held or
  // waiting. A pod with a UID counts once, however often it is asked about or bound (the last
  // kCountedUids UIDs are remembered; an older one counts again). True when a refresh is due
  // (Refresh then): `gap` pods since the last one, gap = the pods seen by then clamped to
  // [1, refresh_pods] (so after 1, 2, 4, 8, … pods), or max(1, gap / 8) pods when the typical
  // set's shapes are no longer those of the last refresh. When a refresh is due while early(),
  // the pods `waiting` returns (those waiting to be scheduled with this one; called only then)
  // are recorded as well, each UID once, so a burst's first refresh already knows its sizes.
  using WaitingPods = std::function<std::vector<PodRequest>()>;
  bool Observe(const PodRequest& pod, const WaitingPods& waiting = nullptr);
  // True while the refresh schedule still doubles (fewer than refresh_pods pods seen by the last
  // refresh): the few refreshes (about log2(refresh_pods)) where more evidence, such as the pods
  // waiting to be scheduled, changes the policy most and costs least to gather.
  bool early() const { return seen_at_refresh_ < options_.refresh_pods; }
  static constexpr size_t kCountedUids = size_t{1} << 16;
  // The pods counted so far, each UID once, and of them those counted as waiting with another
  // (Observe's `waiting`): what the extender exports as gpupack_learner_pods_total.
  int64_t seen() const { return seen_; }
  int64_t seen_waiting() const { return seen_waiting_; }

  // Rebuilds the policy from the learner and the nodes as they are now. `for_each_node(visit)`
  // must call visit once per node; it is called up to twice (the device size and, while the
  // learner's model hedge can hold, the GPU models; then the prices).
  using NodeVisitor = std::function<void(const std::function<void(const Node&)>&)>;
  Policy Refresh(const NodeVisitor& for_each_node);

 private:
  // Counts the pod into the learner unless its UID was counted; false then.
  bool Record(const PodRequest& pod);
  // Whether the pods recorded since the last refresh make one due (Observe's rule).
  bool RefreshDue() const;

  PolicyKind kind_;
  PlacementOptions placement_;
  DecisionOptions options_;
  bool pinned_ = false;
  TypicalWorkload pinned_workload_;
  bool fixed_prior_;
  MiB unit_mib_;
  MiB prior_mib_;  // the device size the learner's prior is relative to
  bool fewer_gpus_first_ = false;
  WorkloadLearner learner_;
  int64_t seen_ = 0;                           // pods observed, undecayed
  int64_t seen_waiting_ = 0;                   // of them, counted from Observe's `waiting`
  int64_t seen_at_refresh_ = 0;                // seen_ at the last refresh
  int64_t since_refresh_ = 0;                  // pods observed since the last refresh
  std::vector<TypicalSpec> refreshed_shapes_;  // the typical set's shapes at the last refresh
  std::unordered_set<std::string> counted_;    // UIDs already observed, the last kCountedUids
  std::deque<std::string> counted_order_;      // the same, oldest first
};

}  // namespace gpupack::placement

// The "typical pod" distribution that the fragmentation-aware score measures against
// (FGD's target workload M), and a learner that estimates it from observed requests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "placement/vocabulary.h"

namespace gpupack::placement {

// One pod shape of the target workload. Shapes with no devices are CPU-only pods: they are
// part of M, as in FGD, and make every idle device count as a fragment for them.
struct TypicalSpec {
  int64_t cpu_milli = 0;
  int device_count = 0;        // 0 = CPU-only
  MiB mem_per_device_mib = 0;  // 0 with device_count > 0 = whole devices
  DeviceKindPreference device_kind = DeviceKindPreference::kAny;
  std::string mig_profile;
  std::vector<std::string> gpu_models;  // empty = any model
  double weight = 0;                    // popularity p_m; a workload's weights sum to 1
  // Host memory of one pod of the shape, bytes: the mean over the pods it stands for (0: not
  // known, no limit). Not part of the shape's identity (pods that differ only in memory are one
  // shape, so the typical set is the same); the fill fragmentation reads it.
  int64_t memory_bytes = 0;
  // Per-device compute share in percent; 0 = none asked (its memory's share, ProportionalComputePct).
  // Part of the shape.
  int compute_pct = 0;

  // Whole devices taken exclusively, as model::ContainerRequest::whole_device().
  bool whole_device() const { return device_count > 0 && mem_per_device_mib == 0; }
  bool operator==(const TypicalSpec&) const = default;
};

// The same shape: everything but the popularity and the host memory, which are its statistics.
bool SameShape(const TypicalSpec& a, const TypicalSpec& b);

// At most kMaxTypicalSpecs shapes, so per-device match sets fit a 64-bit mask in the hot loop.
inline constexpr int kMaxTypicalSpecs = 64;

struct TypicalWorkload {
  std::vector<TypicalSpec> specs;
  // Renormalises weights to sum 1, drops zero-weight specs, keeps the heaviest kMaxTypicalSpecs.
  void Normalize();
};

// The shape a pod contributes to the distribution. Multi-container pods use their largest
// container's shape. Memory is kept exact: any bucketing that rounds up makes shapes that fill a
// device together look as if they did not (12960 + 3040 MiB on a 16000 MiB GPU, in 1 GiB
// buckets 13312 + 3072), and that is what the fragmentation and the completion value are about
// (docs/placement.md, "The typical workload").
TypicalSpec SpecOfPod(const PodRequest& pod);

// FGD's GetTypicalPods over a fixed list: count pods per spec; sort by count descending (ties:
// larger spec first by cpu, memory, devices); keep specs until `coverage` (0.95) of pods is
// reached; renormalise.
TypicalWorkload TypicalWorkloadFromPods(const std::vector<TypicalSpec>& pod_specs, double coverage);

// A cold-start prior expressed relative to the cluster's most common device capacity
// `device_mib`: 30% whole devices, 20% halves, 15% quarters, 10% eighths, 10% 2× whole,
// 15% CPU-only (cpu 4 cores each). Documented in docs/placement.md.
TypicalWorkload DefaultPriorWorkload(MiB device_mib);

// One GPU model of the cluster (model::Device::model) and its share of the cluster's device memory.
struct ClusterModel {
  std::string model;
  double memory_share = 0;
};

// A kind of node with the most GPUs in the cluster (Decision::Refresh): its GPUs and its
// allocatable CPU and host memory (0: unknown).
struct LargestNode {
  int gpus = 0;
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  bool operator==(const LargestNode&) const = default;
};

// Exponentially decayed histogram of observed pod shapes. Each observation multiplies earlier
// weights by 2^(-1/half_life_pods). The snapshot blends the prior with the observations at a
// fixed share (the evidence rule, docs/placement.md): the prior weighs as `prior_pods` pods
// against the observed mass once that mass has reached its steady state (1 / (1 − decay), 1,443
// pods at a half-life of 1,000), and as the same share before, so a handful of pods of a new mix
// already outweigh it; with nothing observed it is the whole estimate. While pods of whole GPUs
// come (their decayed count is at least ½: one within the last half-life) it weighs as
// `whole_gpu_prior_pods` instead: its whole and multi-GPU shapes then keep room for the rare
// large pods that the coverage cut drops, where no such pod comes they keep room for nothing. The
// snapshot then keeps the most frequent shapes until they cover `coverage` of the blended weight,
// as FGD's typical set covers 95% of pods: the rarest shapes otherwise pull the policy towards
// keeping room for pods that almost never come (bench/RESULTS.md keeps the measurements). As in
// FGD, frequency counts whole pods and ties go to the larger shape: a shape ranks by its weight in
// pods (a pod seen now weighs one, the prior as many as it weighs) rounded to whole pods, so of two
// shapes seen once each the decay does not keep the newer and drop the older (an 8-GPU pod seen
// early among 40 one-GPU pods of as many CPU sizes).
// 0 < coverage ≤ 1. Shapes are exact (SpecOfPod); the histogram holds at most 4 ×
// kMaxTypicalSpecs of them, dropping the lightest. Not thread-safe: the owner serialises calls.
class WorkloadLearner {
 public:
  WorkloadLearner(TypicalWorkload prior, double half_life_pods, double prior_pods, double whole_gpu_prior_pods,
                  double coverage);
  void Observe(const PodRequest& pod);
  // Replaces the prior (e.g. once the cluster's device size is known); observations stay.
  void SetPrior(TypicalWorkload prior);
  // The cluster's GPU models, for the hedge for pods pinned to a model (below); Decision::Refresh
  // sets them from the nodes.
  void SetClusterModels(std::vector<ClusterModel> models);
  // The kinds of node with the most GPUs in the cluster, for the hedge for pods that take a
  // whole node (below); Decision::Refresh sets them from the nodes.
  void SetLargestNodes(std::vector<LargestNode> nodes) { largest_nodes_ = std::move(nodes); }
  // The hedges hold while the decayed count of pods seen is under kHedgePods: until then the
  // pods seen may not yet include the rare ones that only some nodes can host, and after it the
  // observations carry the pods that are really asked for, and a hedge would only keep room that
  // nobody asks for (docs/placement.md, "Room for pods not seen yet").
  static constexpr double kHedgePods = 200;
  bool hedge_window() const { return mass_ < kHedgePods; }
  // The hedge for pods pinned to a GPU model: once pods that name GPU models come (their decayed
  // count is at least ½), the blend also holds, for each model with under kMinorityModelShare of
  // the cluster's device memory that no pod seen has named, one whole-GPU shape pinned to that
  // model (4 cores, as the prior's shapes; a named model's pods stand for themselves, and a hedge
  // would keep its GPUs whole against the very pods that fill them). Together they weigh
  // kModelHedgeWeight × the share of pinned pods among the pods seen, against 1 for the prior and
  // the observations. A pod pinned to a rare model fits only where that model is, and a learner
  // that has not yet seen one lets unpinned pods spend it.
  static constexpr double kMinorityModelShare = 0.5;
  static constexpr double kModelHedgeWeight = 0.4;
  // The hedge for pods that take a whole node: once pods asking for several whole GPUs come
  // (their decayed count is at least ½), the blend also holds, for each kind of node with the
  // most GPUs, one shape asking for all of that node (its GPUs whole, its CPU and host memory).
  // Together they weigh kNodeHedgeWeight × the share of those pods among the pods seen, fading
  // to nothing as the pods seen reach kHedgePods. Where some pods ask for two or four GPUs, the
  // 8-GPU jobs that only an empty 8-GPU node can take (or only the one kind with enough CPU) may
  // not have come yet, and a learner that has not seen one spreads small pods over those nodes.
  static constexpr double kNodeHedgeWeight = 0.5;
  // The current estimate: blended, cut to `coverage` and to kMaxTypicalSpecs in the cut's order
  // (above), normalised, heaviest first.
  TypicalWorkload Snapshot() const;
  // The same with another coverage: 1 keeps every shape seen up to kMaxTypicalSpecs (the
  // completion value prices them all).
  TypicalWorkload Snapshot(double coverage) const;
  // Every shape the learner holds (the prior's and up to 4 × kMaxTypicalSpecs observed), weights
  // summing to 1, heaviest first, not cut to kMaxTypicalSpecs: for capacity reservation, where a
  // rare large shape seen once must not lose its place to common ones. Not a Policy's workload.
  TypicalWorkload EveryShape() const;
  double observed_mass() const { return mass_; }
  // The prior's share of the blend once anything is observed: PriorShare of prior_pods, or of
  // whole_gpu_prior_pods while pods of whole GPUs come.
  double prior_share() const { return whole_gpu_mass_ >= 0.5 ? whole_gpu_prior_share_ : prior_share_; }
  // prior_pods·(1 − decay) / (1 + prior_pods·(1 − decay)); 6.5 % at 100 pods and half-life 1,000,
  // 20 % at 360.
  static double PriorShare(double prior_pods, double decay);

 private:
  // A shape of the blend and the whole pods its weight stands for (a pod seen now weighs one), by
  // which the coverage cut ranks it; with nothing observed, its weight.
  struct RankedShape {
    TypicalSpec spec;
    double pods;
  };
  // The prior and the observations blended, weights summing to 1, in no particular order.
  std::vector<RankedShape> Blend() const;
  // Recomputes hedged_models_ from cluster_models_ and named_models_.
  void UpdateHedgedModels();

  struct Bucket {
    TypicalSpec spec;
    double weight;           // stored scaled by scale_ to avoid touching every bucket per observation
    double memory_weighted;  // Σ scaled weight × host memory bytes of its observations
  };
  TypicalWorkload prior_;
  double decay_;
  double prior_share_;
  double whole_gpu_prior_share_;
  double coverage_;
  double scale_ = 1.0;         // current weight of an observation made now, relative to storage units
  double mass_ = 0;            // decayed count of observations
  double whole_gpu_mass_ = 0;  // decayed count of the observed pods that ask for whole GPUs
  double pinned_mass_ = 0;     // decayed count of the observed pods that name GPU models
  double multi_gpu_mass_ = 0;  // decayed count of the observed pods that ask for several whole GPUs
  std::vector<LargestNode> largest_nodes_;
  std::vector<ClusterModel> cluster_models_;
  std::vector<std::string> named_models_;   // the model names the pods observed in the window asked for
  std::vector<std::string> hedged_models_;  // the rare cluster models none of those names matches
  std::vector<Bucket> buckets_;
};

}  // namespace gpupack::placement

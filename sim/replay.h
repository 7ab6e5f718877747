// The FGD paper's replay protocol (its artifact's scripts, docs/design.md "Sources"), for any cluster and
// workload:
//  1. the target workload M comes once from the original pod list (FGD's GetTypicalPods);
//  2. per seed: sort the pods by name, shuffle them (unless keep_order);
//  3. inflate to `tune` × cluster GPU capacity: append uniform random copies of original pods
//     while the next draw's per-device request does not push the total past the target (the
//     artifact's quirk), or remove pods at random while above it;
//  4. submit pods one at a time: one attempt each, no retries, no departures;
//  5. after every pod record arrived GPU, allocated GPU, F(M) and idle GPU;
//  6. discretise by x = round(arrived %) (mean per x; an empty x takes the mean over x−1..x+1);
//  7. aggregate seeds: median, mean and sample SD per x.
// With `fill_pods` N > 0 (the early window: how a policy packs a fresh cluster from its first
// pods), step 3 changes: per seed, the nodes are taken in the seed's random node order until
// their GPU capacity holds the GPU demand of the seed's first N pods, and that cluster replays the
// seed's order as it comes (no copies) up to `tune` × its capacity; at arrived 100 % about N
// pods have come, so whatever a policy learns it learns from them. With `burst` as well, those
// first N pods all wait before the first is placed (created before the scheduler could place
// them): they still come one at a time in the same order, but each sees the rest of the burst
// waiting (SimPod::waiting), as the extender sees the pods pending with the one it is asked about.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model.h"
#include "placement/workload.h"
#include "sim/cluster_state.h"
#include "sim/policy.h"

namespace gpupack::sim {

struct ReplayOptions {
  double tune = 1.3;         // inflate to this × GPU capacity; <= 0 disables inflation
  bool shuffle = true;       // false keeps the workload's own order (no sort, no shuffle)
  double coverage = 0.95;    // share of pods the typical set M must cover
  int fill_pods = 0;         // > 0: per seed, a cluster that the first fill_pods pods fill (above)
  bool burst = false;        // with fill_pods: those pods all wait from the start (above)
  OverheadVariant overhead;  // what the gpupack-overhead policy charges per process
};

// One integer arrived-percentage point of one seed.
struct SeedPoint {
  int arrived_pct = 0;
  double unallocated_pct = 0;          // 100 − allocated GPU % of capacity
  double unallocated_compute_pct = 0;  // 100 − reserved compute % of all devices' compute
  double frag_rate_pct = 0;            // F(M) / idle GPU
  double frag_amount_pct = 0;          // F(M) / capacity
};

struct SeedRun {
  uint64_t seed = 0;
  int pods = 0;    // submitted
  int failed = 0;  // fitted nowhere
  double seconds = 0;
  std::vector<SeedPoint> curve;  // index = arrived %, 0..max reached
};

struct Stat {
  double median = 0, mean = 0, sd = 0;
};

struct AggregatePoint {
  int arrived_pct = 0;
  int seeds = 0;  // seeds that reached this point
  Stat unallocated_pct, unallocated_compute_pct, frag_rate_pct, frag_amount_pct;
};

struct PolicyRun {
  std::string policy;
  std::vector<SeedRun> seeds;
  std::vector<AggregatePoint> curve;
  double seconds = 0;
};

// A cluster and a workload prepared once for many seeds and policies.
class Replayer {
 public:
  // Fails (InvalidArgument naming the pod) when a pod cannot be replayed, e.g. several device
  // containers, or when the cluster has no nodes.
  static StatusOr<Replayer> Create(std::vector<model::Node> nodes, std::vector<model::PodRequest> pods,
                                   ReplayOptions options);

  const placement::TypicalWorkload& typical() const { return typical_; }
  const ReplayOptions& options() const { return options_; }
  const std::vector<model::Node>& nodes() const { return nodes_; }
  const std::vector<model::PodRequest>& pods() const { return pods_; }
  MiB capacity_mib() const { return base_.total_capacity(); }
  MiB unit_mib() const { return base_.unit_mib(); }

  // The seed's arrival list: indices into pods(), copies included.
  std::vector<int> Arrivals(Rng& rng) const;
  // The cluster one seed replays on: every node, or with fill_pods the seed's sample (above).
  struct SeedCluster {
    std::vector<model::Node> nodes;
    ClusterState state;
    std::vector<Demand> demands;  // per pod, against `state`
    std::vector<int> arrivals;
  };
  StatusOr<SeedCluster> ClusterOfSeed(Rng& rng) const;

  // One replay of `seed` with `policy` (Start is called on it first).
  StatusOr<SeedRun> RunSeed(SimPolicy& policy, uint64_t seed) const;
  // Every seed with a fresh policy from `make_policy`, then the per-x statistics.
  StatusOr<PolicyRun> Run(const std::string& policy_name,
                          const std::function<StatusOr<std::unique_ptr<SimPolicy>>()>& make_policy,
                          const std::vector<uint64_t>& seeds) const;

 private:
  Replayer(std::vector<model::Node> nodes, std::vector<model::PodRequest> pods, ReplayOptions options,
           placement::TypicalWorkload typical, ClusterState base, std::vector<Demand> demands)
      : nodes_(std::move(nodes)),
        pods_(std::move(pods)),
        options_(options),
        typical_(std::move(typical)),
        base_(std::move(base)),
        demands_(std::move(demands)) {}

  // The seed's order of the pods, before inflation: by name, then shuffled (or the file's order).
  std::vector<int> Order(Rng& rng) const;

  std::vector<model::Node> nodes_;
  std::vector<model::PodRequest> pods_;
  ReplayOptions options_;
  placement::TypicalWorkload typical_;
  ClusterState base_;            // empty-cluster view with every pod's constraint interned
  std::vector<Demand> demands_;  // per pod
};

// The name of an arrival: the pod's own for its first, "<name>-tuned-<copy>" for the copies
// inflation makes (copy ≥ 1), so that every arrival of a seed has a name of its own.
std::string ArrivalName(const std::string& pod_name, int copy);
// Median, mean and sample SD (n−1; 0 for a single value).
Stat Summarize(std::vector<double> values);
// Seeds → per-x statistics over the seeds that reached x.
std::vector<AggregatePoint> Aggregate(const std::vector<SeedRun>& seeds);
// Parses "42-51" or "42,43,50" (or a mix, "1,5-7").
StatusOr<std::vector<uint64_t>> ParseSeeds(std::string_view text);

}  // namespace gpupack::sim

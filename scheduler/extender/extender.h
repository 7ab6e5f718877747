// The extender's verbs (filter, prioritize, bind, preempt) from request body to reply, without
// sockets: http_server.h maps URLs onto these, tests call them directly.
//
// Ranking that survives kube-scheduler: kube-scheduler multiplies an extender's 0–10 score by its
// weight and breaks ties at random, so a fine-grained cost (FGD's ΔF in MiB) would collapse into a
// few levels and lose. Two mechanisms keep it:
//   - the decisive filter (on by default) passes only nodes whose cost is within `band_mib` of the
//     best node's, so every node kube-scheduler may pick is (near-)optimal; the rest are dropped
//     silently (they are feasible, so they belong in neither failure map);
//   - prioritize ranks the distinct cost levels and spreads them over 1–10 by rank (best = 10,
//     alone), so the order survives quantisation even without the filter.
// The device choice at bind is the same Evaluate that produced the cost, so the bind agrees with
// the score.
//
// Thread safety: every verb may run concurrently with every other.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "api/extender_types.h"
#include "common/clock.h"
#include "scheduler/core/model.h"
#include "scheduler/core/workload.h"
#include "scheduler/extender/backend.h"
#include "scheduler/extender/cluster_state.h"
#include "scheduler/extender/metrics.h"

namespace gpupack::extender {

struct ExtenderOptions {
  bool decisive_filter = true;
  double band_mib = 0;  // decisive filter tolerance on the policy's cost (MiB)
  // > 0: FGD costs are ranked on integer levels with this device size as the unit (RankOf):
  // core::FgdScoreLevel, core::FillLevel and core::CompletionLossLevel; nodes equal on all tie.
  core::MiB fgd_score_unit_mib = 0;
  // With FGD levels: rank nodes on the same level by core::FillLevel first (false: FGD's own
  // rule, level then node order; for clusters where many pods are pinned to scarce GPU models,
  // docs/configuration.md).
  bool rank_by_fill = true;
  // With FGD levels and learning: at every policy refresh, price the capacity that constrained pod
  // shapes depend on (core::CapacityReservation over every learned shape and the nodes as they
  // are), and rank by the fill level of ΔF̂ plus that price. false: no price.
  bool reserve_scarce_capacity = true;
  // With FGD levels and learning: at every policy refresh, price free device slices by how the
  // learned shapes can still complete them (core::CompletionValue over every learned shape and
  // the cluster's device capacities), and rank nodes by the completion loss of the pod's device
  // picks, then the fill level, then the FGD level. false: no completion loss, and the FGD level
  // before the fill level (the previous release's ranking).
  bool rank_by_completion = true;
  // With FGD levels: break the remaining ties by a fixed node order (each node's
  // core::NodeTieBreakRank, salted and computed by the ClusterState), so the decisive filter keeps
  // one node; false leaves ties to kube-scheduler's random pick.
  bool fixed_tie_break = true;
  // Pods without a gpupack request: false = score them by the policy (keeps CPU-only pods off
  // nodes whose CPU the GPU pods will need, as FGD does); true = every node scores 0.
  bool neutral_non_gpu_pods = false;
  double request_ratio = 1.0;  // soft limit / hard cap written at bind (NVIDIA_GPU_MEMORY_REQUEST)
  int max_devices_per_container = 16;
  // Requests remembered from filter/prioritize for the bind that follows (standalone mode needs
  // them; on a cluster they save an informer lookup). Bounded and expiring.
  size_t remembered_pods = 10000;
  std::chrono::nanoseconds remembered_ttl = std::chrono::minutes(10);
  // A reservation whose bind has not finished after this long is released by Maintain().
  std::chrono::nanoseconds reservation_ttl = std::chrono::minutes(2);
  // Learning the typical workload (FGD's M) from bound pods: every `refresh_pods` binds the
  // policy is rebuilt from the learner's snapshot (0 = keep the starting workload).
  struct Learner {
    double half_life_pods = 1000;
    double prior_pods = 100;
    double coverage = 0.95;  // core::WorkloadLearner's coverage
    int refresh_pods = 50;
    core::MiB granularity_mib = 1024;
  } learner;
};

// A reply: HTTP status (200 for every protocol verdict) and JSON body.
struct Reply {
  int status = 200;
  std::string body;
};

class Extender {
 public:
  // All references must outlive the Extender. `metrics` may be null.
  Extender(ClusterState& state, ClusterBackend& backend, ExtenderOptions options, const Clock& clock,
           ExtenderMetrics* metrics);

  Reply Filter(std::string_view body);
  Reply Prioritize(std::string_view body);
  Reply Bind(std::string_view body);
  Reply Preempt(std::string_view body);

  bool Ready() const { return backend_.Synced(); }
  // Where a node stands in the verbs' ranking, lower first, compared lexicographically.
  struct RankKey {
    // The policy's cost; with FGD levels the integer keys folded in one integer-valued double,
    // exact far beyond any key's range (see RankOf): with rank_by_completion (completion loss
    // level, fill level, minus the FGD level), else (minus the FGD level, fill level), where the
    // fill level is of ΔF̂ if rank_by_fill plus the reservation price.
    double cost = 0;
    // With FGD levels and fixed_tie_break: the node's fixed tie-break rank
    // (Assessment::tie_break_rank) as a fraction in [0, 1); otherwise 0. Kept apart from cost so
    // it keeps its full precision whatever the keys' magnitude.
    double tie = 0;
    friend auto operator<=>(const RankKey&, const RankKey&) = default;
  };
  // `pod_node_policy`: the pod's gpupack.io/node-policy, when it overrides the cluster's policy
  // (an FGD cluster ranks such a pod's exact binpack / spread costs, not FGD levels).
  RankKey RankOf(const ClusterState::Assessment& assessment,
                 std::optional<core::PolicyKind> pod_node_policy = std::nullopt) const;
  std::vector<prometheus::MetricFamily> BackendMetrics() const { return backend_.Metrics(); }
  // Periodic housekeeping (the server calls it every few seconds): releases expired
  // reservations and forgets expired remembered requests.
  void Maintain();

  // Scores for distinct costs, best (lowest) first: exposed for tests and the docs' table.
  // Returns one score per element of `sorted_distinct_costs`, 10 for the first, at least 1.
  static std::vector<int64_t> RankScores(size_t levels);

 private:
  struct Remembered {
    core::PodRequest request;
    Clock::TimePoint at;
    std::list<std::string>::iterator lru;
  };
  // Whether a pod with this node-policy override is ranked on FGD levels (else on exact costs).
  bool RanksOnFgdLevels(std::optional<core::PolicyKind> pod_node_policy) const {
    return fgd_levels_ && (!pod_node_policy || *pod_node_policy == core::PolicyKind::kFgd);
  }
  // The pod's request, or an error naming the pod and the field.
  StatusOr<core::PodRequest> ParsePod(const nlohmann::json& pod) const;
  void Remember(const core::PodRequest& request);
  std::optional<core::PodRequest> Recall(const std::string& uid);
  // Feeds a bound pod to the workload learner; may replace the state's policy.
  void Learn(const core::PodRequest& request);
  // Once the backend has synced, feeds it the pods already holding devices and rebuilds the
  // policy, once: a restart or a failover keeps the learned workload (and so the reservation).
  // Maintain and the first filter after the sync call it; afterwards it is one atomic load.
  void LearnHeldPods();
  // Rebuilds the policy from the learner, with the capacity reservation when enabled.
  // REQUIRES: learner_mu_ held.
  void RefreshPolicyLocked();

  ClusterState& state_;
  ClusterBackend& backend_;
  const ExtenderOptions options_;
  const Clock& clock_;
  ExtenderMetrics* metrics_;
  const bool fgd_levels_;  // rank FGD costs by core::FgdScoreLevel (options_.fgd_score_unit_mib)

  std::mutex remembered_mu_;
  std::unordered_map<std::string, Remembered> remembered_;
  std::list<std::string> lru_;  // most recent first

  std::mutex learner_mu_;
  core::WorkloadLearner learner_;
  int binds_since_refresh_ = 0;
  std::atomic<bool> learned_held_pods_{false};  // written under learner_mu_; read without it
};

}  // namespace gpupack::extender

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
// Between filter and bind: kube-scheduler binds asynchronously and filters the next pod at once,
// so the next pod's filter may come before this pod's bind. When the filter passes a pod to one
// node (the default: the decisive filter with the fixed tie-break order), kube-scheduler will bind
// it there, so the filter holds the pod's devices (ClusterState::Hold) until its bind takes them
// over, it is filtered or ranked again, or `filter_hold_ttl` passes.
//
// Thread safety: every verb may run concurrently with every other.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "api/extender_types.h"
#include "common/clock.h"
#include "model/model.h"
#include "placement/decision.h"
#include "scheduler/extender/backend.h"
#include "scheduler/extender/cluster_state.h"
#include "scheduler/extender/defragmenter.h"
#include "scheduler/extender/metrics.h"

namespace gpupack::extender {

struct ExtenderOptions {
  bool decisive_filter = true;
  double band_mib = 0;  // decisive filter tolerance on the policy's cost (MiB)
  // The rank key, the workload learner and its refresh (placement::Decision; its defaults are the
  // product's). decision.fgd_levels ranks FGD costs on integer levels (placement::RankOf); the
  // decisive filter then keeps the one best node.
  placement::DecisionOptions decision;
  // The learner's cold-start prior when not the default one for the cluster's device size (tests).
  std::optional<placement::TypicalWorkload> prior;
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
  // A filter's hold whose bind has not come after this long is released by Maintain(); zero: the
  // filter holds nothing.
  std::chrono::nanoseconds filter_hold_ttl = std::chrono::seconds(30);
  // Pods that fit on no offered node for want of device room are planned for by Maintain
  // (defragmenter.h); off: never.
  DefragConfig defrag;
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
  // Where a node stands in the verbs' ranking, lower first: placement::RankOf of the assessment.
  // `pod_node_policy`: the pod's gpupack.io/node-policy, when it overrides the cluster's policy
  // (an FGD cluster ranks such a pod's exact binpack / spread costs, not FGD levels).
  using RankKey = placement::RankKey;
  RankKey RankOf(const ClusterState::Assessment& assessment,
                 std::optional<model::PolicyKind> pod_node_policy = std::nullopt) const;
  std::vector<prometheus::MetricFamily> BackendMetrics() const { return backend_.Metrics(); }
  // ClusterBackend::Problem: a guarantee the backend cannot keep (empty when none), for /readyz.
  std::string BackendProblem() const { return backend_.Problem(); }
  // Periodic housekeeping (the server calls it every few seconds): releases expired
  // reservations, forgets expired remembered requests, and plans for the pods the filter found
  // fitting nowhere (defragmenter.h).
  void Maintain();

  // Scores for distinct costs, best (lowest) first: exposed for tests and the docs' table.
  // Returns one score per element of `sorted_distinct_costs`, 10 for the first, at least 1.
  static std::vector<int64_t> RankScores(size_t levels);

 private:
  struct Remembered {
    model::PodRequest request;
    Clock::TimePoint at;
    std::list<std::string>::iterator lru;
  };
  // RankOf as a ClusterState::Ranking, with the unit as of now: AssessMany memoises the ranks
  // with the assessments, so a node is ranked once per shape and change, not once per verb.
  ClusterState::Ranking RankingFor(std::optional<model::PolicyKind> pod_node_policy) const;
  // Whether a pod with this node-policy override is ranked on FGD levels (else on exact costs).
  bool RanksOnFgdLevels(std::optional<model::PolicyKind> pod_node_policy) const {
    return placement::RanksOnLevels(rank_options_, pod_node_policy);
  }
  // The pod's request, or an error naming the pod and the field.
  StatusOr<model::PodRequest> ParsePod(const nlohmann::json& pod) const;
  void Remember(const model::PodRequest& request);
  std::optional<model::PodRequest> Recall(const std::string& uid);
  // Feeds a pod asked about or bound to the workload learner (once per UID), and at an early
  // refresh (placement::Decision::early) the backend's waiting pods as well; may replace the
  // state's policy.
  void Learn(const model::PodRequest& request);
  // Once the backend has synced, feeds it the pods already holding devices and those waiting to be
  // scheduled, and rebuilds the policy, once: a restart or a failover keeps the learned workload
  // (and so the reservation) and knows at once what is waiting.
  // Maintain and the first filter after the sync call it; afterwards it is one atomic load.
  void LearnHeldPods();
  // Rebuilds the policy from the learner and the nodes (placement::Decision::Refresh).
  // REQUIRES: learner_mu_ held.
  void RefreshPolicyLocked();

  ClusterState& state_;
  ClusterBackend& backend_;
  const ExtenderOptions options_;
  const Clock& clock_;
  ExtenderMetrics* metrics_;
  const bool fgd_levels_;                          // FGD costs ranked on levels (options_.decision.fgd_levels)
  const placement::DecisionOptions rank_options_;  // options_.decision with fgd_levels_

  std::mutex remembered_mu_;
  std::unordered_map<std::string, Remembered> remembered_;
  std::list<std::string> lru_;  // most recent first

  std::mutex learner_mu_;
  placement::Decision decision_;                // guarded by learner_mu_
  std::atomic<model::MiB> unit_mib_;            // decision_.unit_mib(), read by RankOf without the lock
  std::atomic<bool> fewer_gpus_first_;          // decision_.fewer_gpus_first(), likewise
  std::atomic<bool> learned_held_pods_{false};  // written under learner_mu_; read without it
  // Unique to this extender: the owner in its rankings' ids, so that two extenders on one state
  // (with other options) never serve each other's memoised ranks.
  const uint64_t ranking_owner_;
  Defragmenter defrag_;
};

}  // namespace gpupack::extender

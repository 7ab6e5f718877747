// The extender's Prometheus metrics (names gpupack_…, base units, counters end in _total). The
// exact list, with labels, is in docs/metrics.md; metrics_test.cc scrapes and checks them.
//
// Request and bind counters and histograms are updated by the verbs; cluster, node and device
// gauges (capacity, allocated, used, fragmentation, reservations in flight, report heartbeats)
// are computed from the ClusterState at scrape time, so they can never drift from the ledger.
//
// Thread safety: every method may be called concurrently.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/build_info.h"
#include "common/status.h"
#include "placement/defrag.h"
#include "placement/verdict.h"

namespace prometheus {
class Registry;
template <typename T>
class Family;
class Counter;
class Histogram;
struct MetricFamily;
}  // namespace prometheus

namespace gpupack::extender {

class ClusterState;

class ExtenderMetrics {
 public:
  // `state` (may be null in tests) must outlive the metrics. `per_device`: export the per-device
  // gauges (one series per device and metric; turn off on very large clusters). `build`: the
  // labels of gpupack_build_info.
  ExtenderMetrics(const ClusterState* state, bool per_device, const BuildInfo& build);
  ~ExtenderMetrics();

  // `result`: "ok", "no_fit" (filter passed no node, bind could not place), "error", and for a
  // bind the other refusals of ReserveRefusalLabel ("bound_elsewhere", "bind_in_progress",
  // "node_stale").
  void ObserveRequest(std::string_view verb, std::string_view result, double seconds);
  // `count` nodes rejected for `reason` (a filter counts each reason once, not once per node).
  void CountRejection(placement::RejectReason reason, int count = 1);
  // One ClusterBackend::Bind outcome (the API-server Binding on a cluster): OK = "success",
  // Conflict = "conflict" (the pod was already bound elsewhere, or the fresh read found the
  // devices taken), anything else = "error".
  void CountBind(const Status& outcome);
  // One defragmentation plan for a waiting pod (defragmenter.h): its outcome, and the moves a
  // plan names (dry run: the moves it would make).
  void CountDefragPlan(placement::DefragOutcome outcome, int moves);
  // Evictions a plan made or did not (mode on): `result` is "evicted", "refused_by_budget",
  // "error", "deferred" (the hourly bound) or "not_leader" (another replica acts), `count` pods.
  void CountDefragEviction(std::string_view result, int count);
  // Where the workload learner first saw a pod, gpupack_learner_pods_total's `source`: kAsked
  // "asked" (its filter or bind), kWaiting "waiting" (pending with a pod asked about at an early
  // refresh, or at the first sync), kHeld "held" (holding devices at the first sync: a restart or
  // a failover).
  enum class LearnedFrom { kAsked, kWaiting, kHeld };
  // `count` pods counted into the workload learner from `source`, each UID once. Called on the
  // filter's path, so the series are resolved once, at construction.
  void CountLearnedPods(LearnedFrom source, int64_t count);
  // One rebuild of the policy from the learner and the nodes (placement::Decision::Refresh).
  void CountPolicyRefresh();
  void CountExpiredReservations(int count);
  void CountExpiredHolds(int count);
  void SetReady(bool ready);

  // Every family, the ClusterState gauges computed now. The extender's routes hand this to the
  // HTTP server's /metrics.
  std::vector<prometheus::MetricFamily> Collect() const;
  // Collect() in the text format, for tests.
  std::string Render() const;

 private:
  const ClusterState* state_;
  const bool per_device_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* durations_;
  prometheus::Family<prometheus::Counter>* rejections_;
  prometheus::Counter* bind_success_;
  prometheus::Counter* bind_conflict_;
  prometheus::Counter* bind_error_;
  prometheus::Counter* expired_;
  prometheus::Counter* expired_holds_;
  prometheus::Family<prometheus::Counter>* defrag_plans_;
  prometheus::Counter* defrag_moves_;
  prometheus::Family<prometheus::Counter>* defrag_evictions_;
  std::array<prometheus::Counter*, 3> learned_pods_;  // by LearnedFrom
  prometheus::Counter* policy_refreshes_;
  std::atomic<bool> ready_{false};
};

}  // namespace gpupack::extender

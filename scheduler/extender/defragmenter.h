// Defragmentation in the extender (docs/placement.md, "Defragmentation"). A pod that the filter
// found fitting on none of the nodes kube-scheduler offered, for want of device room, is planned
// for off the request path: Consider() queues it (from the filter: a lock and a push), and Run()
// (from the extender's Maintain, every few seconds) plans for each queued pod with
// placement::PlanDefragmentation over the fresh nodes of the ClusterState and the movable pods the
// backend knows, the waiting pod kept to the nodes kube-scheduler offered.
//
// In dry-run mode (the default) a plan is reported and nothing is evicted: a Normal Event
// GpupackDefragPlan on the waiting pod naming the moves, an Event GpupackDefragNoPlan when
// movable pods exist but no plan can use them, a log line, and gpupack_defrag_plans_total.
// A pod is planned for again only after `replan_after`: kube-scheduler retries an unschedulable
// pod every few seconds to minutes, and each retry would otherwise repeat the same report.
//
// In on mode a plan is also carried out: its pods are evicted in order through the backend (the
// Eviction API, so PodDisruptionBudgets apply; a budget's refusal stops the plan), each with a
// GpupackDefragEvicted Event, and the room is claimed for the waiting pod
// (ClusterState::ClaimRoomAfter): held for it the moment the last evicted pod leaves the ledger,
// before the replacements that the pods' controllers create can take it. Bounded: at most
// `max_moves_per_hour` evictions in any hour (a plan that would pass it waits), and a workload
// whose pod was moved is not moved again within `cooldown`. One replica evicts at a time: a standby
// replica's extender gets no filters, so it plans for nothing, and a plan is carried out only by
// the holder of the backend's actor lease (ClusterBackend::TakeActorLease).
//
// Thread safety: Consider may run concurrently with everything; Run from one thread at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/model.h"
#include "placement/defrag.h"
#include "scheduler/extender/backend.h"
#include "scheduler/extender/cluster_state.h"
#include "scheduler/extender/metrics.h"

namespace gpupack::extender {

enum class DefragMode : uint8_t { kOff, kDryRun, kOn };
// "off" | "dry-run" | "on"; InvalidArgument naming the value otherwise.
StatusOr<DefragMode> ParseDefragMode(std::string_view text);
std::string_view DefragModeName(DefragMode mode);

struct DefragConfig {
  DefragMode mode = DefragMode::kDryRun;
  std::chrono::nanoseconds replan_after = std::chrono::minutes(5);
  size_t max_queued = 64;  // pods waiting for a plan; more are not queued until the queue drains
  placement::DefragOptions planner;
  int max_moves_per_hour = 20;                                   // on: evictions in any hour, at most
  std::chrono::nanoseconds cooldown = std::chrono::minutes(30);  // on: a moved workload rests this long
  std::chrono::nanoseconds claim_ttl =
      std::chrono::minutes(2);  // on: the room waits this long for the evicted pods to go
};

class Defragmenter {
 public:
  // All references must outlive the Defragmenter; `metrics` may be null.
  Defragmenter(ClusterState& state, ClusterBackend& backend, DefragConfig config, const Clock& clock,
               ExtenderMetrics* metrics);

  // `pod` fit on none of `offered` (the filter's node names). Queued unless the mode is off, the
  // pod asks for no device, it is queued already, it was planned for within replan_after, or the
  // queue is full.
  void Consider(const model::PodRequest& pod, const std::vector<std::string_view>& offered);
  // Plans for every pod queued so far, and reports each plan; returns how many were planned for.
  int Run();

 private:
  struct Queued {
    model::PodRequest pod;
    std::vector<std::string> offered;
  };
  // Reports one plan: the log line, the metric and, where the pod's owner can act on it, an Event.
  void Report(const Queued& queued, const placement::DefragResult& result, const ClusterState::FreshNodes& cluster,
              const std::vector<placement::MovablePod>& movable);
  // On mode: evicts the plan's pods in order and claims the room; stops at a refusal or error.
  void Execute(const Queued& queued, const placement::DefragResult& result, const ClusterState::FreshNodes& cluster,
               const std::vector<placement::MovablePod>& movable, const std::vector<const MovablePodOnNode*>& source);
  // Evictions in the last hour, after forgetting older ones. REQUIRES mu_.
  size_t RecentEvictions(Clock::TimePoint now);

  ClusterState& state_;
  ClusterBackend& backend_;
  const DefragConfig config_;
  const Clock& clock_;
  ExtenderMetrics* metrics_;

  std::mutex mu_;
  std::deque<Queued> queue_;                                      // REQUIRES mu_
  std::unordered_set<std::string> queued_uids_;                   // REQUIRES mu_
  std::unordered_map<std::string, Clock::TimePoint> planned_at_;  // by UID; REQUIRES mu_
  std::deque<Clock::TimePoint> evictions_;                        // on: the last hour's; REQUIRES mu_
  std::unordered_map<std::string, Clock::TimePoint> moved_at_;    // on: by workload; REQUIRES mu_
};

}  // namespace gpupack::extender

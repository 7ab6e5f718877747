#include "scheduler/extender/defragmenter.h"

#include <set>
#include <utility>

#include "common/log.h"

namespace gpupack::extender {
namespace {

// How long one replica's hold on the defragmentation lease lasts: longer than a plan's evictions
// take, short enough that a replica that stopped is replaced within a replan.
constexpr std::chrono::seconds kActorLeaseTtl{60};

}  // namespace

StatusOr<DefragMode> ParseDefragMode(std::string_view text) {
  if (text == "off") return DefragMode::kOff;
  if (text == "dry-run") return DefragMode::kDryRun;
  if (text == "on") return DefragMode::kOn;
  return Status::InvalidArgument("expected off, dry-run or on, got \"" + std::string(text) + "\"");
}

std::string_view DefragModeName(DefragMode mode) {
  switch (mode) {
    case DefragMode::kOff:
      return "off";
    case DefragMode::kDryRun:
      return "dry-run";
    case DefragMode::kOn:
      return "on";
  }
  return "unknown";
}

Defragmenter::Defragmenter(ClusterState& state, ClusterBackend& backend, DefragConfig config, const Clock& clock,
                           ExtenderMetrics* metrics)
    : state_(state), backend_(backend), config_(std::move(config)), clock_(clock), metrics_(metrics) {}

void Defragmenter::Consider(const model::PodRequest& pod, const std::vector<std::string_view>& offered) {
  if (config_.mode == DefragMode::kOff || !pod.WantsDevices() || pod.uid.empty()) return;
  std::lock_guard lock(mu_);
  if (queue_.size() >= config_.max_queued || queued_uids_.count(pod.uid) > 0) return;
  if (auto it = planned_at_.find(pod.uid);
      it != planned_at_.end() && clock_.Now() - it->second < config_.replan_after) {
    return;
  }
  queued_uids_.insert(pod.uid);
  queue_.push_back(Queued{pod, std::vector<std::string>(offered.begin(), offered.end())});
}

int Defragmenter::Run() {
  std::deque<Queued> work;
  {
    std::lock_guard lock(mu_);
    work.swap(queue_);
    queued_uids_.clear();
    const Clock::TimePoint now = clock_.Now();
    std::erase_if(planned_at_, [&](const auto& entry) { return now - entry.second >= config_.replan_after; });
    for (const Queued& q : work) planned_at_[q.pod.uid] = now;
  }
  if (work.empty()) return 0;

  // One view of the cluster and of what may move, for every pod of this round.
  const ClusterState::FreshNodes cluster = state_.CopyFreshNodes();
  std::unordered_map<std::string_view, int> index;
  for (size_t i = 0; i < cluster.nodes.size(); ++i) index.emplace(cluster.nodes[i].name, static_cast<int>(i));
  const std::vector<MovablePodOnNode> known = backend_.MovablePods();
  std::vector<placement::MovablePod> movable;
  std::vector<const MovablePodOnNode*> source;  // source[i]: what movable[i] came from
  {
    std::lock_guard lock(mu_);
    const Clock::TimePoint now = clock_.Now();
    std::erase_if(moved_at_, [&](const auto& entry) { return now - entry.second >= config_.cooldown; });
    for (const MovablePodOnNode& m : known) {
      auto it = index.find(m.node);
      if (it == index.end() || moved_at_.count(m.workload) > 0) continue;  // gone, or resting after a move
      movable.push_back(placement::MovablePod{&m.request, it->second});
      source.push_back(&m);
    }
  }
  for (const Queued& q : work) {
    std::vector<uint8_t> offered(cluster.nodes.size(), 0);
    for (const std::string& name : q.offered) {
      if (auto it = index.find(name); it != index.end()) offered[it->second] = 1;
    }
    const placement::DefragResult result = placement::PlanDefragmentation(
        *cluster.policy, cluster.nodes, cluster.summaries, q.pod, movable, config_.planner, offered);
    Report(q, result, cluster, movable);
    if (config_.mode == DefragMode::kOn && result.outcome == placement::DefragOutcome::kPlanned) {
      Execute(q, result, cluster, movable, source);
    }
  }
  return static_cast<int>(work.size());
}

void Defragmenter::Report(const Queued& queued, const placement::DefragResult& result,
                          const ClusterState::FreshNodes& cluster, const std::vector<placement::MovablePod>& movable) {
  const std::string message = result.Message(cluster.nodes, movable, queued.pod);
  if (metrics_ != nullptr) metrics_->CountDefragPlan(result.outcome, static_cast<int>(result.plan.moves.size()));
  GPUPACK_LOG(kInfo, "defrag") << "plan pod=" << queued.pod.Key() << " mode=" << DefragModeName(config_.mode)
                               << " outcome=" << placement::DefragOutcomeLabel(result.outcome)
                               << " movable=" << movable.size() << " reason=\"" << message << "\"";
  const BindTarget pod{queued.pod.ns, queued.pod.name, queued.pod.uid};
  switch (result.outcome) {
    case placement::DefragOutcome::kPlanned:
      backend_.ReportOnPod(pod, false, "GpupackDefragPlan",
                           config_.mode == DefragMode::kOn
                               ? "gpupack defragmentation: " + message
                               : "gpupack defragmentation (dry-run: nothing evicted): would " + message);
      return;
    case placement::DefragOutcome::kTooManyMoves:
    case placement::DefragOutcome::kNoReplacement:
    case placement::DefragOutcome::kBudgetExceeded:
      // Movable pods exist and could have helped: say why they cannot.
      backend_.ReportOnPod(pod, false, "GpupackDefragNoPlan", "gpupack defragmentation: no plan: " + message);
      return;
    case placement::DefragOutcome::kFitsAlready:    // the cluster changed since the filter
    case placement::DefragOutcome::kNoMovableRoom:  // nothing may move for it: the common case, no Event
      return;
  }
}

size_t Defragmenter::RecentEvictions(Clock::TimePoint now) {
  while (!evictions_.empty() && now - evictions_.front() >= std::chrono::hours(1)) evictions_.pop_front();
  return evictions_.size();
}

void Defragmenter::Execute(const Queued& queued, const placement::DefragResult& result,
                           const ClusterState::FreshNodes& cluster, const std::vector<placement::MovablePod>& movable,
                           const std::vector<const MovablePodOnNode*>& source) {
  const BindTarget waiting{queued.pod.ns, queued.pod.name, queued.pod.uid};
  const size_t moves = result.plan.moves.size();
  {
    std::lock_guard lock(mu_);
    const size_t recent = RecentEvictions(clock_.Now());
    if (recent + moves > static_cast<size_t>(config_.max_moves_per_hour)) {
      const std::string why =
          "the plan's " + std::to_string(moves) + " evictions would pass defragmentation.maxMovesPerHour (" +
          std::to_string(config_.max_moves_per_hour) + "; " + std::to_string(recent) + " in the last hour): it waits";
      GPUPACK_LOG(kInfo, "defrag") << "deferred pod=" << queued.pod.Key() << " reason=\"" << why << "\"";
      if (metrics_ != nullptr) metrics_->CountDefragEviction("deferred", static_cast<int>(moves));
      backend_.ReportOnPod(waiting, false, "GpupackDefragDeferred", "gpupack defragmentation: " + why);
      return;
    }
  }
  // One replica evicts at a time: a standby whose kube-scheduler lost its lease may still hold
  // queued pods for a moment.
  StatusOr<bool> acting = backend_.TakeActorLease(kActorLeaseTtl);
  if (!acting.ok() || !*acting) {
    const std::string why = acting.ok() ? "another extender replica holds the defragmentation lease"
                                        : "the defragmentation lease: " + acting.status().message();
    GPUPACK_LOG(kInfo, "defrag") << "not acting pod=" << queued.pod.Key() << " reason=\"" << why << "\"";
    if (metrics_ != nullptr) metrics_->CountDefragEviction("not_leader", static_cast<int>(moves));
    return;
  }
  std::set<std::string> evicted;
  for (size_t i = 0; i < moves; ++i) {
    const placement::DefragMove& move = result.plan.moves[i];
    const model::PodRequest& pod = *movable[move.pod].request;
    const BindTarget target{pod.ns, pod.name, pod.uid};
    StatusOr<EvictionOutcome> outcome = backend_.EvictPod(target);
    if (!outcome.ok() || !outcome->evicted) {
      const bool budget = outcome.ok();
      const std::string why =
          (budget ? "a PodDisruptionBudget forbids evicting " + pod.Key() + " now (" + outcome->message + ")"
                  : "evicting " + pod.Key() + " failed: " + outcome.status().message()) +
          "; " + std::to_string(i) + " of " + std::to_string(moves) + " moves made, the rest not tried";
      GPUPACK_LOG(kWarning, "defrag") << "stopped pod=" << queued.pod.Key() << " reason=\"" << why << "\"";
      if (metrics_ != nullptr) metrics_->CountDefragEviction(budget ? "refused_by_budget" : "error", 1);
      backend_.ReportOnPod(waiting, !budget, "GpupackDefragStopped", "gpupack defragmentation: " + why);
      return;
    }
    evicted.insert(pod.uid);
    {
      std::lock_guard lock(mu_);
      evictions_.push_back(clock_.Now());
      moved_at_[source[move.pod]->workload] = clock_.Now();
    }
    if (metrics_ != nullptr) metrics_->CountDefragEviction("evicted", 1);
    backend_.ReportOnPod(target, false, "GpupackDefragEvicted",
                         "evicted by gpupack defragmentation to make room for " + queued.pod.Key() +
                             ", which fits on no node as the cluster is; it fits again on " +
                             cluster.nodes[move.to_node].name);
  }
  state_.ClaimRoomAfter(queued.pod, cluster.nodes[result.plan.node].name, std::move(evicted),
                        clock_.Now() + config_.claim_ttl);
}

}  // namespace gpupack::extender

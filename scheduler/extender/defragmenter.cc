#include "scheduler/extender/defragmenter.h"

#include <utility>

#include "common/log.h"

namespace gpupack::extender {

StatusOr<DefragMode> ParseDefragMode(std::string_view text) {
  if (text == "off") return DefragMode::kOff;
  if (text == "dry-run") return DefragMode::kDryRun;
  return Status::InvalidArgument("expected off or dry-run, got \"" + std::string(text) + "\"");
}

std::string_view DefragModeName(DefragMode mode) { return mode == DefragMode::kOff ? "off" : "dry-run"; }

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
  for (const MovablePodOnNode& m : known) {
    if (auto it = index.find(m.node); it != index.end())
      movable.push_back(placement::MovablePod{&m.request, it->second});
  }
  for (const Queued& q : work) {
    std::vector<uint8_t> offered(cluster.nodes.size(), 0);
    for (const std::string& name : q.offered) {
      if (auto it = index.find(name); it != index.end()) offered[it->second] = 1;
    }
    const placement::DefragResult result = placement::PlanDefragmentation(
        *cluster.policy, cluster.nodes, cluster.summaries, q.pod, movable, config_.planner, offered);
    Report(q, result, cluster, movable);
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
                           "gpupack defragmentation (dry-run: nothing evicted): would " + message);
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

}  // namespace gpupack::extender

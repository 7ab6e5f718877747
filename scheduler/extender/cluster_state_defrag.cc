// ClusterState's parts for defragmentation (defragmenter.h): the copy of the fresh nodes a plan is
// made over, and the claims that keep a plan's room for its waiting pod (RemovePod meets them).
#include <algorithm>

#include "scheduler/extender/cluster_state.h"

namespace gpupack::extender {

ClusterState::FreshNodes ClusterState::CopyFreshNodes() const {
  Views current = CurrentViews();
  std::vector<std::shared_ptr<const NodeView>>& views = current.views;
  FreshNodes out;
  out.policy = current.snapshot->policy;
  const uint64_t generation = current.snapshot->generation;
  std::sort(views.begin(), views.end(), [](const auto& a, const auto& b) { return a->node->name < b->node->name; });
  const Clock::TimePoint now = clock_.Now();
  for (const auto& view : views) {
    if (staleness_.Verdict(view->heartbeat, now)) continue;
    out.nodes.push_back(*view->node);
    // A view SetPolicy has not reached yet is summarised on the spot, as ScoreView does.
    out.summaries.push_back(view->summary_generation == generation ? view->summary
                                                                   : out.policy->Summarize(*view->node));
  }
  return out;
}

void ClusterState::ClaimRoomAfter(const model::PodRequest& pod, std::string_view node, std::set<std::string> leaving,
                                  Clock::TimePoint deadline) {
  std::lock_guard lock(claims_mu_);
  std::erase_if(claims_, [&](const Claim& c) { return c.pod.uid == pod.uid; });
  claims_.push_back(Claim{pod, std::string(node), std::move(leaving), deadline});
}

int ClusterState::ExpireClaims() {
  const Clock::TimePoint now = clock_.Now();
  std::lock_guard lock(claims_mu_);
  return static_cast<int>(std::erase_if(claims_, [&](const Claim& c) { return c.deadline <= now; }));
}

size_t ClusterState::ClaimCount() const {
  std::lock_guard lock(claims_mu_);
  return claims_.size();
}

}  // namespace gpupack::extender

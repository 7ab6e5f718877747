// The extender's learning and ranking verbs (extender.h): filter (with its hold) and prioritize,
// the remembered requests, the learner's refreshes and the housekeeping. Bind and preempt are in
// extender_bind.cc.
#include "scheduler/extender/extender.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "api/allocation.h"
#include "common/log.h"
#include "scheduler/extender/args_decoder.h"
#include "scheduler/extender/rank_order.h"
#include "scheduler/extender/verb_support.h"
#include "translate/pod_request.h"

namespace gpupack::extender {

namespace {

using verbs::kNotSynced;
using verbs::LogDecision;
using verbs::PlainError;
using verbs::VerbTimer;

// Two ranks belong to the same level when their costs differ by at most `band`, plus float noise
// when `exact_costs` (sums of MiB·weight products), and, with no band, their tie-break ranks are
// equal too. Ranked FGD costs are integer keys, so they compare exactly.
bool SameLevel(const Extender::RankKey& level_start, const Extender::RankKey& rank, double band, bool exact_costs) {
  const double slack = exact_costs ? 1e-9 * std::max(1.0, std::fabs(level_start.cost)) : 0.0;
  return rank.cost - level_start.cost <= band + slack && (band > 0 || rank.tie == level_start.tie);
}

// The pod's "namespace/name" as the request names it, also for a request gpupack refuses.
std::string PodKey(const nlohmann::json& pod) {
  auto field = [&](const char* key) {
    const nlohmann::json* meta = pod.is_object() && pod.contains("metadata") ? &pod["metadata"] : nullptr;
    if (meta == nullptr || !meta->is_object() || !meta->contains(key) || !(*meta)[key].is_string())
      return std::string("?");
    return (*meta)[key].get<std::string>();
  };
  return field("namespace") + "/" + field("name");
}

// Whether some node refused the pod for want of device room (memory, empty devices, distinct
// devices, compute) that moving other pods could free: the refusals defragmentation may answer.
bool ForWantOfDeviceRoom(const std::map<placement::RejectReason, int>& counts) {
  for (const auto& [reason, count] : counts) {
    switch (reason) {
      case placement::RejectReason::kInsufficientDeviceMemory:
      case placement::RejectReason::kInsufficientDeviceCompute:
      case placement::RejectReason::kInsufficientEmptyDevices:
      case placement::RejectReason::kInsufficientDevices:
        return true;
      default:
        break;
    }
  }
  return false;
}

// "no node fits (2 insufficient_device_memory, 1 no_matching_device), e.g. gpu-a1: <message>".
std::string NoFitReason(const std::map<placement::RejectReason, int>& counts, std::string_view example_node,
                        const std::string& example) {
  std::ostringstream out;
  out << "no node fits (";
  bool first = true;
  for (const auto& [reason, count] : counts) {
    out << (first ? "" : ", ") << count << " " << placement::RejectReasonLabel(reason);
    first = false;
  }
  out << ")";
  if (!example_node.empty()) out << ", e.g. " << example_node << ": " << example;
  return out.str();
}

}  // namespace

Extender::Extender(ClusterState& state, ClusterBackend& backend, ExtenderOptions options, const Clock& clock,
                   ExtenderMetrics* metrics)
    : state_(state),
      backend_(backend),
      options_(std::move(options)),
      clock_(clock),
      metrics_(metrics),
      fgd_levels_(options_.decision.fgd_levels && state.policy()->kind() == model::PolicyKind::kFgd),
      rank_options_([this] {
        placement::DecisionOptions options = options_.decision;
        options.fgd_levels = fgd_levels_;  // the simple policies' costs are ranked exactly
        return options;
      }()),
      decision_(state.policy()->kind(), state.policy()->options(), options_.decision, options_.prior),
      unit_mib_(decision_.unit_mib()),
      fewer_gpus_first_(decision_.fewer_gpus_first()),
      ranking_owner_([] {
        static std::atomic<uint64_t> next{1};
        return next.fetch_add(1);
      }()),
      defrag_(state, backend, options_.defrag, clock, metrics) {}

void Extender::Learn(const model::PodRequest& request) {
  if (!decision_.learning()) return;
  std::lock_guard lock(learner_mu_);
  // A burst that reaches a running extender is asked about pod by pod; at an early refresh the
  // pods waiting with this one count too, so the first refresh already knows the burst's sizes
  // and the policy keeps room for them.
  const int64_t seen = decision_.seen(), seen_waiting = decision_.seen_waiting();
  const bool refresh = decision_.Observe(request, [this] { return backend_.WaitingPodRequests(); });
  if (metrics_ != nullptr) {
    const int64_t waiting = decision_.seen_waiting() - seen_waiting;
    metrics_->CountLearnedPods(ExtenderMetrics::LearnedFrom::kAsked, decision_.seen() - seen - waiting);
    metrics_->CountLearnedPods(ExtenderMetrics::LearnedFrom::kWaiting, waiting);
  }
  if (refresh) RefreshPolicyLocked();
}

void Extender::LearnHeldPods() {
  if (learned_held_pods_.load() || !decision_.learning() || !Ready()) return;
  std::lock_guard lock(learner_mu_);
  if (learned_held_pods_.load()) return;
  learned_held_pods_.store(true);
  const int64_t seen = decision_.seen();
  const std::vector<model::PodRequest> held = backend_.HeldPodRequests();
  for (const model::PodRequest& request : held) decision_.Observe(request);
  const int64_t seen_held = decision_.seen();
  const std::vector<model::PodRequest> waiting = backend_.WaitingPodRequests();
  for (const model::PodRequest& request : waiting) decision_.Observe(request);
  if (metrics_ != nullptr) {
    metrics_->CountLearnedPods(ExtenderMetrics::LearnedFrom::kHeld, seen_held - seen);
    metrics_->CountLearnedPods(ExtenderMetrics::LearnedFrom::kWaiting, decision_.seen() - seen_held);
  }
  // Even with nothing running: the device size, the reservation and the completion value need
  // the cluster, which is known only now, so the first refresh is here rather than after the
  // first refreshPods binds.
  RefreshPolicyLocked();
  if (!held.empty() || !waiting.empty()) {
    GPUPACK_LOG(kInfo, "extender") << "learned the workload of " << held.size() << " running and " << waiting.size()
                                   << " waiting pod(s)";
  }
}

void Extender::RefreshPolicyLocked() {
  placement::Policy policy = decision_.Refresh([&](const std::function<void(const model::Node&)>& visit) {
    state_.ForEachNode(
        [&](const model::Node& node, const placement::NodeSummary&, std::optional<Clock::TimePoint>) { visit(node); });
  });
  unit_mib_.store(decision_.unit_mib());
  fewer_gpus_first_.store(decision_.fewer_gpus_first());
  state_.SetPolicy(std::make_shared<placement::Policy>(std::move(policy)));
  if (metrics_ != nullptr) metrics_->CountPolicyRefresh();
}

Extender::RankKey Extender::RankOf(const ClusterState::Assessment& assessment,
                                   std::optional<model::PolicyKind> pod_node_policy) const {
  return RankingFor(pod_node_policy).rank(assessment);
}

ClusterState::Ranking Extender::RankingFor(std::optional<model::PolicyKind> pod_node_policy) const {
  // Owned by this extender (its options are fixed), and the unit and the fewer-GPUs-first order
  // are the only inputs that change (at a policy refresh); the node-policy override is part of
  // the pod's shape.
  const model::MiB unit = unit_mib_.load(std::memory_order_relaxed);
  const bool fewer_gpus_first = fewer_gpus_first_.load(std::memory_order_relaxed);
  return ClusterState::Ranking{{ranking_owner_, static_cast<uint64_t>(unit) << 1 | (fewer_gpus_first ? 1 : 0)},
                               [this, unit, fewer_gpus_first, pod_node_policy](const ClusterState::Assessment& a) {
                                 return placement::RankOf({a.cost, a.fill_cost, a.reservation_cost, a.completion_loss,
                                                           a.tie_break_rank, a.gpu_count},
                                                          unit, rank_options_, pod_node_policy, fewer_gpus_first);
                               }};
}

std::vector<int64_t> Extender::RankScores(size_t levels) {
  std::vector<int64_t> scores(levels);
  for (size_t r = 0; r < levels; ++r) {
    // Best level 10 and alone there; the rest spread down to 1, so a node that fits always
    // outscores one the extender knows nothing about (0).
    // ceil(9 r / (levels - 1)) in integers: thousands of levels (one per node with the fixed
    // tie-break), and a double division and a ceil() call each showed in the profile.
    const auto span = static_cast<int64_t>(levels) - 1;
    scores[r] = levels == 1 ? api::kMaxExtenderPriority
                            : api::kMaxExtenderPriority - (9 * static_cast<int64_t>(r) + span - 1) / span;
  }
  return scores;
}

StatusOr<model::PodRequest> Extender::ParsePod(const nlohmann::json& pod) const {
  if (!pod.is_object()) return Status::InvalidArgument("Pod is missing");
  StatusOr<model::PodRequest> request = translate::ParsePodRequest(pod, options_.max_devices_per_container);
  if (!request.ok()) {
    return Status::InvalidArgument("invalid gpupack request: " + request.status().message());
  }
  return request;
}

void Extender::Remember(const model::PodRequest& request) {
  if (request.uid.empty() || options_.remembered_pods == 0) return;
  std::lock_guard lock(remembered_mu_);
  auto it = remembered_.find(request.uid);
  if (it != remembered_.end()) {
    lru_.erase(it->second.lru);
    remembered_.erase(it);
  }
  lru_.push_front(request.uid);
  remembered_.emplace(request.uid, Remembered{request, clock_.Now(), lru_.begin()});
  while (remembered_.size() > options_.remembered_pods) {
    remembered_.erase(lru_.back());
    lru_.pop_back();
  }
}

std::optional<model::PodRequest> Extender::Recall(const std::string& uid) {
  std::lock_guard lock(remembered_mu_);
  auto it = remembered_.find(uid);
  if (it == remembered_.end()) return std::nullopt;
  if (clock_.Now() - it->second.at > options_.remembered_ttl) {
    lru_.erase(it->second.lru);
    remembered_.erase(it);
    return std::nullopt;
  }
  return it->second.request;
}

void Extender::Maintain() {
  LearnHeldPods();
  defrag_.Run();
  if (const int claims = state_.ExpireClaims(); claims > 0) {
    GPUPACK_LOG(kInfo, "extender") << "dropped " << claims
                                   << " defragmentation room claim(s) whose evicted pods did not go in time";
  }
  const int expired = state_.ExpireReservations(options_.reservation_ttl);
  if (expired > 0) {
    GPUPACK_LOG(kWarning, "extender") << "released " << expired << " reservation(s) whose bind never finished";
  }
  const int holds = options_.filter_hold_ttl.count() > 0 ? state_.ExpireHolds(options_.filter_hold_ttl) : 0;
  if (holds > 0) {
    GPUPACK_LOG(kInfo, "extender") << "released " << holds
                                   << " filter hold(s) whose bind never came (kube-scheduler placed the pod "
                                      "elsewhere or not at all)";
  }
  if (metrics_ != nullptr) {
    metrics_->CountExpiredReservations(expired);
    metrics_->CountExpiredHolds(holds);
    metrics_->SetReady(Ready());
  }
  std::lock_guard lock(remembered_mu_);
  const Clock::TimePoint now = clock_.Now();
  while (!lru_.empty()) {
    auto it = remembered_.find(lru_.back());
    if (now - it->second.at <= options_.remembered_ttl) break;
    remembered_.erase(it);
    lru_.pop_back();
  }
}

Reply Extender::Filter(std::string_view body) {
  VerbTimer timer(metrics_, "filter");
  api::ExtenderFilterResult result;
  auto reply = [&result] { return Reply{200, api::EncodeFilterResult(result)}; };
  if (!Ready()) {
    result.error = kNotSynced;
    return reply();
  }
  LearnHeldPods();
  DecodedArgs args;
  if (Status status = DecodeExtenderArgsInto(body, args); !status.ok()) {
    result.error = status.message();
    return reply();
  }
  // Answer in the field the scheduler used (nodeCacheCapable true: names; false: Node objects).
  const bool full_nodes = args.nodes.has_value() && !args.node_names.has_value();
  std::vector<std::string_view> node_names;
  const std::vector<std::string_view>& names = args.AskedNames(node_names);
  std::vector<char> passes(names.size(), false);  // not vector<bool>: read and written per node
  auto finish = [&] {
    if (full_nodes) {
      result.nodes.emplace();
      for (size_t i = 0; i < names.size(); ++i) {
        if (passes[i]) result.nodes->push_back(std::move((*args.nodes)[i]));
      }
    } else {
      result.node_names.emplace();
      for (size_t i = 0; i < names.size(); ++i) {
        if (passes[i]) result.node_names->emplace_back(names[i]);
      }
    }
    const bool any = std::find(passes.begin(), passes.end(), char{true}) != passes.end();
    timer.set_result(any || names.empty() ? "ok" : "no_fit");
    return reply();
  };

  if (!args.pod.is_object()) {
    // The caller's mistake, not the nodes': one error for the request, not one per node.
    result.error = "ExtenderArgs.Pod is missing or not an object";
    return reply();
  }
  StatusOr<model::PodRequest> pod = ParsePod(args.pod);
  if (!pod.ok()) {
    // The request itself is wrong: no node can help, preemption neither.
    LogDecision(PodKey(args.pod), "", "", "", pod.status().message());
    for (std::string_view name : names)
      result.failed_and_unresolvable_nodes[std::string(name)] = pod.status().message();
    if (metrics_ != nullptr) {
      metrics_->CountRejection(placement::RejectReason::kInvalidRequest, static_cast<int>(names.size()));
    }
    return finish();
  }
  Remember(*pod);
  Learn(*pod);  // demand is evidence, counted once per UID (placement::Decision::Observe)
  if (!pod->WantsDevices()) {
    std::fill(passes.begin(), passes.end(), true);
    return finish();
  }
  const bool holds = options_.filter_hold_ttl.count() > 0 && !pod->uid.empty();
  if (holds) state_.ReleaseHold(pod->uid);  // asked again: its previous answer no longer stands

  RankKey best;
  bool any_fit = false;
  std::map<placement::RejectReason, int> rejections;
  std::string_view example_node;
  std::string example;
  auto reject = [&](std::string_view node, placement::RejectReason reason, std::string message) {
    ++rejections[reason];
    if (example_node.empty()) {
      example_node = node;
      example = message;
    }
    return message;
  };
  ClusterState::Assessments assessments;
  state_.AssessMany(names, *pod, ClusterState::ShapeKey(*pod), RankingFor(pod->node_policy), assessments);
  for (size_t i = 0; i < names.size(); ++i) {
    const ClusterState::Assessment* evaluation = assessments.at(i);
    if (evaluation == nullptr) {
      result.failed_and_unresolvable_nodes[std::string(names[i])] =
          reject(names[i], placement::RejectReason::kNoDevices, std::string(api::kUnknownNodeReason));
      continue;
    }
    const placement::Verdict& verdict = evaluation->verdict;
    if (!verdict.fits()) {
      (verdict.unresolvable ? result.failed_and_unresolvable_nodes : result.failed_nodes)[std::string(names[i])] =
          reject(names[i], verdict.reason, verdict.Message());
      continue;
    }
    passes[i] = true;
    if (!any_fit || evaluation->rank < best) best = evaluation->rank;
    any_fit = true;
  }
  if (metrics_ != nullptr) {
    for (const auto& [reason, count] : rejections) metrics_->CountRejection(reason, count);
  }
  if (!any_fit && !names.empty()) {
    LogDecision(pod->ns + "/" + pod->name, "", "", "", NoFitReason(rejections, example_node, example));
    if (ForWantOfDeviceRoom(rejections)) defrag_.Consider(*pod, names);
  }
  if (options_.decisive_filter && any_fit) {
    const bool exact_costs = !RanksOnFgdLevels(pod->node_policy);
    for (size_t i = 0; i < names.size(); ++i) {
      if (passes[i] && !SameLevel(best, assessments.at(i)->rank, options_.band_mib, exact_costs)) passes[i] = false;
    }
  }
  if (holds && std::count(passes.begin(), passes.end(), char{true}) == 1) {
    const size_t only = static_cast<size_t>(std::find(passes.begin(), passes.end(), char{true}) - passes.begin());
    // Refused only when a bind took the room since the assessment: the pod's own bind then
    // re-checks the fit, as it would without the hold.
    StatusOr<ReserveVerdict> held = state_.Hold(*pod, names[only]);
    if (!held.ok() || !held->reserved()) {
      GPUPACK_LOG(kDebug, "extender") << "no hold for " << pod->Key() << " on " << names[only] << ": "
                                      << (held.ok() ? held->message : held.status().message());
    }
  }
  return finish();
}

Reply Extender::Prioritize(std::string_view body) {
  VerbTimer timer(metrics_, "prioritize");
  if (!Ready()) return PlainError(503, kNotSynced);
  DecodedArgs args;
  if (Status status = DecodeExtenderArgsInto(body, args); !status.ok()) return PlainError(400, status.message());
  std::vector<std::string_view> node_names;
  const std::vector<std::string_view>& names = args.AskedNames(node_names);
  std::vector<int64_t> scores(names.size(), 0);
  StatusOr<model::PodRequest> pod = ParsePod(args.pod);
  if (!pod.ok() || (options_.neutral_non_gpu_pods && !pod->WantsDevices())) {
    // The filter already failed every node for an invalid request; nothing to rank.
    timer.set_result(pod.ok() ? "ok" : "no_fit");
    return Reply{200, api::EncodeHostPriorityList(names, scores)};
  }
  Remember(*pod);
  // Ranked without its own hold. kube-scheduler ranks only when the filter passed several nodes,
  // when the filter held nothing.
  if (options_.filter_hold_ttl.count() > 0 && !pod->uid.empty()) state_.ReleaseHold(pod->uid);
  ClusterState::Assessments assessments;
  state_.AssessMany(names, *pod, ClusterState::ShapeKey(*pod), RankingFor(pod->node_policy), assessments);
  std::vector<RankedIndex> fits;  // the fitting nodes, by rank (then index into list)
  fits.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const ClusterState::Assessment* assessment = assessments.at(i);
    if (assessment != nullptr && assessment->verdict.fits()) fits.emplace_back(assessment->rank, i);
  }
  SortByRank(fits);
  std::vector<size_t> level_of(fits.size());
  size_t levels = 0;
  RankKey level_start;
  for (size_t k = 0; k < fits.size(); ++k) {
    const RankKey rank = fits[k].rank();
    if (k == 0 || !SameLevel(level_start, rank, options_.band_mib, !RanksOnFgdLevels(pod->node_policy))) {
      level_start = rank;
      ++levels;
    }
    level_of[k] = levels - 1;
  }
  const std::vector<int64_t> level_scores = RankScores(levels);
  for (size_t k = 0; k < fits.size(); ++k) scores[fits[k].index] = level_scores[level_of[k]];
  timer.set_result(fits.empty() && !names.empty() ? "no_fit" : "ok");
  return Reply{200, api::EncodeHostPriorityList(names, scores)};
}

}  // namespace gpupack::extender

// Long file: the four verbs and the decision log share the request-scoped state (remembered pods,
// reservations, the ranking memo); one file keeps their ordering rules side by side.
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
#include "translate/pod_request.h"

namespace gpupack::extender {

namespace {

constexpr char kNotSynced[] = "gpupack extender is not synced with the cluster yet; retry shortly";

// Times a verb and records it once, whatever path the verb returns by.
class VerbTimer {
 public:
  VerbTimer(ExtenderMetrics* metrics, std::string_view verb)
      : metrics_(metrics), verb_(verb), start_(std::chrono::steady_clock::now()) {}
  ~VerbTimer() {
    if (metrics_ == nullptr) return;
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
    metrics_->ObserveRequest(verb_, result_, took.count());
  }
  void set_result(std::string_view result) { result_ = result; }

 private:
  ExtenderMetrics* metrics_;
  std::string_view verb_;
  std::string_view result_ = "error";
  std::chrono::steady_clock::time_point start_;
};

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

// One log line per decision, at info level in every mode, so that an operator can tell from the
// extender's log alone where each pod went and why, or why it went nowhere:
//   decision pod=default/infer-0 node=gpu-a1 devices=main:GPU-1f…#0 cap=8192MiB reason="bound (policy fgd)"
void LogDecision(std::string_view pod, std::string_view node, std::string_view devices, std::string_view cap,
                 std::string_view reason) {
  GPUPACK_LOG(kInfo, "extender") << "decision pod=" << pod << " node=" << (node.empty() ? "none" : node)
                                 << " devices=" << (devices.empty() ? "none" : devices)
                                 << " cap=" << (cap.empty() ? "none" : cap) << " reason=\"" << reason << "\"";
}

// "main:GPU-a#0,GPU-b#1 sidecar:MIG-c#2" and the per-device caps, "8192MiB" or "8192MiB,4096MiB".
std::pair<std::string, std::string> DevicesAndCaps(const api::Allocation& allocation) {
  std::string devices, caps;
  std::set<model::MiB> seen;
  for (const api::ContainerAllocation& c : allocation.containers) {
    if (c.within_pod || c.devices.empty()) continue;
    if (!devices.empty()) devices += ' ';
    devices += (c.name.empty() ? std::string(c.init ? "init" : "c") + std::to_string(c.index) : c.name) + ':';
    for (size_t i = 0; i < c.devices.size(); ++i) {
      devices += (i ? "," : "") + c.devices[i].uuid + "#" + std::to_string(c.devices[i].index);
      const std::string cap = c.exclusive ? std::string("whole") : std::to_string(c.devices[i].mem_mib) + "MiB";
      if (seen.insert(c.exclusive ? -1 : c.devices[i].mem_mib).second) caps += (caps.empty() ? "" : ",") + cap;
    }
  }
  return {devices, caps};
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

Reply PlainError(int status, std::string message) {
  // Prioritize and preempt replies have no Error field; the protocol treats a non-200 as the
  // verb's error, and the text tells a human what was wrong.
  return Reply{status, std::move(message)};
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
      ranking_owner_([] {
        static std::atomic<uint64_t> next{1};
        return next.fetch_add(1);
      }()) {}

void Extender::Learn(const model::PodRequest& request) {
  if (!decision_.learning()) return;
  std::lock_guard lock(learner_mu_);
  if (!decision_.Observe(request)) return;
  // A burst that reaches a running extender is asked about pod by pod; at an early refresh the
  // pods waiting with this one count too (each UID once), so the first refresh already knows the
  // burst's sizes and the policy keeps room for them.
  if (decision_.early()) {
    for (const model::PodRequest& waiting : backend_.WaitingPodRequests()) decision_.Observe(waiting);
  }
  RefreshPolicyLocked();
}

void Extender::LearnHeldPods() {
  if (learned_held_pods_.load() || !decision_.learning() || !Ready()) return;
  std::lock_guard lock(learner_mu_);
  if (learned_held_pods_.load()) return;
  learned_held_pods_.store(true);
  const std::vector<model::PodRequest> held = backend_.HeldPodRequests();
  for (const model::PodRequest& request : held) decision_.Observe(request);
  const std::vector<model::PodRequest> waiting = backend_.WaitingPodRequests();
  for (const model::PodRequest& request : waiting) decision_.Observe(request);
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
  state_.SetPolicy(std::make_shared<placement::Policy>(std::move(policy)));
}

Extender::RankKey Extender::RankOf(const ClusterState::Assessment& assessment,
                                   std::optional<model::PolicyKind> pod_node_policy) const {
  return RankingFor(pod_node_policy).rank(assessment);
}

ClusterState::Ranking Extender::RankingFor(std::optional<model::PolicyKind> pod_node_policy) const {
  // Owned by this extender (its options are fixed), and the unit is the only input that changes
  // (at a policy refresh); the node-policy override is part of the pod's shape.
  const model::MiB unit = unit_mib_.load(std::memory_order_relaxed);
  return ClusterState::Ranking{
      {ranking_owner_, static_cast<uint64_t>(unit)}, [this, unit, pod_node_policy](const ClusterState::Assessment& a) {
        return placement::RankOf({a.cost, a.fill_cost, a.reservation_cost, a.completion_loss, a.tie_break_rank}, unit,
                                 rank_options_, pod_node_policy);
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
  const int expired = state_.ExpireReservations(options_.reservation_ttl);
  if (expired > 0) {
    GPUPACK_LOG(kWarning, "extender") << "released " << expired << " reservation(s) whose bind never finished";
  }
  if (metrics_ != nullptr) {
    metrics_->CountExpiredReservations(expired);
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
  }
  if (options_.decisive_filter && any_fit) {
    const bool exact_costs = !RanksOnFgdLevels(pod->node_policy);
    for (size_t i = 0; i < names.size(); ++i) {
      if (passes[i] && !SameLevel(best, assessments.at(i)->rank, options_.band_mib, exact_costs)) passes[i] = false;
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

Reply Extender::Bind(std::string_view body) {
  VerbTimer timer(metrics_, "bind");
  auto error = [](std::string message) { return Reply{200, api::EncodeBindingResult({std::move(message)})}; };
  StatusOr<api::ExtenderBindingArgs> args = api::DecodeBindingArgs(body);
  if (!args.ok()) return error(args.status().message());
  if (args->pod_uid.empty()) return error("ExtenderBindingArgs.PodUID is empty");
  if (args->node.empty()) return error("ExtenderBindingArgs.Node is empty");
  if (!Ready()) return error(kNotSynced);
  const BindTarget target{args->pod_namespace, args->pod_name, args->pod_uid};
  const std::string pod_key = target.ns + "/" + target.name;

  std::optional<model::PodRequest> request = Recall(target.uid);
  if (!request) {
    StatusOr<model::PodRequest> looked_up = backend_.LookupPod(target);
    if (!looked_up.ok()) return error("cannot bind pod " + pod_key + ": " + looked_up.status().message());
    request = std::move(looked_up).value();
  }
  request->uid = target.uid;
  if (request->ns.empty()) request->ns = target.ns;
  if (request->name.empty()) request->name = target.name;

  // Reserves the pod on the node. When it is refused, or the UID already holds the node (a
  // repeated bind), there is nothing to bind: `done` then holds the reply. A refusal is counted
  // and logged under its own name, so that a lost race (no_fit) is not mistaken for a duplicate
  // bind or a stale node.
  std::optional<Reply> done;
  auto reserve = [&]() -> std::optional<Reservation> {
    StatusOr<ReserveVerdict> verdict = state_.Reserve(*request, args->node);
    if (!verdict.ok() || !verdict->reserved()) {
      const std::string_view label = verdict.ok() ? ReserveRefusalLabel(verdict->refusal) : "error";
      const std::string& why = verdict.ok() ? verdict->message : verdict.status().message();
      timer.set_result(label);
      LogDecision(pod_key, "", "", "", "not bound to " + args->node + " (" + std::string(label) + "): " + why);
      done = error(why);
      return std::nullopt;
    }
    if (verdict->reservation.repeated) {
      timer.set_result("ok");
      done = Reply{200, api::EncodeBindingResult({})};
      return std::nullopt;
    }
    return std::move(verdict->reservation);
  };

  if (!request->WantsDevices()) {
    // No devices, so no annotations. Where gpupack knows the node's CPU and memory (standalone
    // cluster files), the pod's requests still count: they are CPU that GPU pods will lack.
    bool reserved = false;
    if (state_.TracksHostResources(args->node)) {
      if (!reserve()) return *done;
      reserved = true;
    }
    const Status bound = backend_.Bind(target, args->node, {});
    if (metrics_ != nullptr) metrics_->CountBind(bound);
    if (!bound.ok()) {
      if (reserved) state_.Release(target.uid);
      return error(bound.ToString());
    }
    if (reserved) state_.Confirm(target.uid);
    LogDecision(pod_key, args->node, "", "", "bound (the pod asks for no GPU)");
    Learn(*request);
    timer.set_result("ok");
    return Reply{200, api::EncodeBindingResult({})};
  }
  const std::optional<Reservation> reservation = reserve();
  if (!reservation) return *done;
  const Status bound =
      backend_.Bind(target, args->node, api::AllocationAnnotations(reservation->allocation, options_.request_ratio));
  if (metrics_ != nullptr) metrics_->CountBind(bound);
  if (!bound.ok()) {
    state_.Release(target.uid);
    GPUPACK_LOG(kWarning, "extender") << "bind of " << pod_key << " to " << args->node << " failed: " << bound;
    return error("binding pod " + pod_key + " to node " + args->node + " failed: " + bound.ToString());
  }
  state_.Confirm(target.uid);
  const auto [devices, caps] = DevicesAndCaps(reservation->allocation);
  LogDecision(pod_key, args->node, devices, caps,
              "bound (policy " + std::string(placement::PolicyKindName(state_.policy()->kind())) + ")");
  Learn(*request);
  timer.set_result("ok");
  return Reply{200, api::EncodeBindingResult({})};
}

Reply Extender::Preempt(std::string_view body) {
  VerbTimer timer(metrics_, "preempt");
  if (!Ready()) return PlainError(503, kNotSynced);
  StatusOr<api::ExtenderPreemptionArgs> args = api::DecodePreemptionArgs(body);
  if (!args.ok()) return PlainError(400, args.status().message());
  api::ExtenderPreemptionResult result;
  StatusOr<model::PodRequest> pod = ParsePod(args->pod);
  if (pod.ok()) {
    for (auto& [node, victims] : args->victims) {
      // kube-scheduler rejects a kept node without victims, and the extender cannot choose
      // victims itself (it does not know pod priorities), so such nodes are dropped.
      if (victims.pod_uids.empty()) continue;
      if (!pod->WantsDevices()) {
        result.node_name_to_meta_victims.emplace(node, std::move(victims));
        continue;
      }
      const std::set<std::string> uids(victims.pod_uids.begin(), victims.pod_uids.end());
      std::optional<placement::NodeEvaluation> evaluation = state_.EvaluateWithout(node, *pod, uids);
      // Keep the node only where evicting exactly these victims makes room on real devices.
      if (evaluation && evaluation->verdict.fits()) result.node_name_to_meta_victims.emplace(node, std::move(victims));
    }
  }
  timer.set_result(result.node_name_to_meta_victims.empty() && !args->victims.empty() ? "no_fit" : "ok");
  return Reply{200, api::EncodePreemptionResult(result)};
}

}  // namespace gpupack::extender

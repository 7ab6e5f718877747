#include "sim/timeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_set>

#include "placement/decision.h"
#include "placement/ledger.h"
#include "placement/placement.h"
#include "sim/policy.h"

namespace gpupack::sim {
namespace {

constexpr int kSamples = 100;
constexpr int64_t kHourS = 3600;
constexpr int64_t kNeverMoved = std::numeric_limits<int64_t>::min();

// One arrival or departure. Sorted by time, then departures before arrivals, then pod order; a pod
// that lives 0 s leaves after the arrivals of its instant (after its own).
struct Event {
  int64_t time = 0;
  int order = 0;  // 0 departure, 1 arrival, 2 departure of a 0 s pod
  int pod = 0;
  auto operator<=>(const Event&) const = default;
};

// The device memory a node's pods hold: Σ caps per device, all of it when held whole.
MiB NodeAllocatedMiB(const model::Node& node) {
  MiB allocated = 0;
  for (const model::Device& d : node.devices) {
    MiB caps = 0;
    bool whole = false;
    for (const model::DeviceShare& s : d.shares) {
      caps += s.mem_mib;
      whole = whole || s.exclusive;
    }
    allocated += whole ? d.capacity_mib : std::min(caps, d.capacity_mib);
  }
  return allocated;
}

// The request without its identity (namespace, name, UID, container names): what the placement
// core and the planner read of a pod, so that two pods of one key get the same answers on the same
// cluster. Every field that may tell them apart is in it.
std::string RequestShapeKey(const model::PodRequest& pod) {
  std::string key = std::to_string(pod.cpu_milli) + "," + std::to_string(pod.memory_bytes) + "," +
                    std::to_string(static_cast<int>(pod.device_kind)) + "," + pod.mig_profile + "," +
                    (pod.hard_isolation ? "h" : "-") + "," + std::to_string(pod.priority) + "," + pod.spread_key +
                    (pod.spread_across_nodes ? "@node" : "") + "," +
                    std::to_string(pod.node_policy ? static_cast<int>(*pod.node_policy) : -1) + "," +
                    std::to_string(pod.device_policy ? static_cast<int>(*pod.device_policy) : -1);
  for (const model::ContainerRequest& c : pod.containers) {
    key += ";" + std::to_string(c.index) + (c.init ? "i" : "a") + std::to_string(c.device_count) + "x" +
           std::to_string(c.mem_per_device_mib) + "/" + std::to_string(c.mem_limit_per_device_mib) + "/" +
           std::to_string(c.compute_pct);
  }
  for (const auto* list : {&pod.gpu_models, &pod.gpu_uuids, &pod.excluded_gpu_uuids, &pod.excluded_gpu_models}) {
    key += "|";
    for (const std::string& item : *list) key += item + "|";
  }
  return key;
}

enum class Where : uint8_t { kNotYet, kWaiting, kRunning, kGone };

struct PodState {
  int64_t arrive = 0;
  int64_t leave = 0;
  Where where = Where::kNotYet;
  int node = -1;
  int64_t moved_at = kNeverMoved;
  // The free-room epoch of its last placement attempt and of its last question to the planner:
  // only nodes freed after the first can hold it now, and only room freed after the second gives
  // the planner something new.
  uint64_t tried_epoch = 0;
  uint64_t planned_epoch = 0;
};

class Timeline {
 public:
  Timeline(const std::vector<model::Node>& nodes, const std::vector<model::PodRequest>& pods,
           const std::vector<PodLifetime>& lives, const TimelineOptions& options)
      : options_(options),
        pods_(pods),
        nodes_(nodes),
        decision_(model::PolicyKind::kFgd, placement::PlacementOptions{}, placement::DecisionOptions{}) {
    for (size_t p = 0; p < pods.size(); ++p) {
      const int64_t arrive = std::llround(static_cast<double>(lives[p].created_s) / options.arrival_speedup);
      PodState state;
      state.arrive = arrive;
      state.leave = arrive + (lives[p].deleted_s - lives[p].created_s);
      state_.push_back(state);
      movable_class_.push_back(options.movable == Movability::kAll ||
                               (options.movable == Movability::kBestEffort && lives[p].qos == "BE"));
    }
    for (model::Node& node : nodes_) {
      // Allocation alone is replayed: a usage reported with the cluster would stand still while
      // pods come and go around it (and the planner discounts an evicted pod's usage, which a
      // departure here would not), so none is kept.
      for (model::Device& d : node.devices) d.used_mib = 0;
      order_.push_back(NodeOrderOf(node));
      for (const model::Device& d : node.devices) capacity_mib_ += d.capacity_mib;
      allocated_mib_.push_back(NodeAllocatedMiB(node));
      total_allocated_mib_ += allocated_mib_.back();
    }
    freed_at_.assign(nodes_.size(), epoch_);
    // The extender refreshes once as soon as it knows the cluster (its first filter).
    RefreshPolicy();
  }

  TimelineRun Run() {
    const auto start = std::chrono::steady_clock::now();
    std::vector<Event> events;
    for (int p = 0; p < static_cast<int>(pods_.size()); ++p) {
      const PodState& s = state_[p];
      events.push_back(Event{s.arrive, 1, p});
      events.push_back(Event{s.leave, s.leave == s.arrive ? 2 : 0, p});
      span_begin_ = std::min(span_begin_, s.arrive);
      span_end_ = std::max(span_end_, s.arrive);
    }
    std::sort(events.begin(), events.end());
    run_.defrag = options_.defrag;
    run_.pods = static_cast<int>(pods_.size());
    run_.span_s = pods_.empty() ? 0 : span_end_ - span_begin_;
    run_.nodes = static_cast<int>(nodes_.size());
    for (const model::Node& node : nodes_) run_.devices += static_cast<int>(node.devices.size());
    for (const Event& e : events) {
      Advance(e.time);
      if (e.order == 1) {
        Arrive(e.pod, e.time);
      } else {
        Depart(e.pod, e.time);
      }
    }
    Finish();
    run_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::move(run_);
  }

 private:
  double UnallocatedPct() const {
    return 100.0 * static_cast<double>(capacity_mib_ - total_allocated_mib_) / static_cast<double>(capacity_mib_);
  }
  // The sample instant k of the arrivals' span.
  int64_t SampleAt(int k) const { return span_begin_ + (span_end_ - span_begin_) * k / (kSamples - 1); }

  // The cluster is as it was after the events before `now`: integrate it over the span up to
  // `now`, and take the samples that fall before `now`.
  void Advance(int64_t now) {
    const int64_t from = std::max(last_time_, span_begin_), to = std::min(now, span_end_);
    if (to > from) allocated_integral_ += static_cast<double>(total_allocated_mib_) * static_cast<double>(to - from);
    while (next_sample_ < kSamples && SampleAt(next_sample_) < now) {
      run_.unallocated_sampled_pct.push_back(UnallocatedPct());
      ++next_sample_;
    }
    last_time_ = now;
  }

  void Finish() {
    // Every pod has left by now; samples not yet taken are past the last event.
    while (!pods_.empty() && next_sample_ < kSamples) {
      run_.unallocated_sampled_pct.push_back(UnallocatedPct());
      ++next_sample_;
    }
    const double span = static_cast<double>(run_.span_s);
    if (span > 0) {
      const double capacity = static_cast<double>(capacity_mib_) * span;  // MiB × s
      run_.unallocated_mean_pct = 100.0 * (capacity - allocated_integral_) / capacity;
      run_.moves_per_hour = static_cast<double>(run_.moves) * kHourS / span;
    } else if (!run_.unallocated_sampled_pct.empty()) {
      run_.unallocated_mean_pct = run_.unallocated_sampled_pct.front();
    }
    std::sort(waits_s_.begin(), waits_s_.end());
    run_.ran_after_wait = static_cast<int>(waits_s_.size());
    if (!waits_s_.empty()) {
      double sum = 0;
      for (int64_t w : waits_s_) sum += static_cast<double>(w);
      run_.wait_mean_s = sum / static_cast<double>(waits_s_.size());
      // Nearest rank.
      const size_t rank = static_cast<size_t>(std::ceil(0.95 * static_cast<double>(waits_s_.size())));
      run_.wait_p95_s = static_cast<double>(waits_s_[std::max<size_t>(rank, 1) - 1]);
    }
  }

  void Arrive(int p, int64_t now) {
    // The extender counts a pod when kube-scheduler first asks about it, before ranking it.
    if (decision_.Observe(pods_[p])) RefreshPolicy();
    if (Attempt(p, now)) return;
    state_[p].where = Where::kWaiting;
    queue_.push_back(p);
    ++run_.waited;
  }

  void Depart(int p, int64_t now) {
    PodState& s = state_[p];
    if (s.where == Where::kWaiting) {
      // It leaves the queue (dropped at the next retry pass): it never ran.
      s.where = Where::kGone;
      ++run_.never_ran;
      return;
    }
    Unplace(p);
    s.where = Where::kGone;
    RetryWaiting(now);
  }

  void RetryWaiting(int64_t now) {
    std::deque<int> still_waiting;
    for (int p : queue_) {
      if (state_[p].where != Where::kWaiting) continue;
      if (Attempt(p, now)) {
        waits_s_.push_back(now - state_[p].arrive);
      } else {
        still_waiting.push_back(p);
      }
    }
    queue_ = std::move(still_waiting);
  }

  // Places `p` where the core ranks first, or through a plan; true when it runs.
  bool Attempt(int p, int64_t now) {
    PodState& s = state_[p];
    const uint64_t since = s.tried_epoch;
    s.tried_epoch = epoch_;
    // Fit only grows with free room: a node not freed since the last attempt still cannot hold it.
    const int best = CoreRankFirst(decision_, model::PolicyKind::kFgd, *policy_, nodes_, summaries_, order_, pods_[p],
                                   [&](int n) { return freed_at_[n] > since; });
    if (best >= 0) {
      placement::NodeEvaluation e = policy_->Evaluate(nodes_[best], summaries_[best], pods_[p]);
      Place(p, best, e.placement);
      return true;
    }
    return options_.defrag && TryDefragmentation(p, now);
  }

  bool TryDefragmentation(int p, int64_t now) {
    PodState& s = state_[p];
    if (s.planned_epoch == epoch_) return false;  // no room freed since it last asked
    while (!recent_moves_.empty() && recent_moves_.front() <= now - kHourS) recent_moves_.pop_front();
    const int64_t budget = options_.max_moves_per_hour - static_cast<int64_t>(recent_moves_.size());
    if (budget < 1) {
      ++run_.planner_outcomes[std::string(kRateLimitedLabel)];
      return false;
    }
    s.planned_epoch = epoch_;
    // The planner's answer is a function of the cluster, of the movable pods (which `now` changes
    // through the cool-down) and of the waiting pod's request shape: at one cluster version and
    // instant, a shape that got no plan gets none again.
    if (no_plan_version_ != version_ || no_plan_time_ != now) {
      no_plan_.clear();
      no_plan_version_ = version_;
      no_plan_time_ = now;
    }
    const std::string shape = RequestShapeKey(pods_[p]);
    if (auto known = no_plan_.find(shape); known != no_plan_.end()) {
      ++run_.planner_outcomes[std::string(placement::DefragOutcomeLabel(known->second))];
      return false;
    }
    std::vector<placement::MovablePod> movable;
    std::vector<int> movable_pod;  // movable[i] is pod movable_pod[i]
    for (int q = 0; q < static_cast<int>(pods_.size()); ++q) {
      const PodState& o = state_[q];
      if (!movable_class_[q] || o.where != Where::kRunning) continue;
      if (o.moved_at != kNeverMoved && now - o.moved_at < options_.move_cooldown_s) continue;
      movable.push_back(placement::MovablePod{&pods_[q], o.node});
      movable_pod.push_back(q);
    }
    placement::DefragResult r =
        placement::PlanDefragmentation(*policy_, nodes_, summaries_, pods_[p], movable, options_.planner);
    if (r.outcome == placement::DefragOutcome::kPlanned && static_cast<int64_t>(r.plan.moves.size()) > budget) {
      ++run_.planner_outcomes[std::string(kRateLimitedLabel)];
      return false;
    }
    ++run_.planner_outcomes[std::string(placement::DefragOutcomeLabel(r.outcome))];
    if (r.outcome != placement::DefragOutcome::kPlanned) {
      no_plan_.emplace(shape, r.outcome);
      return false;
    }
    ApplyPlan(p, r.plan, movable_pod, now);
    return true;
  }

  // In the planner's order: the moved pods leave their node, the waiting pod takes its place,
  // each moved pod lands where the plan re-placed it.
  void ApplyPlan(int p, const placement::DefragPlan& plan, const std::vector<int>& movable_pod, int64_t now) {
    for (const placement::DefragMove& m : plan.moves) Unplace(movable_pod[m.pod]);
    Place(p, plan.node, plan.placement);
    for (const placement::DefragMove& m : plan.moves) {
      const int q = movable_pod[m.pod];
      Place(q, m.to_node, m.placement);
      state_[q].moved_at = now;
      recent_moves_.push_back(now);
      ++run_.moves;
    }
  }

  void Place(int p, int n, const model::Placement& placement) {
    // Chosen by the core on the node as it is, so it fits (a failure is a bug, not bad input).
    GPUPACK_CHECK(placement::ApplyPlacement(nodes_[n], pods_[p], placement, policy_->options()).ok());
    state_[p].where = Where::kRunning;
    state_[p].node = n;
    ++version_;
    NodeChanged(n);
  }

  void Unplace(int p) {
    const int n = state_[p].node;
    model::Node& node = nodes_[n];
    placement::RemovePod(node, pods_[p].uid);
    node.requested_cpu_milli = std::max<int64_t>(0, node.requested_cpu_milli - pods_[p].cpu_milli);
    node.requested_memory_bytes = std::max<int64_t>(0, node.requested_memory_bytes - pods_[p].memory_bytes);
    state_[p].node = -1;
    freed_at_[n] = ++epoch_;
    ++version_;
    NodeChanged(n);
  }

  void NodeChanged(int n) {
    summaries_[n] = policy_->Summarize(nodes_[n]);
    const MiB allocated = NodeAllocatedMiB(nodes_[n]);
    total_allocated_mib_ += allocated - allocated_mib_[n];
    allocated_mib_[n] = allocated;
  }

  void RefreshPolicy() {
    ++version_;  // a new policy may plan otherwise
    policy_.emplace(decision_.Refresh([&](const std::function<void(const model::Node&)>& visit) {
      for (const model::Node& node : nodes_) visit(node);
    }));
    summaries_.resize(nodes_.size());
    for (size_t n = 0; n < nodes_.size(); ++n) summaries_[n] = policy_->Summarize(nodes_[n]);
  }

  const TimelineOptions& options_;
  const std::vector<model::PodRequest>& pods_;
  std::vector<model::Node> nodes_;
  placement::Decision decision_;
  std::optional<placement::Policy> policy_;
  std::vector<placement::NodeSummary> summaries_;
  std::vector<NodeOrder> order_;  // NodeOrderOf each node
  std::vector<PodState> state_;
  std::vector<bool> movable_class_;
  std::deque<int> queue_;             // waiting pods, oldest first (may hold pods that have left since)
  std::deque<int64_t> recent_moves_;  // the times of the moves of the last hour
  // Room freed: epoch_ counts the events that free room (a pod leaving a node), freed_at_[n] the
  // last of node n.
  uint64_t epoch_ = 1;
  std::vector<uint64_t> freed_at_;
  // Changes of what the planner reads (every placement, removal and policy refresh), and its
  // no-plan answers by request shape at one version and instant.
  uint64_t version_ = 0;
  uint64_t no_plan_version_ = 0;
  int64_t no_plan_time_ = std::numeric_limits<int64_t>::min();
  std::map<std::string, placement::DefragOutcome> no_plan_;
  MiB capacity_mib_ = 0;
  MiB total_allocated_mib_ = 0;
  std::vector<MiB> allocated_mib_;
  int64_t span_begin_ = std::numeric_limits<int64_t>::max();
  int64_t span_end_ = std::numeric_limits<int64_t>::min();
  int64_t last_time_ = std::numeric_limits<int64_t>::min();
  double allocated_integral_ = 0;  // MiB × s over the span
  int next_sample_ = 0;
  std::vector<int64_t> waits_s_;
  TimelineRun run_;
};

// The first ⌈share × nodes⌉ nodes in tie-break order, kept in their own order.
std::vector<model::Node> ShareOfNodes(const std::vector<model::Node>& nodes, double share) {
  if (share >= 1) return nodes;
  std::vector<int> order(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) order[n] = static_cast<int>(n);
  std::vector<uint64_t> rank;
  for (const model::Node& node : nodes) rank.push_back(placement::NodeTieBreakRank(node.name, 0));
  std::sort(order.begin(), order.end(), [&](int a, int b) { return rank[a] != rank[b] ? rank[a] < rank[b] : a < b; });
  order.resize(static_cast<size_t>(std::ceil(share * static_cast<double>(nodes.size()))));
  std::sort(order.begin(), order.end());
  std::vector<model::Node> kept;
  for (int n : order) kept.push_back(nodes[n]);
  return kept;
}

std::string Fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

StatusOr<Movability> ParseMovability(std::string_view text) {
  if (text == "be") return Movability::kBestEffort;
  if (text == "all") return Movability::kAll;
  if (text == "none") return Movability::kNone;
  return Status::InvalidArgument("--movable: \"" + std::string(text) + "\" is not be, all or none");
}

std::string_view MovabilityLabel(Movability movable) {
  switch (movable) {
    case Movability::kBestEffort:
      return "be";
    case Movability::kAll:
      return "all";
    case Movability::kNone:
      return "none";
  }
  return "be";
}

StatusOr<TimelineRun> RunTimeline(const std::vector<model::Node>& nodes, const std::vector<model::PodRequest>& pods,
                                  const std::vector<PodLifetime>& lives, const TimelineOptions& options) {
  if (pods.size() != lives.size()) {
    return Status::InvalidArgument("timeline: " + std::to_string(pods.size()) + " pods but " +
                                   std::to_string(lives.size()) + " lifetimes");
  }
  if (!(options.arrival_speedup > 0)) return Status::InvalidArgument("timeline: the arrival speedup must be positive");
  if (!(options.cluster_share > 0) || options.cluster_share > 1) {
    return Status::InvalidArgument("timeline: the cluster share must be in (0, 1]");
  }
  const std::vector<model::Node> replayed = ShareOfNodes(nodes, options.cluster_share);
  MiB capacity = 0;
  for (const model::Node& node : replayed) {
    for (const model::Device& d : node.devices) capacity += d.capacity_mib;
  }
  if (capacity <= 0) return Status::InvalidArgument("timeline: the cluster has no device memory");
  std::unordered_set<std::string> uids;
  for (const model::PodRequest& pod : pods) {
    if (!uids.insert(pod.uid).second) return Status::InvalidArgument("timeline: two pods have UID \"" + pod.uid + "\"");
  }
  return Timeline(replayed, pods, lives, options).Run();
}

std::string FormatTimeline(std::span<const TimelineRun> runs, const TimelineOptions& options) {
  std::string out;
  if (!runs.empty()) {
    out += std::to_string(runs[0].pods) + " pods over " + Fixed(static_cast<double>(runs[0].span_s) / 86400.0, 2) +
           " days of arrivals (arrival speedup " + Fixed(options.arrival_speedup, 0) + ") on " +
           std::to_string(runs[0].nodes) + " nodes, " + std::to_string(runs[0].devices) +
           " devices; movable: " + std::string(MovabilityLabel(options.movable)) + ", at most " +
           std::to_string(options.max_moves_per_hour) + " moves/h, cool-down " +
           std::to_string(options.move_cooldown_s) + " s\n";
  }
  out +=
      "defrag  unalloc%  sampled p50/max  waited  ran later  wait mean s  wait p95 s  never ran  moves  moves/h  s\n";
  for (const TimelineRun& r : runs) {
    std::vector<double> sampled = r.unallocated_sampled_pct;
    std::sort(sampled.begin(), sampled.end());
    const std::string samples =
        sampled.empty() ? "-" : Fixed(sampled[sampled.size() / 2], 2) + " / " + Fixed(sampled.back(), 2);
    char row[256];
    std::snprintf(row, sizeof row, "%-6s  %8.2f  %15s  %6d  %9d  %11.0f  %10.0f  %9d  %5lld  %7.2f  %.1f\n",
                  r.defrag ? "on" : "off", r.unallocated_mean_pct, samples.c_str(), r.waited, r.ran_after_wait,
                  r.wait_mean_s, r.wait_p95_s, r.never_ran, static_cast<long long>(r.moves), r.moves_per_hour,
                  r.seconds);
    out += row;
  }
  for (const TimelineRun& r : runs) {
    if (!r.defrag) continue;
    out += "planner outcomes:";
    if (r.planner_outcomes.empty()) out += " none (no pod fitted nowhere)";
    for (const auto& [label, count] : r.planner_outcomes) out += " " + label + " " + std::to_string(count);
    out += "\n";
  }
  return out;
}

}  // namespace gpupack::sim

#include "placement/defrag.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "common/status.h"
#include "placement/ledger.h"

namespace gpupack::placement {
namespace {

// Σ of the caps `uid` holds on `node`.
MiB HeldMiB(const Node& node, std::string_view uid) {
  MiB held = 0;
  for (const Device& d : node.devices) {
    for (const DeviceShare& s : d.shares) {
      if (s.pod_uid == uid) held += s.mem_mib;
    }
  }
  return held;
}

// The node as it is once `pod` has left: its shares and its CPU and memory requests gone, and the
// live usage its processes could have held (its ceilings and per-process overheads) with them, so
// that what the ledger counts as foreign usage stays what it was.
void Evict(Node& node, const PodRequest& pod, const PlacementOptions& options) {
  for (Device& d : node.devices) {
    for (const DeviceShare& s : d.shares) {
      if (s.pod_uid == pod.uid)
        d.used_mib = std::max<MiB>(0, d.used_mib - s.CeilingMiB() - ProcessOverheadMiB(d, options));
    }
  }
  RemovePod(node, pod.uid);
  node.requested_cpu_milli = std::max<int64_t>(0, node.requested_cpu_milli - pod.cpu_milli);
  node.requested_memory_bytes = std::max<int64_t>(0, node.requested_memory_bytes - pod.memory_bytes);
}

// The pods of one node that the waiting pod may displace, largest holders first, and what the
// memory precheck reads.
struct NodeCandidates {
  int node = -1;
  std::vector<int> pods;  // indexes into movable
  std::vector<MiB> held;  // held[i]: pods[i]'s caps on the node
  // The precheck: a necessary condition for a set to make room, in arithmetic only, so that
  // the node copies and evaluations are spent on sets that may fit. Per device: its free memory
  // now, what the waiting pod needs there, and per candidate the most its leaving can add.
  std::vector<MiB> free;
  std::vector<MiB> need;
  std::vector<std::vector<MiB>> frees;  // frees[i][d]
  std::vector<uint64_t> fitting;        // masks of sets found to fit: their supersets are not minimal
};

// The waiting pod's demand in the precheck's terms: one device container asking `count` devices
// of `mem` MiB each (0 = whole devices). Pods of several device containers skip the precheck.
struct SimpleDemand {
  int count = 0;
  MiB mem = 0;
};
std::optional<SimpleDemand> SimpleDemandOf(const PodRequest& pod) {
  std::optional<SimpleDemand> out;
  for (const ContainerRequest& c : pod.containers) {
    if (c.init) continue;
    if (out) return std::nullopt;
    out = SimpleDemand{c.device_count, c.mem_per_device_mib};
  }
  return out;
}

void PrepareCheck(NodeCandidates& c, const Node& node, std::span<const MovablePod> movable,
                  const std::optional<SimpleDemand>& demand, const PlacementOptions& options) {
  if (!demand) return;
  const size_t devices = node.devices.size();
  c.free.resize(devices);
  c.need.resize(devices);
  c.frees.assign(c.pods.size(), std::vector<MiB>(devices, 0));
  for (size_t d = 0; d < devices; ++d) {
    const Device& dev = node.devices[d];
    c.free[d] = DeviceFreeMiB(dev, options);
    c.need[d] = demand->mem == 0 ? DeviceUsableMiB(dev, options) : demand->mem;
    const MiB overhead = ProcessOverheadMiB(dev, options);
    for (size_t i = 0; i < c.pods.size(); ++i) {
      for (const DeviceShare& s : dev.shares) {
        if (s.pod_uid == movable[c.pods[i]].request->uid)
          c.frees[i][d] += std::max(s.mem_mib, s.CeilingMiB()) + overhead;
      }
    }
  }
}

// Whether a set of c's candidates may make room: enough devices whose free memory plus what the
// set's leaving adds reaches the need. True for every set that does make room. The set is the
// candidates `members` (indexes into c.pods), or every candidate with `all`.
bool MayMakeRoom(const NodeCandidates& c, const std::optional<SimpleDemand>& demand, std::span<const int> members,
                 bool all = false) {
  if (!demand) return true;
  int devices = 0;
  for (size_t d = 0; d < c.free.size(); ++d) {
    MiB free = c.free[d];
    if (all) {
      for (const std::vector<MiB>& f : c.frees) free += f[d];
    } else {
      for (int i : members) free += c.frees[i][d];
    }
    if (free >= c.need[d] && ++devices >= demand->count) return true;
  }
  return false;
}

// A set of a node's candidates that the precheck lets through, and whether its eviction makes the
// waiting pod fit there is still to be evaluated. Sets of one size are evaluated cheapest first.
struct Proposal {
  int candidate = -1;  // index into the candidates by node
  int node = -1;
  uint64_t mask = 0;  // over the candidate's first 64 pods
  MiB mem = 0;
  int64_t priority = 0;
  auto Key() const { return std::make_tuple(mem, priority, node, mask); }
};

// A set whose eviction makes the waiting pod fit on its node.
struct FittingSet {
  int node = -1;
  std::vector<int> pods;  // indexes into movable, largest holders first
};

// The cluster as a plan leaves it: the nodes it changed, each with its summary, over the rest.
class Overlay {
 public:
  Overlay(const Policy& policy, std::span<const Node> nodes, std::span<const NodeSummary> summaries)
      : policy_(policy), nodes_(nodes), summaries_(summaries) {}

  const Node& node(int i) const {
    auto it = changed_.find(i);
    return it == changed_.end() ? nodes_[i] : it->second.first;
  }
  const NodeSummary& summary(int i) const {
    auto it = changed_.find(i);
    return it == changed_.end() ? summaries_[i] : it->second.second;
  }
  // The node to change; the caller calls Resummarize(i) when done.
  Node& Mutable(int i) {
    auto it = changed_.find(i);
    if (it == changed_.end()) it = changed_.emplace(i, std::make_pair(nodes_[i], NodeSummary{})).first;
    return it->second.first;
  }
  void Resummarize(int i) {
    auto& entry = changed_.at(i);
    entry.second = policy_.Summarize(entry.first);
  }

 private:
  const Policy& policy_;
  std::span<const Node> nodes_;
  std::span<const NodeSummary> summaries_;
  std::unordered_map<int, std::pair<Node, NodeSummary>> changed_;
};

// Places `pod` on the best node of the overlay (lowest cost, then lowest index) and commits it
// there. nullopt when it fits nowhere.
std::optional<std::pair<int, Placement>> PlaceBest(const Policy& policy, Overlay& overlay, int node_count,
                                                   const PodRequest& pod) {
  const PreparedPod prepared(pod);
  int best = -1;
  double best_cost = std::numeric_limits<double>::infinity();
  for (int i = 0; i < node_count; ++i) {
    const NodeScore s = policy.Score(overlay.node(i), overlay.summary(i), prepared);
    if (s.verdict.fits() && s.cost < best_cost) {
      best = i;
      best_cost = s.cost;
    }
  }
  if (best < 0) return std::nullopt;
  NodeEvaluation e = policy.Evaluate(overlay.node(best), overlay.summary(best), pod);
  GPUPACK_CHECK(e.verdict.fits());  // Score and Evaluate agree (policy.h)
  Node& target = overlay.Mutable(best);
  GPUPACK_CHECK(ApplyPlacement(target, pod, e.placement, policy.options()).ok());
  overlay.Resummarize(best);
  return std::make_pair(best, std::move(e.placement));
}

// Simulates one fitting set: evict it, place the waiting pod on the freed node, re-place each
// evicted pod. The plan when every evicted pod fits again.
std::optional<DefragPlan> Simulate(const Policy& policy, std::span<const Node> nodes,
                                   std::span<const NodeSummary> summaries, const PodRequest& pending,
                                   std::span<const MovablePod> movable, const FittingSet& set) {
  Overlay overlay(policy, nodes, summaries);
  Node& freed = overlay.Mutable(set.node);
  for (int p : set.pods) Evict(freed, *movable[p].request, policy.options());
  overlay.Resummarize(set.node);
  NodeEvaluation waiting = policy.Evaluate(overlay.node(set.node), overlay.summary(set.node), pending);
  GPUPACK_CHECK(waiting.verdict.fits());  // the set was chosen because it does
  GPUPACK_CHECK(ApplyPlacement(overlay.Mutable(set.node), pending, waiting.placement, policy.options()).ok());
  overlay.Resummarize(set.node);

  DefragPlan plan;
  plan.node = set.node;
  plan.placement = std::move(waiting.placement);
  for (int p : set.pods) {
    const PodRequest& pod = *movable[p].request;
    std::optional<std::pair<int, Placement>> placed = PlaceBest(policy, overlay, static_cast<int>(nodes.size()), pod);
    if (!placed) return std::nullopt;
    const MiB held = HeldMiB(nodes[set.node], pod.uid);
    plan.moves.push_back(DefragMove{p, set.node, placed->first, std::move(placed->second), held});
    plan.moved_mib += held;
    plan.moved_priority += pod.priority;
  }
  return plan;
}

// Calls `visit(mask, members)` for every subset of {0..n-1} of size `size`, in lexicographic
// order of the members' indexes. REQUIRES: n <= 64.
template <typename Visit>
void ForEachSubset(int n, int size, Visit visit) {
  std::vector<int> idx(size);
  for (int i = 0; i < size; ++i) idx[i] = i;
  while (true) {
    uint64_t mask = 0;
    for (int i : idx) mask |= uint64_t{1} << i;
    visit(mask, std::span<const int>(idx));
    int i = size - 1;
    while (i >= 0 && idx[i] == n - size + i) --i;
    if (i < 0) return;
    ++idx[i];
    for (int j = i + 1; j < size; ++j) idx[j] = idx[j - 1] + 1;
  }
}

std::string PodName(const PodRequest& pod) { return pod.Key(); }

// "1 node", "3 nodes".
std::string Count(int n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

}  // namespace

std::string_view DefragOutcomeLabel(DefragOutcome outcome) {
  switch (outcome) {
    case DefragOutcome::kPlanned:
      return "planned";
    case DefragOutcome::kFitsAlready:
      return "fits_already";
    case DefragOutcome::kNoMovableRoom:
      return "no_movable_room";
    case DefragOutcome::kTooManyMoves:
      return "too_many_moves";
    case DefragOutcome::kNoReplacement:
      return "no_replacement";
    case DefragOutcome::kBudgetExceeded:
      return "budget_exceeded";
  }
  return "unknown";
}

std::string DefragResult::Message(std::span<const Node> nodes, std::span<const MovablePod> movable,
                                  const PodRequest& pending) const {
  const std::string who = PodName(pending);
  switch (outcome) {
    case DefragOutcome::kPlanned: {
      std::string out;
      for (const DefragMove& m : plan.moves) {
        if (!out.empty()) out += "; ";
        out += "evict " + PodName(*movable[m.pod].request) + " (" + std::to_string(m.mem_mib) + " MiB) from " +
               nodes[m.from_node].name + ", it fits again on " + nodes[m.to_node].name;
      }
      return out + ": then " + who + " fits on " + nodes[plan.node].name + " (" + std::to_string(plan.moves.size()) +
             (plan.moves.size() == 1 ? " move, " : " moves, ") + std::to_string(plan.moved_mib) + " MiB moved)";
    }
    case DefragOutcome::kFitsAlready:
      return who + " fits on a node as the cluster is: nothing to move";
    case DefragOutcome::kNoMovableRoom:
      return "no node would hold " + who +
             " even with every movable pod of priority <= " + std::to_string(pending.priority) + " moved away";
    case DefragOutcome::kTooManyMoves:
      return Count(nodes_with_room, "node") + " would hold " + who +
             ", but only with more of its movable pods moved than a plan may move";
    case DefragOutcome::kNoReplacement:
      return Count(sets_that_fit, "set") + " of moves " + (sets_that_fit == 1 ? "makes" : "make") + " room for " + who +
             " on " + Count(nodes_with_room, "node") + ", but " + (sets_that_fit == 1 ? "it evicts" : "each evicts") +
             " a pod that then fits nowhere";
    case DefragOutcome::kBudgetExceeded:
      return Count(sets_that_fit, "set") + " of moves " + (sets_that_fit == 1 ? "makes" : "make") + " room for " + who +
             "; the " + std::to_string(sets_simulated) +
             " cheapest each evict a pod that then fits nowhere, and the planner's budget left the rest untried";
  }
  return "unknown outcome";
}

namespace {

bool FitsSomewhere(const Policy& policy, std::span<const Node> nodes, std::span<const NodeSummary> summaries,
                   const PodRequest& pending, std::span<const uint8_t> pending_nodes) {
  const PreparedPod prepared(pending);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!pending_nodes.empty() && pending_nodes[i] == 0) continue;
    if (policy.Score(nodes[i], summaries[i], prepared).verdict.fits()) return true;
  }
  return false;
}

// Per node, in node order, the pods the waiting pod may displace there: never itself, never one
// of higher priority; largest holders first (then by UID).
std::vector<NodeCandidates> CandidatesByNode(std::span<const Node> nodes, const PodRequest& pending,
                                             std::span<const MovablePod> movable,
                                             std::span<const uint8_t> pending_nodes) {
  std::unordered_map<int, std::vector<std::pair<MiB, int>>> by_node;
  for (size_t p = 0; p < movable.size(); ++p) {
    const MovablePod& m = movable[p];
    GPUPACK_CHECK(m.request != nullptr && m.node >= 0 && static_cast<size_t>(m.node) < nodes.size());
    if (m.request->uid == pending.uid || m.request->priority > pending.priority) continue;
    if (!pending_nodes.empty() && pending_nodes[m.node] == 0) continue;  // the waiting pod may not go there
    by_node[m.node].emplace_back(HeldMiB(nodes[m.node], m.request->uid), static_cast<int>(p));
  }
  std::vector<NodeCandidates> out;
  for (auto& [node, order] : by_node) {
    std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : movable[a.second].request->uid < movable[b.second].request->uid;
    });
    NodeCandidates& c = out.emplace_back();
    c.node = node;
    for (const auto& [held, p] : order) {
      c.pods.push_back(p);
      c.held.push_back(held);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.node < b.node; });
  return out;
}

// The bound: with every candidate gone, does the node hold the waiting pod at all?
bool RoomWithEveryCandidateGone(const Policy& policy, const Node& node, const NodeCandidates& c,
                                std::span<const MovablePod> movable, const PodRequest& pending,
                                const std::optional<SimpleDemand>& demand) {
  if (!MayMakeRoom(c, demand, {}, /*all=*/true)) return false;
  Node without = node;
  for (int p : c.pods) Evict(without, *movable[p].request, policy.options());
  return policy.Evaluate(without, pending).verdict.fits();
}

// Appends the sets of `size` of c's first `per_node` candidates that the precheck lets through
// and that hold no set already found to make room (those are not minimal).
void Propose(const NodeCandidates& c, int candidate, const std::optional<SimpleDemand>& demand, int size, int per_node,
             std::span<const MovablePod> movable, std::vector<Proposal>& out) {
  const int n = std::min<int>(per_node, static_cast<int>(c.pods.size()));
  if (size > n) return;
  ForEachSubset(n, size, [&](uint64_t mask, std::span<const int> members) {
    for (uint64_t f : c.fitting) {
      if ((mask & f) == f) return;
    }
    if (!MayMakeRoom(c, demand, members)) return;
    Proposal p{candidate, c.node, mask};
    for (int i : members) {
      p.mem += c.held[i];
      p.priority += movable[c.pods[i]].request->priority;
    }
    out.push_back(p);
  });
}

// The proposal as a set, if its eviction does make the waiting pod fit on its node.
std::optional<FittingSet> Evaluate(const Policy& policy, const Node& node, const NodeCandidates& c, const Proposal& p,
                                   std::span<const MovablePod> movable, const PodRequest& pending) {
  Node without = node;
  FittingSet set{p.node, {}};
  for (size_t i = 0; i < c.pods.size() && i < 64; ++i) {
    if (!(p.mask >> i & 1)) continue;
    Evict(without, *movable[c.pods[i]].request, policy.options());
    set.pods.push_back(c.pods[i]);
  }
  if (!policy.Evaluate(without, pending).verdict.fits()) return std::nullopt;
  return set;
}

}  // namespace

DefragResult PlanDefragmentation(const Policy& policy, std::span<const Node> nodes,
                                 std::span<const NodeSummary> summaries, const PodRequest& pending,
                                 std::span<const MovablePod> movable, const DefragOptions& options,
                                 std::span<const uint8_t> pending_nodes) {
  GPUPACK_CHECK(summaries.size() == nodes.size());
  GPUPACK_CHECK(pending_nodes.empty() || pending_nodes.size() == nodes.size());
  DefragResult result;
  if (FitsSomewhere(policy, nodes, summaries, pending, pending_nodes)) {
    result.outcome = DefragOutcome::kFitsAlready;
    return result;
  }
  const std::optional<SimpleDemand> demand = SimpleDemandOf(pending);
  std::vector<NodeCandidates> candidates = CandidatesByNode(nodes, pending, movable, pending_nodes);
  for (NodeCandidates& c : candidates) PrepareCheck(c, nodes[c.node], movable, demand, policy.options());

  // Best first: the sets of one move on every node, then of two, and so on; within a size, the
  // least memory moved first. A set is evaluated (node copied, pod evaluated) only when its turn
  // comes, and simulated at once if it makes room: the first whose moved pods all fit is the plan.
  const int per_node = std::clamp(options.max_pods_per_node, 0, 64);
  for (int size = 1; size <= options.max_moves; ++size) {
    std::vector<Proposal> proposals;
    for (size_t i = 0; i < candidates.size(); ++i) {
      Propose(candidates[i], static_cast<int>(i), demand, size, per_node, movable, proposals);
    }
    std::sort(proposals.begin(), proposals.end(),
              [](const Proposal& a, const Proposal& b) { return a.Key() < b.Key(); });
    for (const Proposal& p : proposals) {
      NodeCandidates& c = candidates[p.candidate];
      std::optional<FittingSet> set = Evaluate(policy, nodes[p.node], c, p, movable, pending);
      if (!set) continue;
      c.fitting.push_back(p.mask);
      ++result.sets_that_fit;
      if (result.sets_simulated >= options.max_sets_tried) {
        result.outcome = DefragOutcome::kBudgetExceeded;
        return result;
      }
      ++result.sets_simulated;
      if (std::optional<DefragPlan> plan = Simulate(policy, nodes, summaries, pending, movable, *set)) {
        result.outcome = DefragOutcome::kPlanned;
        result.plan = std::move(*plan);
        return result;
      }
    }
  }
  // No plan within the moves allowed: why.
  for (const NodeCandidates& c : candidates) {
    if (RoomWithEveryCandidateGone(policy, nodes[c.node], c, movable, pending, demand)) ++result.nodes_with_room;
  }
  result.outcome = result.nodes_with_room == 0 ? DefragOutcome::kNoMovableRoom
                   : result.sets_that_fit == 0 ? DefragOutcome::kTooManyMoves
                                               : DefragOutcome::kNoReplacement;
  return result;
}

}  // namespace gpupack::placement

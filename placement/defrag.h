// Defragmentation planning (docs/placement.md, "Defragmentation"): a pod that fits on no node,
// though the cluster's free device memory would hold it many times over, can often be made to fit
// by moving a few pods that may move. The planner finds the smallest such set of moves and checks,
// with the same placement code, that every moved pod fits again somewhere. Pure: the cluster as
// values in, a plan (or the reason there is none) out; evicting is the caller's.
//
// What a plan is checked against is the cluster as given: the evicted pods' replacements are new
// pods that kube-scheduler places when they arrive, so a caller that evicts must also keep the
// freed room for the waiting pod until it binds, or a replacement may take it back.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "placement/node_summary.h"
#include "placement/policy.h"
#include "placement/vocabulary.h"

namespace gpupack::placement {

// A pod the caller allows to move (the caller's rules: e.g. opted in, owned by a controller that
// recreates it, out of a cool-down). The planner adds its own: never a pod of higher priority
// than the one waiting, never the waiting pod itself.
struct MovablePod {
  const PodRequest* request = nullptr;  // its request; request->uid names its shares on the node
  int node = -1;                        // index of the node that holds it, into the planner's nodes
};

// One pod of a plan: evicted from `from_node`, and fitting again on `to_node` with `placement`
// (the placement the plan was checked with; the replacement goes wherever kube-scheduler puts it).
struct DefragMove {
  int pod = -1;  // index into the movable pods
  int from_node = -1;
  int to_node = -1;
  Placement placement;
  MiB mem_mib = 0;  // the device memory it holds on from_node (Σ of its caps)
};

struct DefragPlan {
  int node = -1;        // where the waiting pod fits once the moves are made
  Placement placement;  // and the devices it gets there
  std::vector<DefragMove> moves;
  MiB moved_mib = 0;           // Σ DefragMove::mem_mib
  int64_t moved_priority = 0;  // Σ of the moved pods' priorities
};

enum class DefragOutcome : uint8_t {
  kPlanned,         // plan is set
  kFitsAlready,     // some node holds the pod now: nothing to move
  kNoMovableRoom,   // no node would hold it even with every movable pod it may displace gone
  kTooManyMoves,    // some node would, but only by moving more than max_moves pods
  kNoReplacement,   // every set of moves that makes room evicts a pod that then fits nowhere
  kBudgetExceeded,  // sets that make room remain, but max_sets_tried were simulated without a plan
};

// Metric label / short name, e.g. "no_replacement".
std::string_view DefragOutcomeLabel(DefragOutcome outcome);

struct DefragOptions {
  int max_moves = 3;  // a plan evicts at most this many pods
  // Each simulated set scores every node once per moved pod: the bound on the planner's time.
  int max_sets_tried = 32;
  // Per node, only the movable pods holding the most device memory are combined (the rest are
  // still counted in the kNoMovableRoom bound): C(12, ≤3) = 298 evaluations per node at most.
  int max_pods_per_node = 12;
};

struct DefragResult {
  DefragOutcome outcome = DefragOutcome::kNoMovableRoom;
  DefragPlan plan;  // meaningful when outcome == kPlanned
  // Sets of ≤ max_moves pods found, in the planner's best-first order, to make the waiting pod fit
  // on their node, and of them how many were simulated for the moved pods' re-placement.
  int sets_that_fit = 0;
  int sets_simulated = 0;
  // Set when there is no plan and the budget was not what stopped the search: the nodes that
  // would hold the waiting pod with every pod it may displace gone (what tells kNoMovableRoom,
  // kTooManyMoves and kNoReplacement apart).
  int nodes_with_room = 0;
  // One line for an Event or a log: the plan, or why there is none, with the counts above.
  std::string Message(std::span<const Node> nodes, std::span<const MovablePod> movable,
                      const PodRequest& pending) const;
};

// The cheapest plan that makes `pending` fit: fewest moves first, then least device memory moved,
// then lowest Σ priority, then the lowest node index. Sets are searched best first, one size at a
// time, and evaluated only when their turn comes, so a cluster with a one-move plan pays for
// little more than a memory precheck of every one-move set. Each moved pod is re-placed, largest first,
// on the node the policy scores best (lowest cost, then lowest index) in the cluster as the plan
// leaves it: after the moves before it and the waiting pod's own placement, so it may land back
// on the node it left if room remains there.
// `pending_nodes`: where the waiting pod may go (kube-scheduler's own filters passed those nodes);
// empty: anywhere; else pending_nodes[i] != 0 for each node i it may take. Moved pods may go
// anywhere.
// REQUIRES: summaries[i] == policy.Summarize(nodes[i]); every movable.node indexes nodes and every
// movable.request is non-null; pending_nodes is empty or as long as nodes.
DefragResult PlanDefragmentation(const Policy& policy, std::span<const Node> nodes,
                                 std::span<const NodeSummary> summaries, const PodRequest& pending,
                                 std::span<const MovablePod> movable, const DefragOptions& options = {},
                                 std::span<const uint8_t> pending_nodes = {});

}  // namespace gpupack::placement

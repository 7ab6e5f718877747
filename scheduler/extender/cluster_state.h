// The extender's view of the cluster: GPU inventory per node plus the allocation ledger (which pod
// holds which share of which device), shared by every verb.
//
// Who writes what:
//   - a ClusterBackend (backend.h) feeds inventory (UpsertNode/RemoveNode) and the allocations of
//     pods that already exist (UpsertPodAllocation/RemovePod);
//   - the filter verb holds the devices of a pod it passes to exactly one node (Hold), because
//     kube-scheduler asks about the next pod before this pod's bind arrives;
//   - the bind verb reserves devices (Reserve, which takes over the pod's hold on that node), then
//     Confirms or Releases the reservation.
// Holds and reservations are visible to Evaluate the moment Hold / Reserve returns, so a filter
// that runs while a bind is on its way or in flight never offers the same memory twice.
//
// Ledger invariant: Σ caps ≤ capacity on every device, for everything the extender itself reserves.
// Allocations reported by the API server are recorded as they are (they are the truth), with a
// warning if they overbook.
//
// A façade over parts with one concern each: the ledger (pod_ledger.h), the node index
// (node_index.h), the published snapshot (node_snapshot.h), the assessment memo (assessment_memo.h,
// keyed by shape_key.h) and staleness (staleness.h). What it adds is the order they are used in, below.
//
// Thread safety: every method may be called concurrently. Locks, in the order they are taken: the
// node table (a shared mutex over the table and the index; exclusive to add or remove a node) → one
// node's writer lock → the ledger → the policy → the snapshot's pointer. The index's hints and the
// memo take their own locks and nothing under them.
//
// Reads go through a snapshot, not per-node locks. Every node's state is published as an immutable
// NodeView (its Node, its NodeSummary, its heartbeat); the read verbs (AssessMany and the other
// const methods) take the current snapshot once per call — one shared_ptr copy — and then read
// plain memory: concurrent filters and prioritizes share cache lines read-only and never write to a
// node's. Contract:
//   - a writer (UpsertNode, UpsertPodAllocation, RemovePod, Reserve, Release, SetPolicy) holds the
//     node's writer lock, builds the node's next view from a copy of the current one, and publishes
//     it by swapping one row of the snapshot;
//   - a call sees every node as of one moment between writes of that node: a reservation is visible
//     to every call that starts after Reserve returns, so a filter never offers the same memory
//     twice once the bind that took it has returned;
//   - memoised assessments are keyed by (policy generation, pod shape, view version) and view
//     versions are never reused, so a memo can never serve an answer about an older view.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "api/allocation.h"
#include "common/clock.h"
#include "common/status.h"
#include "model/model.h"
#include "placement/decision.h"
#include "placement/placement.h"
#include "scheduler/extender/assessment_memo.h"
#include "scheduler/extender/node_index.h"
#include "scheduler/extender/node_snapshot.h"
#include "scheduler/extender/pod_ledger.h"
#include "scheduler/extender/reserve_verdict.h"
#include "scheduler/extender/shape_key.h"
#include "scheduler/extender/staleness.h"

namespace gpupack::extender {

class ClusterState {
 public:
  // `heartbeat_ttl` zero: nodes never go stale. `clock` must outlive the state. `tie_break_salt`
  // (config tieBreakSeed): each node's placement::NodeTieBreakRank is computed with it once, when
  // the node enters, and handed out with every Assessment.
  ClusterState(std::shared_ptr<const placement::Policy> policy, const Clock& clock,
               std::chrono::nanoseconds heartbeat_ttl, uint64_t tie_break_salt = 0);
  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  // ---- Fed by the backend ----

  // Adds or replaces a node's inventory (devices, live usage, labels, CPU/memory). Shares in
  // `inventory.devices[].shares` are ignored: the ledger's shares for pods on this node are
  // re-attached by device UUID (a share whose device is gone is kept in the ledger and comes back
  // with the device). `heartbeat`: when the node's agent last reported; nullopt = never stale.
  void UpsertNode(model::Node inventory, std::optional<Clock::TimePoint> heartbeat = std::nullopt);
  // Forgets the node's inventory; its pods stay in the ledger until RemovePod.
  void RemoveNode(std::string_view name);
  // Records an existing pod's allocation as bound (the pod carries gpupack.io/allocation). Replaces
  // any earlier record or reservation of the same UID.
  void UpsertPodAllocation(std::string_view pod_uid, std::string_view pod_key, const api::Allocation& allocation);
  // Removes the pod's shares (pod deleted, Succeeded or Failed). Unknown UIDs are ignored.
  void RemovePod(std::string_view pod_uid);

  // ---- Used by the verbs ----

  // Evaluates `pod` on `node` as of the current snapshot, reservations included. A node whose
  // heartbeat is older than the TTL gets a kNodeStale verdict. nullopt for an unknown node.
  std::optional<placement::NodeEvaluation> Evaluate(std::string_view node, const model::PodRequest& pod) const;
  // Verdict and cost only, for filter and prioritize: memoised per pod shape (the last few) and per
  // node until the node changes, so prioritize after filter, and the next replica of the same
  // shape, cost one lookup per node. `shape` must be ShapeKey(pod).
  using Assessment = extender::Assessment;
  using Ranking = extender::Ranking;
  std::optional<Assessment> Assess(std::string_view node, const model::PodRequest& pod, const std::string& shape) const;
  // What one AssessMany call found: at(i) is names[i]'s assessment, null for an unknown node.
  // Points into the memo it keeps alive, so it stays valid whatever the state does meanwhile;
  // filter and prioritize read thousands of them without copying one.
  class Assessments {
   public:
    size_t size() const { return at_.size(); }
    const Assessment* at(size_t i) const { return at_[i]; }

   private:
    friend class ClusterState;
    std::vector<const Assessment*> at_;
    std::shared_ptr<const void> memo_;   // the memo the call found, which hits point into
    std::shared_ptr<const void> fresh_;  // the memo the call made, which fresh answers point into
    std::deque<Assessment> own_;         // stale nodes' verdicts, which no memo holds
  };
  // Assess for many nodes under one table lock. The filter's and prioritize's path, so it takes the
  // table lock, the clock and the shape's id once, not once per node, and ranks only the nodes it
  // scores afresh.
  void AssessMany(const std::vector<std::string_view>& names, const model::PodRequest& pod, const std::string& shape,
                  const Ranking& ranking, Assessments& out) const;
  // Everything about a pod that Evaluate depends on (not its name or UID): shape_key.h.
  static std::string ShapeKey(const model::PodRequest& pod);

  // Evaluates `pod` on `node` as if the pods `victim_uids` were gone (preemption dry run). nullopt
  // for an unknown node.
  std::optional<placement::NodeEvaluation> EvaluateWithout(std::string_view node, const model::PodRequest& pod,
                                                           const std::set<std::string>& victim_uids) const;

  // Under the node's exclusive lock: evaluates `pod` on `node` and, if it fits, adds its shares as
  // a reservation. A refusal names its case (reserve_verdict.h): the UID holds devices on another
  // node, or is reserved on this one by a bind still in flight; the node is stale; the pod does not
  // fit (any more). NotFound for an unknown node. The ledger is unchanged unless the verdict is
  // reserved() with a reservation that is not repeated.
  // A hold of the UID on `node` becomes the reservation, with the devices the hold took (refused
  // kStaleNode, and the hold dropped, if the node went stale since); a hold on another node is
  // released first.
  StatusOr<ReserveVerdict> Reserve(const model::PodRequest& pod, std::string_view node);
  // As Reserve, but the shares are held for a bind to come: the filter passed the pod to `node`
  // alone, so kube-scheduler will bind it there. A UID with any record is refused (the caller
  // releases its own hold first, ReleaseHold).
  StatusOr<ReserveVerdict> Hold(const model::PodRequest& pod, std::string_view node);
  // True when the node's inventory knows its allocatable CPU or memory, so pods without devices
  // should be Reserved too: their requests are CPU that GPU pods will lack (FGD counts it).
  bool TracksHostResources(std::string_view node) const;
  // The reservation's binding was persisted: it becomes a bound allocation.
  void Confirm(std::string_view pod_uid);
  // The binding failed: the reservation's shares are removed. Held and bound pods are not touched.
  void Release(std::string_view pod_uid);
  // The pod's hold is removed (it is filtered again, or ranked by prioritize, which must not see
  // its own hold). Reserved and bound pods are not touched.
  void ReleaseHold(std::string_view pod_uid);
  // Keeps the room on `node` for `pod` until the pods `leaving` (evicted to make it) are gone:
  // when RemovePod takes the last of them out of the ledger, `pod` is Held on `node` before
  // RemovePod returns, so the room is the waiting pod's before any other pod's filter can see it
  // (the evicted pods' replacements are filtered meanwhile). A claim not met by `deadline` is
  // dropped by ExpireClaims. One claim per pod UID: a new one replaces the old.
  void ClaimRoomAfter(const model::PodRequest& pod, std::string_view node, std::set<std::string> leaving,
                      Clock::TimePoint deadline);
  // Drops the claims past their deadline; returns how many.
  int ExpireClaims();
  size_t ClaimCount() const;
  // Releases reservations older than `ttl` (a bind that never finished); returns how many.
  int ExpireReservations(std::chrono::nanoseconds ttl);
  // Releases holds older than `ttl` (kube-scheduler never bound the pod: a later plugin refused
  // it, or it left the queue); returns how many.
  int ExpireHolds(std::chrono::nanoseconds ttl);

  // Calls `fn` for every node of one snapshot (metrics, dumps), with the heartbeat the node was
  // last upserted with, holding no lock.
  void ForEachNode(const std::function<void(const model::Node&, const placement::NodeSummary&,
                                            std::optional<Clock::TimePoint> heartbeat)>& fn) const;
  // The nodes of one snapshot that are not stale, in name order, each with its summary under
  // `policy` (the snapshot's): what a planner that reasons over the whole cluster reads
  // (placement::PlanDefragmentation). Copies every node: for work off the request path.
  struct FreshNodes {
    std::shared_ptr<const placement::Policy> policy;
    std::vector<model::Node> nodes;
    std::vector<placement::NodeSummary> summaries;
  };
  FreshNodes CopyFreshNodes() const;
  std::vector<std::string> NodeNames() const;
  size_t NodeCount() const;
  size_t ReservationCount() const;
  size_t HoldCount() const;
  size_t PodCount() const;  // held + reserved + bound
  // The node a pod is reserved or bound on, if any.
  std::optional<std::string> NodeOfPod(std::string_view pod_uid) const;

  std::shared_ptr<const placement::Policy> policy() const;
  // Replaces the policy (e.g. a new typical workload) and re-summarises every node.
  void SetPolicy(std::shared_ptr<const placement::Policy> policy);

 private:
  // How many nodes ahead AssessMany prefetches the summaries it is about to score.
  static constexpr size_t kPrefetchAhead = 2;
  // The writer side of a node: serialises the node's writers and remembers its current view.
  struct NodeEntry {
    NodeEntry(std::string name, uint64_t tie_break_rank, size_t row)
        : name(std::move(name)), tie_break_rank(tie_break_rank), row(row) {}
    const std::string name;
    const uint64_t tie_break_rank;
    const size_t row;                      // its row in the snapshot while it is in the table
    std::mutex mu;                         // held by the node's writers
    std::shared_ptr<const NodeView> view;  // the published view; REQUIRES mu
    bool removed = false;                  // RemoveNode ran: publish nothing more (the row may be reused); REQUIRES mu
  };

  std::shared_ptr<NodeEntry> FindNode(std::string_view name) const;
  // Every node's view in the current snapshot, in the table's order, with that snapshot.
  struct Views {
    std::shared_ptr<const NodeSnapshot> snapshot;
    std::vector<std::shared_ptr<const NodeView>> views;
  };
  Views CurrentViews() const;
  // The node's current view from the current snapshot, or null for an unknown node.
  std::shared_ptr<const NodeView> CurrentView(std::string_view name) const;
  // Scores `pod` on one view under the snapshot's policy (summarising on the spot when a SetPolicy
  // has not reached the view yet).
  Assessment ScoreView(const NodeView& view, const placement::PreparedPod& pod, const NodeSnapshot& snapshot) const;
  // REQUIRES: entry.mu held. Publishes `node` as the entry's next view, summarised under the
  // current policy (no-op for a removed entry).
  void Publish(NodeEntry& entry, std::shared_ptr<const model::Node> node, std::optional<Clock::TimePoint> heartbeat);
  // REQUIRES: entry.mu held (unless the entry is not yet reachable). A view of `node` under
  // `policy`.
  std::shared_ptr<const NodeView> MakeView(const NodeEntry& entry, std::shared_ptr<const model::Node> node,
                                           std::optional<Clock::TimePoint> heartbeat, const placement::Policy& policy,
                                           uint64_t generation);
  std::pair<std::shared_ptr<const placement::Policy>, uint64_t> PolicyAndGeneration() const;
  // Reserve and Hold: places the pod and records it in `state`.
  StatusOr<ReserveVerdict> Place(const model::PodRequest& pod, std::string_view node, PodLedger::PodState state);
  // Removes the pod's record (only if in `only`, given) and its shares; true if it removed one.
  bool RemovePodIn(std::string_view pod_uid, std::optional<PodLedger::PodState> only);
  // Removes the records in `state` for longer than `ttl`; returns how many.
  int Expire(PodLedger::PodState state, std::chrono::nanoseconds ttl);

  const Clock& clock_;
  const Staleness staleness_;
  const uint64_t tie_break_salt_;

  // Serialises SetPolicy; guards policy_ / policy_generation_, which writers read under a node's
  // lock so that a SetPolicy re-summarising every node cannot miss their write.
  mutable std::mutex set_policy_mu_;
  mutable std::mutex policy_mu_;
  std::shared_ptr<const placement::Policy> policy_;
  uint64_t policy_generation_ = 1;
  std::atomic<uint64_t> next_view_version_{1};

  SnapshotCell snapshot_;

  // Lets the table be searched by string_view without building a std::string per lookup.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  mutable std::shared_mutex nodes_mu_;  // guards the table and the index
  std::unordered_map<std::string, std::shared_ptr<NodeEntry>, NameHash, std::equal_to<>> nodes_;
  NodeIndex index_;

  struct Claim {
    model::PodRequest pod;
    std::string node;
    std::set<std::string> leaving;
    Clock::TimePoint deadline;
  };
  mutable std::mutex claims_mu_;  // taken alone: never with a node's lock or the ledger's
  std::vector<Claim> claims_;

  // Written by the const read verbs: a memo is a cache of their answers, not state they change.
  mutable AssessmentMemo memo_;
  PodLedger ledger_;
};

}  // namespace gpupack::extender

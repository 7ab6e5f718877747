// The extender's view of the cluster: GPU inventory per node plus the allocation ledger (which
// pod holds which share of which device), shared by every verb.
//
// Who writes what:
//   - a ClusterBackend (backend.h) feeds inventory (UpsertNode/RemoveNode) and the allocations of
//     pods that already exist (UpsertPodAllocation/RemovePod);
//   - the bind verb reserves devices (Reserve), then Confirms or Releases the reservation.
// Reservations are visible to Evaluate the moment Reserve returns, so a filter that runs while a
// bind is in flight never offers the same memory twice.
//
// Ledger invariant: Σ caps ≤ capacity on every device, for everything the extender itself
// reserves. Allocations reported by the API server are recorded as they are (they are the truth),
// with a warning if they overbook.
//
// Thread safety: every method may be called concurrently. Lock order: node table → one node →
// ledger → snapshot, and node table → row hints; the shape table's lock is never held with another.
//
// Reads go through a snapshot, not per-node locks. Every node's state is published as an
// immutable NodeView (its Node, its NodeSummary, its heartbeat); the read verbs (AssessMany and
// the other const methods) take the current Snapshot once per call — one shared_ptr copy — and
// then read plain memory: concurrent filters and prioritizes share cache lines read-only and
// never write to a node's. Contract:
//   - a writer (UpsertNode, UpsertPodAllocation, RemovePod, Reserve, Release, SetPolicy) holds
//     the node's writer lock, builds the node's next view from a copy of the current one, and
//     publishes it by swapping one row of the snapshot (copy-on-write: one chunk of 64 rows and
//     the chunk list are copied, so a write costs O(nodes / 64), not O(nodes));
//   - a published view is never modified; it lives while any snapshot or reader holds it;
//   - a call sees every node as of one moment between writes of that node: a reservation is
//     visible to every call that starts after Reserve returns, so a filter never offers the same
//     memory twice once the bind that took it has returned;
//   - memoised assessments are keyed by (policy generation, pod shape, view version) and view
//     versions are never reused, so a memo can never serve an answer about an older view.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
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
#include "scheduler/extender/reserve_verdict.h"

namespace gpupack::extender {

class ClusterState {
 public:
  // `heartbeat_ttl` zero: nodes never go stale. `clock` must outlive the state.
  // `tie_break_salt` (config tieBreakSeed): each node's placement::NodeTieBreakRank is computed with it
  // once, when the node enters, and handed out with every Assessment.
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
  // Records an existing pod's allocation as bound (the pod carries gpupack.io/allocation).
  // Replaces any earlier record or reservation of the same UID.
  void UpsertPodAllocation(std::string_view pod_uid, std::string_view pod_key, const api::Allocation& allocation);
  // Removes the pod's shares (pod deleted, Succeeded or Failed). Unknown UIDs are ignored.
  void RemovePod(std::string_view pod_uid);

  // ---- Used by the verbs ----

  // Evaluates `pod` on `node` as of the current snapshot, reservations included. A node whose
  // heartbeat is older than the TTL gets a kNodeStale verdict. nullopt for an unknown node.
  std::optional<placement::NodeEvaluation> Evaluate(std::string_view node, const model::PodRequest& pod) const;
  // Verdict and cost only, for filter and prioritize: memoised per pod shape (the last few) and
  // per node until the node changes, so prioritize after filter, and the next replica of the same
  // shape, cost one lookup per node. `shape` must be ShapeKey(pod).
  struct Assessment {
    placement::Verdict verdict;
    double cost = 0;
    double fill_cost = 0;         // placement::NodeScore::fill_cost: the second key after the FGD level
    double reservation_cost = 0;  // placement::NodeScore::reservation_cost: ranked with fill_cost
    double completion_loss = 0;   // placement::NodeScore::completion_loss: the first key
    uint64_t tie_break_rank = 0;  // placement::NodeTieBreakRank(node, tie_break_salt)
    // The caller's Ranking of the rest (fitting nodes only), memoised with it.
    placement::RankKey rank;
  };
  // How the caller ranks assessments (the extender's placement::RankOf). `id` names the function, as
  // (who ranks, what with): equal ids must rank a shape's assessments alike, since memoised ranks
  // are served to every call with the same id. An empty `rank` leaves ranks at their default.
  struct Ranking {
    std::array<uint64_t, 2> id{};
    std::function<placement::RankKey(const Assessment&)> rank;
  };
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
  // Assess for many nodes under one table lock. The filter's and prioritize's path, so it takes
  // the table lock, the clock and the shape's id once, not once per node, and ranks only the
  // nodes it scores afresh.
  void AssessMany(const std::vector<std::string_view>& names, const model::PodRequest& pod, const std::string& shape,
                  const Ranking& ranking, Assessments& out) const;
  // Everything about a pod that Evaluate depends on (not its name or UID).
  static std::string ShapeKey(const model::PodRequest& pod);

  // Evaluates `pod` on `node` as if the pods `victim_uids` were gone (preemption dry run).
  // nullopt for an unknown node.
  std::optional<placement::NodeEvaluation> EvaluateWithout(std::string_view node, const model::PodRequest& pod,
                                                           const std::set<std::string>& victim_uids) const;

  // Under the node's exclusive lock: evaluates `pod` on `node` and, if it fits, adds its shares
  // as a reservation. A refusal names its case (reserve_verdict.h): the UID holds devices on
  // another node, or is reserved on this one by a bind still in flight; the node is stale; the pod
  // does not fit (any more). NotFound for an unknown node. The ledger is unchanged unless the
  // verdict is reserved() with a reservation that is not repeated.
  StatusOr<ReserveVerdict> Reserve(const model::PodRequest& pod, std::string_view node);
  // True when the node's inventory knows its allocatable CPU or memory, so pods without devices
  // should be Reserved too: their requests are CPU that GPU pods will lack (FGD counts it).
  bool TracksHostResources(std::string_view node) const;
  // The reservation's binding was persisted: it becomes a bound allocation.
  void Confirm(std::string_view pod_uid);
  // The binding failed: the reservation's shares are removed. Bound pods are not touched.
  void Release(std::string_view pod_uid);
  // Releases reservations older than `ttl` (a bind that never finished); returns how many.
  int ExpireReservations(std::chrono::nanoseconds ttl);

  // Calls `fn` for every node of one snapshot (metrics, dumps), with the heartbeat the node was
  // last upserted with, holding no lock.
  void ForEachNode(const std::function<void(const model::Node&, const placement::NodeSummary&,
                                            std::optional<Clock::TimePoint> heartbeat)>& fn) const;
  std::vector<std::string> NodeNames() const;
  size_t NodeCount() const;
  size_t ReservationCount() const;
  size_t PodCount() const;  // reserved + bound
  // The node a pod is reserved or bound on, if any.
  std::optional<std::string> NodeOfPod(std::string_view pod_uid) const;

  std::shared_ptr<const placement::Policy> policy() const;
  // Replaces the policy (e.g. a new typical workload) and re-summarises every node.
  void SetPolicy(std::shared_ptr<const placement::Policy> policy);

 private:
  // One node as the read verbs see it: immutable once published.
  struct NodeView {
    std::shared_ptr<const model::Node> node;  // shared by views that differ only by summary
    placement::NodeSummary summary;
    uint64_t summary_generation = 0;  // the policy generation `summary` was computed with
    std::optional<Clock::TimePoint> heartbeat;
    uint64_t tie_break_rank = 0;
    uint64_t version = 0;  // unique across every view this state ever publishes (never 0)
  };
  // The snapshot's rows in chunks, so that publishing one row copies one chunk, not every row.
  // Rows are assigned when a node enters and freed when it leaves.
  static constexpr size_t kChunkRows = 64;
  // How many nodes ahead AssessMany prefetches the summaries it is about to score.
  static constexpr size_t kPrefetchAhead = 2;
  struct Chunk {
    std::array<std::shared_ptr<const NodeView>, kChunkRows> views;
    // views[r]->version (0: no node) and views[r]->heartbeat, kept beside the pointers so that a
    // memoised assessment is served without touching the view.
    std::array<uint64_t, kChunkRows> versions{};
    std::array<std::optional<Clock::TimePoint>, kChunkRows> heartbeats{};
  };
  // What every read verb reads: immutable once published.
  struct Snapshot {
    std::shared_ptr<const placement::Policy> policy;
    uint64_t generation = 0;  // of `policy`
    std::vector<std::shared_ptr<const Chunk>> chunks;
    const Chunk* ChunkOf(size_t row) const {
      const size_t c = row / kChunkRows;
      return c < chunks.size() ? chunks[c].get() : nullptr;
    }
  };
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
  // Assessments of one pod shape under one policy generation, by row, each valid while the row's
  // view version is versions[row]. Immutable once published; a call that scores rows afresh
  // publishes a new one.
  struct ShapeMemo {
    uint64_t shape_id = 0;
    uint64_t generation = 0;
    std::array<uint64_t, 2> ranking{};  // the Ranking::id its ranks are from
    std::vector<uint64_t> versions;     // 0: not assessed
    std::vector<Assessment> assessments;
  };
  enum class PodState { kReserved, kBound };
  struct PodRecord {
    std::string node;
    std::string pod_key;
    api::Allocation allocation;
    PodState state = PodState::kReserved;
    Clock::TimePoint since;
    // The pod's host requests, counted into its node's requested CPU / memory (only meaningful
    // where the inventory knows the node's allocatable, i.e. standalone cluster files).
    int64_t cpu_milli = 0;
    int64_t memory_bytes = 0;
  };

  std::shared_ptr<NodeEntry> FindNode(std::string_view name) const;
  // The row of the node named `name` through index_, or npos. REQUIRES: nodes_mu_ held (shared
  // suffices).
  static constexpr size_t kNoRow = static_cast<size_t>(-1);
  size_t IndexedRow(std::string_view name) const;
  // REQUIRES: nodes_mu_ held exclusively. IndexNewNode: `row`, just given a name in row_names_,
  // goes into index_ (rebuilt bigger when half full); RebuildIndex: index_ afresh from nodes_
  // (growth, removal); AddToIndex: one row into a free slot of an index with room.
  void IndexNewNode(size_t row);
  void RebuildIndex();
  void AddToIndex(size_t row);
  // A number that stands for `shape` in the memos: equal shapes get equal ids while the shape
  // table remembers them; the table is dropped when it grows past a bound, and ids are never
  // reused, so a forgotten shape only costs memo misses.
  uint64_t ShapeId(const std::string& shape) const;
  std::shared_ptr<const Snapshot> CurrentSnapshot() const;
  // The node's current view from the current snapshot, or null for an unknown node.
  std::shared_ptr<const NodeView> CurrentView(std::string_view name) const;
  // Scores `pod` on one view under the snapshot's policy (summarising on the spot when a
  // SetPolicy has not reached the view yet).
  Assessment ScoreView(const NodeView& view, const placement::PreparedPod& pod, const Snapshot& snapshot) const;
  std::shared_ptr<const ShapeMemo> FindMemo(uint64_t shape_id, uint64_t generation,
                                            const std::array<uint64_t, 2>& ranking) const;
  void StoreMemo(std::shared_ptr<const ShapeMemo> memo) const;
  // An empty memo to fill: the spare, or a new one.
  std::shared_ptr<ShapeMemo> NewMemo() const;
  // REQUIRES: ledger_mu_ held. Replaces the node's shares and host requests with the ledger's.
  void ReattachShares(model::Node& node) const;
  // REQUIRES: entry.mu held. Publishes `node` as the entry's next view, summarised under the
  // current policy (no-op for a removed entry).
  void Publish(NodeEntry& entry, std::shared_ptr<const model::Node> node, std::optional<Clock::TimePoint> heartbeat);
  // REQUIRES: entry.mu held (unless the entry is not yet reachable). A view of `node` under
  // `policy`.
  std::shared_ptr<const NodeView> MakeView(const NodeEntry& entry, std::shared_ptr<const model::Node> node,
                                           std::optional<Clock::TimePoint> heartbeat, const placement::Policy& policy,
                                           uint64_t generation);
  // Swaps rows of the snapshot (null view: the row is empty); `policy` non-null also replaces the
  // snapshot's policy. One copy of the chunk list and of each chunk touched.
  void PublishRows(const std::vector<std::pair<size_t, std::shared_ptr<const NodeView>>>& rows,
                   std::shared_ptr<const placement::Policy> policy = nullptr, uint64_t generation = 0);
  std::pair<std::shared_ptr<const placement::Policy>, uint64_t> PolicyAndGeneration() const;
  std::optional<placement::Verdict> StaleVerdict(const std::optional<Clock::TimePoint>& heartbeat,
                                                 Clock::TimePoint now) const;

  const Clock& clock_;
  const std::chrono::nanoseconds heartbeat_ttl_;
  const uint64_t tie_break_salt_;

  // Serialises SetPolicy; guards policy_ / policy_generation_, which writers read under a node's
  // lock so that a SetPolicy re-summarising every node cannot miss their write.
  mutable std::mutex set_policy_mu_;
  mutable std::mutex policy_mu_;
  std::shared_ptr<const placement::Policy> policy_;
  uint64_t policy_generation_ = 1;
  std::atomic<uint64_t> next_view_version_{1};

  mutable std::mutex snapshot_mu_;  // guards the pointer only; the snapshot itself is immutable
  std::shared_ptr<const Snapshot> snapshot_;

  // Lets the table be searched by string_view without building a std::string per lookup.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  mutable std::shared_mutex nodes_mu_;  // guards the table, its index and the rows' names
  std::unordered_map<std::string, std::shared_ptr<NodeEntry>, NameHash, std::equal_to<>> nodes_;
  // The verbs look up thousands of names per call. std::unordered_map pays a division (prime
  // bucket count) per probe and a pointer chase per node; this open-addressing index over the
  // rows (power-of-two size, linear probing, load ≤ 1/2) pays a mask and one array read, and the
  // names it compares against sit in one array.
  struct IndexSlot {
    size_t hash = 0;
    size_t row = kNoRow;  // kNoRow: empty slot
  };
  std::vector<IndexSlot> index_;
  std::vector<std::string> row_names_;  // by row; empty for a free row
  std::vector<size_t> free_rows_;
  // Even so, a lookup is a cache miss in an index far larger than the CPU's cache, and the
  // scheduler sends the same list of names, in the same order, call after call. So AssessMany
  // remembers the rows of the last few lists (one per list length): rows[i] is where names[i]
  // was, checked against row_names_ before use (a row may since hold another node), and the
  // index is searched only for names that moved. Hints, not truth: a wrong one costs a lookup.
  struct RowHint {
    std::vector<size_t> rows;
  };
  // REQUIRES: nodes_mu_ held (shared suffices). The rows of `names` (kNoRow: unknown node).
  void RowsOf(const std::vector<std::string_view>& names, std::vector<size_t>& rows) const;
  static constexpr int kRowHints = 4;
  mutable std::mutex row_hints_mu_;  // guards the pointers only; a hint is immutable
  mutable std::array<std::shared_ptr<const RowHint>, kRowHints> row_hints_;
  mutable int row_hint_next_ = 0;

  mutable std::mutex shapes_mu_;  // guards the shape table and the memos
  mutable std::unordered_map<std::string, uint64_t> shape_ids_;
  mutable uint64_t next_shape_id_ = 1;
  static constexpr int kMemoShapes = 8;
  mutable std::array<std::shared_ptr<const ShapeMemo>, kMemoShapes> memos_;
  mutable int memo_next_ = 0;
  // A memo evicted while nobody read it, kept for the next call that builds one: a memo of 5,000
  // nodes is about 0.7 MB, and allocating it afresh per call cost page faults on every call.
  mutable std::shared_ptr<ShapeMemo> spare_memo_;

  mutable std::mutex ledger_mu_;
  std::unordered_map<std::string, PodRecord> pods_;  // by UID
  std::unordered_map<std::string, std::set<std::string>> pods_by_node_;
  size_t reservations_ = 0;
};

}  // namespace gpupack::extender

#include "scheduler/extender/cluster_state.h"

#include <algorithm>
#include <utility>

#include "common/log.h"
#include "placement/decision.h"
#include "translate/allocation_ledger.h"

namespace gpupack::extender {

ClusterState::ClusterState(std::shared_ptr<const placement::Policy> policy, const Clock& clock,
                           std::chrono::nanoseconds heartbeat_ttl, uint64_t tie_break_salt)
    : clock_(clock),
      staleness_(heartbeat_ttl),
      tie_break_salt_(tie_break_salt),
      policy_(std::move(policy)),
      snapshot_(policy_, policy_generation_) {
  GPUPACK_CHECK(policy_ != nullptr);
}

std::pair<std::shared_ptr<const placement::Policy>, uint64_t> ClusterState::PolicyAndGeneration() const {
  std::lock_guard lock(policy_mu_);
  return {policy_, policy_generation_};
}

std::shared_ptr<const placement::Policy> ClusterState::policy() const { return PolicyAndGeneration().first; }

std::shared_ptr<const NodeView> ClusterState::MakeView(const NodeEntry& entry, std::shared_ptr<const model::Node> node,
                                                       std::optional<Clock::TimePoint> heartbeat,
                                                       const placement::Policy& policy, uint64_t generation) {
  auto view = std::make_shared<NodeView>();
  view->summary = policy.Summarize(*node);
  view->node = std::move(node);
  view->summary_generation = generation;
  view->heartbeat = heartbeat;
  view->tie_break_rank = entry.tie_break_rank;
  view->gpu_count = placement::GpuCount(*view->node);
  view->version = next_view_version_.fetch_add(1, std::memory_order_relaxed);
  return view;
}

void ClusterState::Publish(NodeEntry& entry, std::shared_ptr<const model::Node> node,
                           std::optional<Clock::TimePoint> heartbeat) {
  if (entry.removed) return;
  // Read under the node's lock: a SetPolicy that has already re-summarised this node waits for the
  // lock, so the view is never left on an older policy than the state's.
  auto [policy, generation] = PolicyAndGeneration();
  entry.view = MakeView(entry, std::move(node), heartbeat, *policy, generation);
  snapshot_.PublishRows({{entry.row, entry.view}});
}

void ClusterState::SetPolicy(std::shared_ptr<const placement::Policy> policy) {
  GPUPACK_CHECK(policy != nullptr);
  std::lock_guard serial(set_policy_mu_);
  uint64_t generation = 0;
  {
    std::lock_guard lock(policy_mu_);
    policy_ = policy;
    generation = ++policy_generation_;
  }
  // Readers rank with the new policy at once (scoring on a summary made on the spot where a node
  // still has an old one) ...
  snapshot_.PublishRows({}, policy, generation);
  // ... and every node is re-summarised, a chunk of rows per publication.
  std::shared_lock table(nodes_mu_);
  std::vector<NodeEntry*> by_row(index_.RowCount(), nullptr);
  for (const auto& [name, entry] : nodes_) by_row[entry->row] = entry.get();
  for (size_t first = 0; first < by_row.size(); first += NodeChunk::kRows) {
    std::vector<std::unique_lock<std::mutex>> locks;  // in row order: no other writer holds two
    std::vector<std::pair<size_t, std::shared_ptr<const NodeView>>> rows;
    for (size_t row = first; row < std::min(by_row.size(), first + NodeChunk::kRows); ++row) {
      NodeEntry* entry = by_row[row];
      if (entry == nullptr) continue;
      locks.emplace_back(entry->mu);
      if (entry->removed || entry->view == nullptr) continue;
      entry->view = MakeView(*entry, entry->view->node, entry->view->heartbeat, *policy, generation);
      rows.emplace_back(row, entry->view);
    }
    if (!rows.empty()) snapshot_.PublishRows(rows);
  }
}

std::string ClusterState::ShapeKey(const model::PodRequest& pod) { return extender::ShapeKey(pod); }

Assessment ClusterState::ScoreView(const NodeView& view, const placement::PreparedPod& pod,
                                   const NodeSnapshot& snapshot) const {
  // Score, not Evaluate: the per-node path needs no placement and so allocates nothing.
  placement::NodeScore s = view.summary_generation == snapshot.generation
                               ? snapshot.policy->Score(*view.node, view.summary, pod)
                               : snapshot.policy->Score(*view.node, snapshot.policy->Summarize(*view.node), pod);
  return Assessment{std::move(s.verdict), s.cost,         s.fill_cost, s.reservation_cost, s.completion_loss,
                    view.tie_break_rank,  view.gpu_count, {}};
}

std::optional<Assessment> ClusterState::Assess(std::string_view node, const model::PodRequest& pod,
                                               const std::string& shape) const {
  Assessments out;
  AssessMany({node}, pod, shape, Ranking{}, out);
  if (out.at(0) == nullptr) return std::nullopt;
  return *out.at(0);
}

void ClusterState::AssessMany(const std::vector<std::string_view>& names, const model::PodRequest& pod,
                              const std::string& shape, const Ranking& ranking, Assessments& out) const {
  out.at_.assign(names.size(), nullptr);
  out.own_.clear();
  const uint64_t shape_id = memo_.ShapeId(shape);
  const Clock::TimePoint now = clock_.Now();
  const bool heartbeats_expire = staleness_.expires();
  // The table lock before the snapshot: a node in the index is then in the snapshot (a node enters
  // both under the exclusive lock), and a removed one in neither.
  std::shared_lock table(nodes_mu_);
  // One snapshot for the whole call: every node is ranked by the same policy, as of one moment.
  const std::shared_ptr<const NodeSnapshot> snapshot = snapshot_.Current();
  const std::shared_ptr<const AssessmentMemo::Memo> memo = memo_.Find(shape_id, snapshot->generation, ranking.id);
  std::vector<std::pair<size_t, size_t>> fresh;  // (row, i) to score afresh
  std::vector<size_t> name_rows;
  index_.RowsOf(names, name_rows);
  for (size_t i = 0; i < names.size(); ++i) {
    const size_t row = name_rows[i];
    if (row == NodeIndex::kNoRow) continue;
    const NodeChunk* chunk = snapshot->ChunkOf(row);
    const size_t r = row % NodeChunk::kRows;
    if (chunk == nullptr || chunk->versions[r] == 0) continue;  // unreachable: see the lock order above
    if (std::optional<placement::Verdict> stale =
            heartbeats_expire ? staleness_.Verdict(chunk->heartbeats[r], now) : std::nullopt) {
      out.at_[i] = &out.own_.emplace_back(
          Assessment{std::move(*stale), 0, 0, 0, 0, chunk->views[r]->tie_break_rank, chunk->views[r]->gpu_count, {}});
      continue;
    }
    if (const Assessment* hit = memo ? memo->Find(row, chunk->versions[r]) : nullptr) {
      out.at_[i] = hit;
      continue;
    }
    fresh.emplace_back(row, i);
  }
  out.memo_ = memo;
  out.fresh_ = nullptr;
  if (fresh.empty()) return;
  // This call's answers go into the shape's next memo (for the next call of the shape, such as a
  // prioritize after its filter), which the answers then point into; it shares the chunks of
  // rows it does not rescore with the memo found.
  auto next = std::make_shared<AssessmentMemo::Memo>();
  next->shape_id = shape_id;
  next->generation = snapshot->generation;
  next->ranking = ranking.id;
  if (memo) next->chunks = memo->chunks;
  const placement::PreparedPod prepared(pod);
  for (size_t k = 0; k < fresh.size(); ++k) {
    // The next nodes' summaries load while this one is scored (placement_bench: BM_FilterScore).
    if (k + kPrefetchAhead < fresh.size()) {
      const size_t ahead = fresh[k + kPrefetchAhead].first;
      snapshot->ChunkOf(ahead)->views[ahead % NodeChunk::kRows]->summary.Prefetch();
    }
    const auto [row, i] = fresh[k];
    const NodeChunk* chunk = snapshot->ChunkOf(row);
    const size_t r = row % NodeChunk::kRows;
    Assessment& assessment = next->Write(row, chunk->versions[r]);
    assessment = ScoreView(*chunk->views[r], prepared, *snapshot);
    if (ranking.rank && assessment.verdict.fits()) assessment.rank = ranking.rank(assessment);
    // Stable: a chunk is copied only on this memo's first write into it.
    out.at_[i] = &assessment;
  }
  out.fresh_ = next;
  memo_.Store(std::move(next));
}

std::shared_ptr<ClusterState::NodeEntry> ClusterState::FindNode(std::string_view name) const {
  std::shared_lock table(nodes_mu_);
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : it->second;
}

std::shared_ptr<const NodeView> ClusterState::CurrentView(std::string_view name) const {
  std::shared_lock table(nodes_mu_);
  const size_t row = index_.RowOf(name);
  if (row == NodeIndex::kNoRow) return nullptr;
  const std::shared_ptr<const NodeSnapshot> snapshot = snapshot_.Current();
  const NodeChunk* chunk = snapshot->ChunkOf(row);
  return chunk == nullptr ? nullptr : chunk->views[row % NodeChunk::kRows];
}

void ClusterState::UpsertNode(model::Node inventory, std::optional<Clock::TimePoint> heartbeat) {
  std::unique_lock table(nodes_mu_);
  std::shared_ptr<NodeEntry>& slot = nodes_[inventory.name];
  const bool added = !slot;
  if (added) {
    const size_t row = index_.Add(inventory.name);
    slot =
        std::make_shared<NodeEntry>(inventory.name, placement::NodeTieBreakRank(inventory.name, tie_break_salt_), row);
  }
  std::shared_ptr<NodeEntry> entry = slot;
  std::lock_guard node_lock(entry->mu);
  // A new node is published before the table lock is released, so a reader that finds its name in
  // the index finds its row in the snapshot.
  if (!added) table.unlock();
  auto node = std::make_shared<model::Node>(std::move(inventory));
  ledger_.Lock().ReattachShares(*node);
  Publish(*entry, std::move(node), heartbeat);
}

void ClusterState::RemoveNode(std::string_view name) {
  std::unique_lock table(nodes_mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return;
  NodeEntry& entry = *it->second;
  {
    std::lock_guard node_lock(entry.mu);
    entry.removed = true;  // a writer that found the entry before the removal publishes nothing
    entry.view = nullptr;
    snapshot_.PublishRows({{entry.row, nullptr}});
  }
  index_.Remove(entry.row);
  nodes_.erase(it);
}

void ClusterState::UpsertPodAllocation(std::string_view pod_uid, std::string_view pod_key,
                                       const api::Allocation& allocation) {
  const std::string uid(pod_uid);
  // A record on another node must leave that node first (lock order: one node at a time).
  std::optional<std::string> previous = NodeOfPod(uid);
  if (previous && *previous != allocation.node) RemovePod(uid);

  std::shared_ptr<NodeEntry> entry = FindNode(allocation.node);
  std::unique_lock<std::mutex> node_lock;
  if (entry) node_lock = std::unique_lock(entry->mu);
  PodLedger::Locked ledger = ledger_.Lock();
  // A reservation that the cluster now records keeps its host requests.
  const PodLedger::PodRecord* existing = ledger.Find(uid);
  PodLedger::PodRecord record = existing != nullptr ? *existing : PodLedger::PodRecord{};
  record.node = allocation.node;
  record.pod_key = std::string(pod_key);
  record.allocation = allocation;
  record.state = PodLedger::PodState::kBound;
  record.since = clock_.Now();
  ledger.Put(uid, std::move(record));
  if (!entry || entry->removed) return;
  auto node = std::make_shared<model::Node>(*entry->view->node);
  ledger.ReattachShares(*node);
  if (Status invariant = placement::CheckLedgerInvariant(*node); !invariant.ok()) {
    GPUPACK_LOG(kWarning, "extender") << "pod " << pod_key << " as recorded by the cluster overbooks node "
                                      << allocation.node << ": " << invariant.message();
  }
  Publish(*entry, std::move(node), entry->view->heartbeat);
}

void ClusterState::RemovePod(std::string_view pod_uid) {
  if (!RemovePodIn(pod_uid, std::nullopt)) return;
  std::vector<Claim> met;
  {
    std::lock_guard lock(claims_mu_);
    for (auto it = claims_.begin(); it != claims_.end();) {
      if (it->leaving.erase(std::string(pod_uid)) > 0 && it->leaving.empty()) {
        met.push_back(std::move(*it));
        it = claims_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const Claim& claim : met) {
    StatusOr<ReserveVerdict> held = Hold(claim.pod, claim.node);
    GPUPACK_LOG(kInfo, "extender") << "room claimed for " << claim.pod.Key() << " on " << claim.node << ": "
                                   << (!held.ok()         ? held.status().message()
                                       : held->reserved() ? "held for its bind"
                                                          : held->message);
  }
}

bool ClusterState::RemovePodIn(std::string_view pod_uid, std::optional<PodLedger::PodState> only) {
  const std::string uid(pod_uid);
  std::optional<std::string> node = NodeOfPod(uid);
  if (!node) return false;
  std::shared_ptr<NodeEntry> entry = FindNode(*node);
  std::unique_lock<std::mutex> node_lock;
  if (entry) node_lock = std::unique_lock(entry->mu);
  PodLedger::Locked ledger = ledger_.Lock();
  // Re-checked under the locks: the pod may have moved, gone or changed state meanwhile.
  std::optional<PodLedger::PodRecord> removed = ledger.EraseOn(uid, *node, only);
  if (!removed) return false;
  if (!entry || entry->removed) return true;
  auto next = std::make_shared<model::Node>(*entry->view->node);
  placement::RemovePod(*next, uid);
  next->requested_cpu_milli -= removed->cpu_milli;
  next->requested_memory_bytes -= removed->memory_bytes;
  Publish(*entry, std::move(next), entry->view->heartbeat);
  return true;
}

bool ClusterState::TracksHostResources(std::string_view node) const {
  std::shared_ptr<const NodeView> view = CurrentView(node);
  return view != nullptr && (view->node->cpu_milli >= 0 || view->node->memory_bytes >= 0);
}

std::optional<placement::NodeEvaluation> ClusterState::Evaluate(std::string_view node,
                                                                const model::PodRequest& pod) const {
  std::shared_ptr<const NodeSnapshot> snapshot;
  std::shared_ptr<const NodeView> view;
  {
    std::shared_lock table(nodes_mu_);
    const size_t row = index_.RowOf(node);
    if (row == NodeIndex::kNoRow) return std::nullopt;
    snapshot = snapshot_.Current();
    view = snapshot->ChunkOf(row)->views[row % NodeChunk::kRows];
  }
  if (std::optional<placement::Verdict> stale = staleness_.Verdict(view->heartbeat, clock_.Now())) {
    return placement::NodeEvaluation{*stale, 0, {}};
  }
  if (view->summary_generation == snapshot->generation) {
    return snapshot->policy->Evaluate(*view->node, view->summary, pod);
  }
  return snapshot->policy->Evaluate(*view->node, pod);  // a SetPolicy is re-summarising right now
}

std::optional<placement::NodeEvaluation> ClusterState::EvaluateWithout(std::string_view node,
                                                                       const model::PodRequest& pod,
                                                                       const std::set<std::string>& victim_uids) const {
  std::shared_ptr<const NodeView> view = CurrentView(node);
  if (!view) return std::nullopt;
  if (std::optional<placement::Verdict> stale = staleness_.Verdict(view->heartbeat, clock_.Now())) {
    return placement::NodeEvaluation{*stale, 0, {}};
  }
  model::Node copy = *view->node;
  for (const std::string& uid : victim_uids) placement::RemovePod(copy, uid);
  return policy()->Evaluate(copy, pod);
}

StatusOr<ReserveVerdict> ClusterState::Reserve(const model::PodRequest& pod, std::string_view node) {
  return Place(pod, node, PodLedger::PodState::kReserved);
}

StatusOr<ReserveVerdict> ClusterState::Hold(const model::PodRequest& pod, std::string_view node) {
  return Place(pod, node, PodLedger::PodState::kHeld);
}

StatusOr<ReserveVerdict> ClusterState::Place(const model::PodRequest& pod, std::string_view node,
                                             PodLedger::PodState state) {
  // A hold on another node leaves it first (lock order: one node at a time). Only a bind moves a
  // hold; a second hold of the same UID is refused below like any other record.
  if (state == PodLedger::PodState::kReserved && ledger_.HeldOn(pod.uid).value_or(std::string(node)) != node) {
    ReleaseHold(pod.uid);
  }
  std::shared_ptr<NodeEntry> entry = FindNode(node);
  if (!entry) return Status::NotFound("node \"" + std::string(node) + "\" is not in gpupack's inventory");
  std::unique_lock node_lock(entry->mu);
  if (entry->removed) return Status::NotFound("node \"" + std::string(node) + "\" is not in gpupack's inventory");
  const std::optional<placement::Verdict> stale = staleness_.Verdict(entry->view->heartbeat, clock_.Now());
  // Held across the evaluation so two binds of one UID cannot both pass the check below.
  PodLedger::Locked ledger = ledger_.Lock();
  if (const PodLedger::PodRecord* record = ledger.Find(pod.uid)) {
    const bool held_here = record->state == PodLedger::PodState::kHeld && record->node == node;
    if (held_here && state == PodLedger::PodState::kReserved) {
      // The bind of a pod its filter held here: the held devices become the reservation, unless
      // the node went stale meanwhile.
      if (stale) {
        ledger.EraseOn(pod.uid, node, PodLedger::PodState::kHeld);
        auto next = std::make_shared<model::Node>(*entry->view->node);
        ledger.ReattachShares(*next);
        Publish(*entry, std::move(next), entry->view->heartbeat);
        return ReserveVerdict::Refuse(ReserveRefusal::kStaleNode,
                                      "node " + std::string(node) + ": " + stale->Message());
      }
      PodLedger::PodRecord reserved = *record;
      reserved.state = PodLedger::PodState::kReserved;
      reserved.since = clock_.Now();
      Reservation reservation{reserved.allocation, /*repeated=*/false};
      ledger.Put(pod.uid, std::move(reserved));
      return ReserveVerdict::Reserved(std::move(reservation));
    }
    if (record->node != node) {
      return ReserveVerdict::Refuse(
          ReserveRefusal::kBoundElsewhere,
          "pod " + pod.Key() + " (uid " + pod.uid + ") already holds devices on node " + record->node);
    }
    if (record->state != PodLedger::PodState::kBound) {
      return ReserveVerdict::Refuse(ReserveRefusal::kBindInProgress, "a bind of pod " + pod.Key() + " to node " +
                                                                         record->node + " is already in progress");
    }
    return ReserveVerdict::Reserved(Reservation{record->allocation, /*repeated=*/true});
  }
  if (stale) {
    return ReserveVerdict::Refuse(ReserveRefusal::kStaleNode, "node " + std::string(node) + ": " + stale->Message());
  }
  auto [policy, generation] = PolicyAndGeneration();
  const NodeView& view = *entry->view;
  // A SetPolicy that has not reached this node yet: summarise on the spot (it re-publishes the node
  // under the new policy once it gets the node's lock).
  placement::NodeEvaluation evaluation = view.summary_generation == generation
                                             ? policy->Evaluate(*view.node, view.summary, pod)
                                             : policy->Evaluate(*view.node, pod);
  if (!evaluation.verdict.fits()) {
    return ReserveVerdict::Refuse(ReserveRefusal::kNoFit, "pod " + pod.Key() + " no longer fits on node " +
                                                              std::string(node) + ": " + evaluation.verdict.Message());
  }
  auto next = std::make_shared<model::Node>(*view.node);
  GPUPACK_RETURN_IF_ERROR(placement::ApplyPlacement(*next, pod, evaluation.placement, policy->options()));
  PodLedger::PodRecord record;
  record.node = std::string(node);
  record.pod_key = pod.Key();
  record.allocation = translate::AllocationFromPlacement(*next, evaluation.placement);
  record.allocation.spread_key = pod.spread_key;
  record.allocation.mps_client_priority = api::MpsClientPriorityOf(pod.priority);
  record.state = state;
  record.since = clock_.Now();
  record.cpu_milli = pod.cpu_milli;  // ApplyPlacement added these to the node
  record.memory_bytes = pod.memory_bytes;
  Reservation reservation{record.allocation, /*repeated=*/false};
  ledger.Put(pod.uid, std::move(record));
  Publish(*entry, std::move(next), view.heartbeat);
  return ReserveVerdict::Reserved(std::move(reservation));
}

void ClusterState::Confirm(std::string_view pod_uid) { ledger_.Confirm(pod_uid, clock_.Now()); }

void ClusterState::Release(std::string_view pod_uid) { RemovePodIn(pod_uid, PodLedger::PodState::kReserved); }

void ClusterState::ReleaseHold(std::string_view pod_uid) { RemovePodIn(pod_uid, PodLedger::PodState::kHeld); }

int ClusterState::ExpireReservations(std::chrono::nanoseconds ttl) {
  return Expire(PodLedger::PodState::kReserved, ttl);
}

int ClusterState::ExpireHolds(std::chrono::nanoseconds ttl) { return Expire(PodLedger::PodState::kHeld, ttl); }

int ClusterState::Expire(PodLedger::PodState state, std::chrono::nanoseconds ttl) {
  int expired = 0;
  for (const std::string& uid : ledger_.InStateLongerThan(state, ttl, clock_.Now())) {
    // Counted only if still in that state under the locks (a bind may have moved it on since).
    if (RemovePodIn(uid, state)) ++expired;
  }
  return expired;
}

ClusterState::Views ClusterState::CurrentViews() const {
  Views out;
  std::shared_lock table(nodes_mu_);
  out.snapshot = snapshot_.Current();
  out.views.reserve(nodes_.size());
  for (const auto& [name, entry] : nodes_) {
    if (const NodeChunk* chunk = out.snapshot->ChunkOf(entry->row);
        chunk != nullptr && chunk->views[entry->row % NodeChunk::kRows]) {
      out.views.push_back(chunk->views[entry->row % NodeChunk::kRows]);
    }
  }
  return out;
}

void ClusterState::ForEachNode(const std::function<void(const model::Node&, const placement::NodeSummary&,
                                                        std::optional<Clock::TimePoint>)>& fn) const {
  // In the table's order (the order the callers have always seen), from one snapshot.
  for (const auto& view : CurrentViews().views) fn(*view->node, view->summary, view->heartbeat);
}

std::vector<std::string> ClusterState::NodeNames() const {
  std::shared_lock table(nodes_mu_);
  std::vector<std::string> names;
  names.reserve(nodes_.size());
  for (const auto& [name, entry] : nodes_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

size_t ClusterState::NodeCount() const {
  std::shared_lock table(nodes_mu_);
  return nodes_.size();
}

size_t ClusterState::ReservationCount() const { return ledger_.ReservationCount(); }

size_t ClusterState::HoldCount() const { return ledger_.HoldCount(); }

size_t ClusterState::PodCount() const { return ledger_.PodCount(); }

std::optional<std::string> ClusterState::NodeOfPod(std::string_view pod_uid) const { return ledger_.NodeOf(pod_uid); }

}  // namespace gpupack::extender

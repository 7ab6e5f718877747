// Long file: the extender's ledger and node views; the lock order (cluster_state.h) is easier to
// check with every locked path in one file.
#include "scheduler/extender/cluster_state.h"

#include <algorithm>
#include <utility>

#include "common/log.h"
#include "translate/allocation_ledger.h"

namespace gpupack::extender {

ClusterState::ClusterState(std::shared_ptr<const placement::Policy> policy, const Clock& clock,
                           std::chrono::nanoseconds heartbeat_ttl, uint64_t tie_break_salt)
    : clock_(clock), heartbeat_ttl_(heartbeat_ttl), tie_break_salt_(tie_break_salt), policy_(std::move(policy)) {
  GPUPACK_CHECK(policy_ != nullptr);
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->policy = policy_;
  snapshot->generation = policy_generation_;
  snapshot_ = std::move(snapshot);
}

std::pair<std::shared_ptr<const placement::Policy>, uint64_t> ClusterState::PolicyAndGeneration() const {
  std::lock_guard lock(policy_mu_);
  return {policy_, policy_generation_};
}

std::shared_ptr<const placement::Policy> ClusterState::policy() const { return PolicyAndGeneration().first; }

std::shared_ptr<const ClusterState::Snapshot> ClusterState::CurrentSnapshot() const {
  std::lock_guard lock(snapshot_mu_);
  return snapshot_;
}

void ClusterState::PublishRows(const std::vector<std::pair<size_t, std::shared_ptr<const NodeView>>>& rows,
                               std::shared_ptr<const placement::Policy> policy, uint64_t generation) {
  std::shared_ptr<const Snapshot> previous;  // released after the lock: the last reader may be us
  std::lock_guard lock(snapshot_mu_);
  auto next = std::make_shared<Snapshot>(*snapshot_);
  if (policy != nullptr) {
    next->policy = std::move(policy);
    next->generation = generation;
  }
  std::vector<bool> copied;  // chunks already copied by this publication
  for (const auto& [row, view] : rows) {
    const size_t c = row / kChunkRows;
    if (next->chunks.size() <= c) next->chunks.resize(c + 1);
    if (copied.size() <= c) copied.resize(c + 1, false);
    if (!copied[c]) {
      next->chunks[c] = next->chunks[c] ? std::make_shared<Chunk>(*next->chunks[c]) : std::make_shared<Chunk>();
      copied[c] = true;
    }
    // Copied just above by this publication and not yet shared with any reader.
    Chunk& chunk = const_cast<Chunk&>(*next->chunks[c]);
    const size_t r = row % kChunkRows;
    chunk.views[r] = view;
    chunk.versions[r] = view ? view->version : 0;
    chunk.heartbeats[r] = view ? view->heartbeat : std::nullopt;
  }
  previous = std::exchange(snapshot_, std::move(next));
}

std::shared_ptr<const ClusterState::NodeView> ClusterState::MakeView(const NodeEntry& entry,
                                                                     std::shared_ptr<const model::Node> node,
                                                                     std::optional<Clock::TimePoint> heartbeat,
                                                                     const placement::Policy& policy,
                                                                     uint64_t generation) {
  auto view = std::make_shared<NodeView>();
  view->summary = policy.Summarize(*node);
  view->node = std::move(node);
  view->summary_generation = generation;
  view->heartbeat = heartbeat;
  view->tie_break_rank = entry.tie_break_rank;
  view->version = next_view_version_.fetch_add(1, std::memory_order_relaxed);
  return view;
}

void ClusterState::Publish(NodeEntry& entry, std::shared_ptr<const model::Node> node,
                           std::optional<Clock::TimePoint> heartbeat) {
  if (entry.removed) return;
  // Read under the node's lock: a SetPolicy that has already re-summarised this node waits for
  // the lock, so the view is never left on an older policy than the state's.
  auto [policy, generation] = PolicyAndGeneration();
  entry.view = MakeView(entry, std::move(node), heartbeat, *policy, generation);
  PublishRows({{entry.row, entry.view}});
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
  PublishRows({}, policy, generation);
  // ... and every node is re-summarised, a chunk of rows per publication.
  std::shared_lock table(nodes_mu_);
  std::vector<NodeEntry*> by_row(row_names_.size(), nullptr);
  for (const auto& [name, entry] : nodes_) by_row[entry->row] = entry.get();
  for (size_t first = 0; first < by_row.size(); first += kChunkRows) {
    std::vector<std::unique_lock<std::mutex>> locks;  // in row order: no other writer holds two
    std::vector<std::pair<size_t, std::shared_ptr<const NodeView>>> rows;
    for (size_t row = first; row < std::min(by_row.size(), first + kChunkRows); ++row) {
      NodeEntry* entry = by_row[row];
      if (entry == nullptr) continue;
      locks.emplace_back(entry->mu);
      if (entry->removed || entry->view == nullptr) continue;
      entry->view = MakeView(*entry, entry->view->node, entry->view->heartbeat, *policy, generation);
      rows.emplace_back(row, entry->view);
    }
    if (!rows.empty()) PublishRows(rows);
  }
}

std::string ClusterState::ShapeKey(const model::PodRequest& pod) {
  std::string key = std::to_string(pod.cpu_milli) + "/" + std::to_string(pod.memory_bytes) + "/" +
                    std::to_string(static_cast<int>(pod.device_kind)) + "/" + pod.mig_profile + "/" +
                    (pod.hard_isolation ? "h" : "b");
  for (const std::string& model : pod.gpu_models) key += "/m:" + model;
  // The device rules, per-pod policies and spread key change verdicts and costs too.
  for (const std::string& model : pod.excluded_gpu_models) key += "/xm:" + model;
  for (const std::string& uuid : pod.gpu_uuids) key += "/u:" + uuid;
  for (const std::string& uuid : pod.excluded_gpu_uuids) key += "/xu:" + uuid;
  if (pod.node_policy) key += "/np" + std::to_string(static_cast<int>(*pod.node_policy));
  if (pod.device_policy) key += "/dp" + std::to_string(static_cast<int>(*pod.device_policy));
  if (!pod.spread_key.empty()) key += (pod.spread_across_nodes ? "/sn:" : "/sd:") + pod.spread_key;
  for (const model::ContainerRequest& c : pod.containers) {
    key += "/c" + std::to_string(c.index) + (c.init ? "i" : "a") + std::to_string(c.device_count) + "x" +
           std::to_string(c.mem_per_device_mib);
  }
  return key;
}

uint64_t ClusterState::ShapeId(const std::string& shape) const {
  // Far more than the shapes of one scheduling burst; each id costs one string.
  constexpr size_t kMaxShapes = 4096;
  std::lock_guard lock(shapes_mu_);
  auto it = shape_ids_.find(shape);
  if (it != shape_ids_.end()) return it->second;
  if (shape_ids_.size() >= kMaxShapes) shape_ids_.clear();
  return shape_ids_.emplace(shape, next_shape_id_++).first->second;
}

std::shared_ptr<const ClusterState::ShapeMemo> ClusterState::FindMemo(uint64_t shape_id, uint64_t generation,
                                                                      const std::array<uint64_t, 2>& ranking) const {
  std::lock_guard lock(shapes_mu_);
  for (const auto& memo : memos_) {
    if (memo && memo->shape_id == shape_id && memo->generation == generation && memo->ranking == ranking) return memo;
  }
  return nullptr;
}

void ClusterState::StoreMemo(std::shared_ptr<const ShapeMemo> memo) const {
  std::shared_ptr<const ShapeMemo> replaced;  // freed after the lock
  std::lock_guard lock(shapes_mu_);
  auto slot =
      std::find_if(memos_.begin(), memos_.end(), [&](const auto& m) { return m && m->shape_id == memo->shape_id; });
  if (slot == memos_.end()) {
    slot = memos_.begin() + memo_next_;
    memo_next_ = (memo_next_ + 1) % kMemoShapes;
  }
  replaced = std::exchange(*slot, std::move(memo));
  // Out of memos_ and held by no reader, it can be reused: no one can reach it any more. Memos
  // are only ever created non-const (NewMemo), so the cast is sound.
  if (replaced && replaced.use_count() == 1) spare_memo_ = std::const_pointer_cast<ShapeMemo>(std::move(replaced));
}

std::shared_ptr<ClusterState::ShapeMemo> ClusterState::NewMemo() const {
  {
    std::lock_guard lock(shapes_mu_);
    if (spare_memo_) return std::move(spare_memo_);
  }
  return std::make_shared<ShapeMemo>();
}

ClusterState::Assessment ClusterState::ScoreView(const NodeView& view, const placement::PreparedPod& pod,
                                                 const Snapshot& snapshot) const {
  // Score, not Evaluate: the per-node path needs no placement and so allocates nothing.
  placement::NodeScore s = view.summary_generation == snapshot.generation
                               ? snapshot.policy->Score(*view.node, view.summary, pod)
                               : snapshot.policy->Score(*view.node, snapshot.policy->Summarize(*view.node), pod);
  return Assessment{std::move(s.verdict), s.cost, s.fill_cost, s.reservation_cost, s.completion_loss,
                    view.tie_break_rank,  {}};
}

std::optional<ClusterState::Assessment> ClusterState::Assess(std::string_view node, const model::PodRequest& pod,
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
  const uint64_t shape_id = ShapeId(shape);
  const Clock::TimePoint now = clock_.Now();
  const bool heartbeats_expire = heartbeat_ttl_.count() > 0;  // else StaleVerdict is always nullopt
  // The table lock before the snapshot: a node in the index is then in the snapshot (a node
  // enters both under the exclusive lock), and a removed one in neither.
  std::shared_lock table(nodes_mu_);
  // One snapshot for the whole call: every node is ranked by the same policy, as of one moment.
  const std::shared_ptr<const Snapshot> snapshot = CurrentSnapshot();
  const std::shared_ptr<const ShapeMemo> memo = FindMemo(shape_id, snapshot->generation, ranking.id);
  const size_t memo_rows = memo ? memo->versions.size() : 0;
  std::vector<std::pair<size_t, size_t>> fresh;  // (row, i) to score afresh
  std::vector<size_t> name_rows;
  RowsOf(names, name_rows);
  for (size_t i = 0; i < names.size(); ++i) {
    const size_t row = name_rows[i];
    if (row == kNoRow) continue;
    const Chunk* chunk = snapshot->ChunkOf(row);
    const size_t r = row % kChunkRows;
    if (chunk == nullptr || chunk->versions[r] == 0) continue;  // unreachable: see the lock order above
    if (std::optional<placement::Verdict> stale =
            heartbeats_expire ? StaleVerdict(chunk->heartbeats[r], now) : std::nullopt) {
      out.at_[i] =
          &out.own_.emplace_back(Assessment{std::move(*stale), 0, 0, 0, 0, chunk->views[r]->tie_break_rank, {}});
      continue;
    }
    if (row < memo_rows && memo->versions[row] == chunk->versions[r]) {
      out.at_[i] = &memo->assessments[row];
      continue;
    }
    fresh.emplace_back(row, i);
  }
  out.memo_ = memo;
  out.fresh_ = nullptr;
  if (fresh.empty()) return;
  // This call's answers go into the shape's next memo (for the next call of the shape, such as a
  // prioritize after its filter), which the answers then point into.
  std::shared_ptr<ShapeMemo> next = NewMemo();
  next->shape_id = shape_id;
  next->generation = snapshot->generation;
  next->ranking = ranking.id;
  if (memo) {
    next->versions = memo->versions;
    next->assessments = memo->assessments;
  } else {
    // A reused memo's assessments stay as they were (their rows read as not assessed).
    std::fill(next->versions.begin(), next->versions.end(), 0);
  }
  const size_t rows = snapshot->chunks.size() * kChunkRows;
  if (next->versions.size() < rows) {
    next->versions.resize(rows, 0);
    next->assessments.resize(rows);
  }
  const placement::PreparedPod prepared(pod);
  for (size_t k = 0; k < fresh.size(); ++k) {
    // The next nodes' summaries load while this one is scored (placement_bench: BM_FilterScore).
    if (k + kPrefetchAhead < fresh.size()) {
      const size_t ahead = fresh[k + kPrefetchAhead].first;
      snapshot->ChunkOf(ahead)->views[ahead % kChunkRows]->summary.Prefetch();
    }
    const size_t row = fresh[k].first;
    const Chunk* chunk = snapshot->ChunkOf(row);
    const size_t r = row % kChunkRows;
    Assessment& assessment = next->assessments[row];
    assessment = ScoreView(*chunk->views[r], prepared, *snapshot);
    if (ranking.rank && assessment.verdict.fits()) assessment.rank = ranking.rank(assessment);
    next->versions[row] = chunk->versions[r];
  }
  for (const auto& [row, i] : fresh) out.at_[i] = &next->assessments[row];
  out.fresh_ = next;
  StoreMemo(std::move(next));
}

void ClusterState::RowsOf(const std::vector<std::string_view>& names, std::vector<size_t>& rows) const {
  std::shared_ptr<const RowHint> hint;
  {
    std::lock_guard lock(row_hints_mu_);
    for (const auto& h : row_hints_) {
      if (h != nullptr && h->rows.size() == names.size()) hint = h;
    }
  }
  rows.resize(names.size());
  bool moved = hint == nullptr;
  for (size_t i = 0; i < names.size(); ++i) {
    const size_t guess = hint != nullptr ? hint->rows[i] : kNoRow;
    if (guess < row_names_.size() && !names[i].empty() && row_names_[guess] == names[i]) {
      rows[i] = guess;
      continue;
    }
    rows[i] = IndexedRow(names[i]);
    moved = moved || rows[i] != guess;
  }
  if (!moved) return;
  auto next = std::make_shared<RowHint>();
  next->rows = rows;
  std::lock_guard lock(row_hints_mu_);
  for (auto& h : row_hints_) {
    if (h != nullptr && h->rows.size() == names.size()) {
      h = std::move(next);
      return;
    }
  }
  row_hints_[row_hint_next_] = std::move(next);
  row_hint_next_ = (row_hint_next_ + 1) % kRowHints;
}

size_t ClusterState::IndexedRow(std::string_view name) const {
  if (index_.empty()) return kNoRow;
  const size_t hash = NameHash{}(name);
  const size_t mask = index_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const IndexSlot& slot = index_[i];
    if (slot.row == kNoRow) return kNoRow;
    if (slot.hash == hash && row_names_[slot.row] == name) return slot.row;
  }
}

void ClusterState::AddToIndex(size_t row) {
  const size_t mask = index_.size() - 1;
  const size_t hash = NameHash{}(row_names_[row]);
  size_t i = hash & mask;
  while (index_[i].row != kNoRow) i = (i + 1) & mask;
  index_[i] = IndexSlot{hash, row};
}

void ClusterState::IndexNewNode(size_t row) {
  if (index_.size() >= 2 * nodes_.size()) {
    AddToIndex(row);
  } else {
    RebuildIndex();  // includes `row`, already in nodes_
  }
}

void ClusterState::RebuildIndex() {
  // Load ≤ 1/4 after a rebuild, so the next one comes after the node count doubles: adding
  // thousands of nodes at start-up stays linear.
  size_t size = 16;
  while (size < 4 * nodes_.size()) size *= 2;
  index_.assign(size, IndexSlot{});
  for (const auto& [name, entry] : nodes_) AddToIndex(entry->row);
}

std::shared_ptr<ClusterState::NodeEntry> ClusterState::FindNode(std::string_view name) const {
  std::shared_lock table(nodes_mu_);
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : it->second;
}

std::shared_ptr<const ClusterState::NodeView> ClusterState::CurrentView(std::string_view name) const {
  std::shared_lock table(nodes_mu_);
  const size_t row = IndexedRow(name);
  if (row == kNoRow) return nullptr;
  const std::shared_ptr<const Snapshot> snapshot = CurrentSnapshot();
  const Chunk* chunk = snapshot->ChunkOf(row);
  return chunk == nullptr ? nullptr : chunk->views[row % kChunkRows];
}

void ClusterState::ReattachShares(model::Node& node) const {
  std::unordered_map<std::string_view, model::Device*> by_uuid;
  for (model::Device& device : node.devices) {
    device.shares.clear();
    by_uuid.emplace(device.uuid, &device);
  }
  node.requested_cpu_milli = 0;
  node.requested_memory_bytes = 0;
  auto pods = pods_by_node_.find(node.name);
  if (pods == pods_by_node_.end()) return;
  for (const std::string& uid : pods->second) {
    const PodRecord& record = pods_.at(uid);
    node.requested_cpu_milli += record.cpu_milli;
    node.requested_memory_bytes += record.memory_bytes;
    for (auto& [uuid, share] : translate::AllocationShares(record.allocation, uid, record.pod_key)) {
      auto device = by_uuid.find(uuid);
      if (device != by_uuid.end()) device->second->shares.push_back(std::move(share));
    }
  }
}

std::optional<placement::Verdict> ClusterState::StaleVerdict(const std::optional<Clock::TimePoint>& heartbeat,
                                                             Clock::TimePoint now) const {
  if (heartbeat_ttl_.count() <= 0 || !heartbeat) return std::nullopt;
  const auto age = now - *heartbeat;
  if (age <= heartbeat_ttl_) return std::nullopt;
  const int64_t age_s = std::chrono::duration_cast<std::chrono::seconds>(age).count();
  const int64_t ttl_s = std::chrono::duration_cast<std::chrono::seconds>(heartbeat_ttl_).count();
  // Preemption cannot refresh a heartbeat, so the node is unresolvable for this pod.
  return placement::Verdict::Reject(
      placement::RejectReason::kNodeStale, /*unresolvable=*/true, ttl_s, age_s,
      "GPUNode heartbeat " + std::to_string(age_s) + "s old > TTL " + std::to_string(ttl_s) + "s");
}

void ClusterState::UpsertNode(model::Node inventory, std::optional<Clock::TimePoint> heartbeat) {
  std::unique_lock table(nodes_mu_);
  std::shared_ptr<NodeEntry>& slot = nodes_[inventory.name];
  const bool added = !slot;
  if (added) {
    size_t row = row_names_.size();
    if (!free_rows_.empty()) {
      row = free_rows_.back();
      free_rows_.pop_back();
    } else {
      row_names_.emplace_back();
    }
    row_names_[row] = inventory.name;
    slot =
        std::make_shared<NodeEntry>(inventory.name, placement::NodeTieBreakRank(inventory.name, tie_break_salt_), row);
    IndexNewNode(row);
  }
  std::shared_ptr<NodeEntry> entry = slot;
  std::lock_guard node_lock(entry->mu);
  // A new node is published before the table lock is released, so a reader that finds its name
  // in the index finds its row in the snapshot.
  if (!added) table.unlock();
  auto node = std::make_shared<model::Node>(std::move(inventory));
  {
    std::lock_guard ledger(ledger_mu_);
    ReattachShares(*node);
  }
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
    PublishRows({{entry.row, nullptr}});
  }
  row_names_[entry.row].clear();
  free_rows_.push_back(entry.row);
  nodes_.erase(it);
  RebuildIndex();
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
  std::lock_guard ledger(ledger_mu_);
  auto it = pods_.find(uid);
  if (it != pods_.end() && it->second.state == PodState::kReserved) --reservations_;
  PodRecord& record = pods_[uid];
  record.node = allocation.node;
  record.pod_key = std::string(pod_key);
  record.allocation = allocation;
  record.state = PodState::kBound;
  record.since = clock_.Now();
  pods_by_node_[allocation.node].insert(uid);
  if (!entry || entry->removed) return;
  auto node = std::make_shared<model::Node>(*entry->view->node);
  ReattachShares(*node);
  if (Status invariant = placement::CheckLedgerInvariant(*node); !invariant.ok()) {
    GPUPACK_LOG(kWarning, "extender") << "pod " << pod_key << " as recorded by the cluster overbooks node "
                                      << allocation.node << ": " << invariant.message();
  }
  Publish(*entry, std::move(node), entry->view->heartbeat);
}

void ClusterState::RemovePod(std::string_view pod_uid) {
  const std::string uid(pod_uid);
  std::optional<std::string> node = NodeOfPod(uid);
  if (!node) return;
  std::shared_ptr<NodeEntry> entry = FindNode(*node);
  std::unique_lock<std::mutex> node_lock;
  if (entry) node_lock = std::unique_lock(entry->mu);
  std::lock_guard ledger(ledger_mu_);
  auto it = pods_.find(uid);
  // Re-check under the locks: the pod may have moved or gone meanwhile.
  if (it == pods_.end() || it->second.node != *node) return;
  if (it->second.state == PodState::kReserved) --reservations_;
  const int64_t cpu = it->second.cpu_milli, memory = it->second.memory_bytes;
  pods_.erase(it);
  auto by_node = pods_by_node_.find(*node);
  by_node->second.erase(uid);
  if (by_node->second.empty()) pods_by_node_.erase(by_node);
  if (!entry || entry->removed) return;
  auto next = std::make_shared<model::Node>(*entry->view->node);
  placement::RemovePod(*next, uid);
  next->requested_cpu_milli -= cpu;
  next->requested_memory_bytes -= memory;
  Publish(*entry, std::move(next), entry->view->heartbeat);
}

bool ClusterState::TracksHostResources(std::string_view node) const {
  std::shared_ptr<const NodeView> view = CurrentView(node);
  return view != nullptr && (view->node->cpu_milli >= 0 || view->node->memory_bytes >= 0);
}

std::optional<placement::NodeEvaluation> ClusterState::Evaluate(std::string_view node,
                                                                const model::PodRequest& pod) const {
  std::shared_ptr<const Snapshot> snapshot;
  std::shared_ptr<const NodeView> view;
  {
    std::shared_lock table(nodes_mu_);
    const size_t row = IndexedRow(node);
    if (row == kNoRow) return std::nullopt;
    snapshot = CurrentSnapshot();
    view = snapshot->ChunkOf(row)->views[row % kChunkRows];
  }
  if (std::optional<placement::Verdict> stale = StaleVerdict(view->heartbeat, clock_.Now())) {
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
  if (std::optional<placement::Verdict> stale = StaleVerdict(view->heartbeat, clock_.Now())) {
    return placement::NodeEvaluation{*stale, 0, {}};
  }
  model::Node copy = *view->node;
  for (const std::string& uid : victim_uids) placement::RemovePod(copy, uid);
  return policy()->Evaluate(copy, pod);
}

StatusOr<ReserveVerdict> ClusterState::Reserve(const model::PodRequest& pod, std::string_view node) {
  std::shared_ptr<NodeEntry> entry = FindNode(node);
  if (!entry) return Status::NotFound("node \"" + std::string(node) + "\" is not in gpupack's inventory");
  std::unique_lock node_lock(entry->mu);
  if (entry->removed) return Status::NotFound("node \"" + std::string(node) + "\" is not in gpupack's inventory");
  // Held across the evaluation so two binds of one UID cannot both pass the check below.
  std::lock_guard ledger(ledger_mu_);
  if (auto it = pods_.find(pod.uid); it != pods_.end()) {
    const PodRecord& record = it->second;
    if (record.node != node) {
      return ReserveVerdict::Refuse(
          ReserveRefusal::kBoundElsewhere,
          "pod " + pod.Key() + " (uid " + pod.uid + ") already holds devices on node " + record.node);
    }
    if (record.state == PodState::kReserved) {
      return ReserveVerdict::Refuse(ReserveRefusal::kBindInProgress, "a bind of pod " + pod.Key() + " to node " +
                                                                         record.node + " is already in progress");
    }
    return ReserveVerdict::Reserved(Reservation{record.allocation, /*repeated=*/true});
  }
  if (std::optional<placement::Verdict> stale = StaleVerdict(entry->view->heartbeat, clock_.Now())) {
    return ReserveVerdict::Refuse(ReserveRefusal::kStaleNode, "node " + std::string(node) + ": " + stale->Message());
  }
  auto [policy, generation] = PolicyAndGeneration();
  const NodeView& view = *entry->view;
  // A SetPolicy that has not reached this node yet: summarise on the spot (it re-publishes the
  // node under the new policy once it gets the node's lock).
  placement::NodeEvaluation evaluation = view.summary_generation == generation
                                             ? policy->Evaluate(*view.node, view.summary, pod)
                                             : policy->Evaluate(*view.node, pod);
  if (!evaluation.verdict.fits()) {
    return ReserveVerdict::Refuse(ReserveRefusal::kNoFit, "pod " + pod.Key() + " no longer fits on node " +
                                                              std::string(node) + ": " + evaluation.verdict.Message());
  }
  auto next = std::make_shared<model::Node>(*view.node);
  GPUPACK_RETURN_IF_ERROR(placement::ApplyPlacement(*next, pod, evaluation.placement, policy->options()));
  PodRecord record;
  record.node = std::string(node);
  record.pod_key = pod.Key();
  record.allocation = translate::AllocationFromPlacement(*next, evaluation.placement);
  record.allocation.spread_key = pod.spread_key;
  record.state = PodState::kReserved;
  record.since = clock_.Now();
  record.cpu_milli = pod.cpu_milli;  // ApplyPlacement added these to the node
  record.memory_bytes = pod.memory_bytes;
  Reservation reservation{record.allocation, /*repeated=*/false};
  pods_.emplace(pod.uid, std::move(record));
  pods_by_node_[std::string(node)].insert(pod.uid);
  ++reservations_;
  Publish(*entry, std::move(next), view.heartbeat);
  return ReserveVerdict::Reserved(std::move(reservation));
}

void ClusterState::Confirm(std::string_view pod_uid) {
  std::lock_guard ledger(ledger_mu_);
  auto it = pods_.find(std::string(pod_uid));
  if (it == pods_.end() || it->second.state != PodState::kReserved) return;
  it->second.state = PodState::kBound;
  it->second.since = clock_.Now();
  --reservations_;
}

void ClusterState::Release(std::string_view pod_uid) {
  {
    std::lock_guard ledger(ledger_mu_);
    auto it = pods_.find(std::string(pod_uid));
    if (it == pods_.end() || it->second.state != PodState::kReserved) return;
  }
  // Still a reservation (nobody confirms a reservation whose bind failed), so drop it.
  RemovePod(pod_uid);
}

int ClusterState::ExpireReservations(std::chrono::nanoseconds ttl) {
  std::vector<std::string> expired;
  {
    std::lock_guard ledger(ledger_mu_);
    const Clock::TimePoint now = clock_.Now();
    for (const auto& [uid, record] : pods_) {
      if (record.state == PodState::kReserved && now - record.since > ttl) expired.push_back(uid);
    }
  }
  for (const std::string& uid : expired) Release(uid);
  return static_cast<int>(expired.size());
}

void ClusterState::ForEachNode(const std::function<void(const model::Node&, const placement::NodeSummary&,
                                                        std::optional<Clock::TimePoint>)>& fn) const {
  // In the table's order (the order the callers have always seen), from one snapshot.
  std::vector<std::shared_ptr<const NodeView>> views;
  {
    std::shared_lock table(nodes_mu_);
    const std::shared_ptr<const Snapshot> snapshot = CurrentSnapshot();
    views.reserve(nodes_.size());
    for (const auto& [name, entry] : nodes_) {
      if (const Chunk* chunk = snapshot->ChunkOf(entry->row);
          chunk != nullptr && chunk->views[entry->row % kChunkRows]) {
        views.push_back(chunk->views[entry->row % kChunkRows]);
      }
    }
  }
  for (const auto& view : views) fn(*view->node, view->summary, view->heartbeat);
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

size_t ClusterState::ReservationCount() const {
  std::lock_guard ledger(ledger_mu_);
  return reservations_;
}

size_t ClusterState::PodCount() const {
  std::lock_guard ledger(ledger_mu_);
  return pods_.size();
}

std::optional<std::string> ClusterState::NodeOfPod(std::string_view pod_uid) const {
  std::lock_guard ledger(ledger_mu_);
  auto it = pods_.find(std::string(pod_uid));
  if (it == pods_.end()) return std::nullopt;
  return it->second.node;
}

}  // namespace gpupack::extender

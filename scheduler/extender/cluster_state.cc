#include "scheduler/extender/cluster_state.h"

#include <algorithm>

#include "common/log.h"

namespace gpupack::extender {

ClusterState::ClusterState(std::shared_ptr<const core::Policy> policy, const Clock& clock,
                           std::chrono::nanoseconds heartbeat_ttl, uint64_t tie_break_salt)
    : clock_(clock), heartbeat_ttl_(heartbeat_ttl), tie_break_salt_(tie_break_salt), policy_(std::move(policy)) {
  GPUPACK_CHECK(policy_ != nullptr);
}

std::pair<std::shared_ptr<const core::Policy>, uint64_t> ClusterState::PolicyAndGeneration() const {
  std::lock_guard lock(policy_mu_);
  return {policy_, policy_generation_};
}

std::shared_ptr<const core::Policy> ClusterState::policy() const { return PolicyAndGeneration().first; }

void ClusterState::SetPolicy(std::shared_ptr<const core::Policy> policy) {
  GPUPACK_CHECK(policy != nullptr);
  {
    std::lock_guard lock(policy_mu_);
    policy_ = std::move(policy);
    ++policy_generation_;
  }
  std::vector<std::shared_ptr<NodeEntry>> entries;
  {
    std::shared_lock table(nodes_mu_);
    for (const auto& [name, entry] : nodes_) entries.push_back(entry);
  }
  for (const auto& entry : entries) {
    std::unique_lock lock(entry->mu);
    Resummarize(*entry);
  }
}

void ClusterState::Resummarize(NodeEntry& entry) const {
  auto [policy, generation] = PolicyAndGeneration();
  entry.summary = policy->Summarize(entry.node);
  entry.summary_generation = generation;
  ++entry.version;  // every mutation ends here, so the memo can never serve a stale answer
}

std::string ClusterState::ShapeKey(const core::PodRequest& pod) {
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
  for (const core::ContainerRequest& c : pod.containers) {
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

ClusterState::Assessment ClusterState::AssessEntry(const NodeEntry& entry, const core::PodRequest& pod,
                                                   uint64_t shape_id, const core::Policy& policy,
                                                   uint64_t generation, Clock::TimePoint now) const {
  std::shared_lock lock(entry.mu);
  if (std::optional<core::Verdict> stale = StaleVerdict(entry, now)) return Assessment{*stale, 0, 0, 0, 0, entry.tie_break_rank};
  if (entry.summary_generation != generation) {
    // A SetPolicy is re-summarising right now: score against a summary made on the spot.
    core::NodeScore s = policy.Score(entry.node, policy.Summarize(entry.node), pod);
    return Assessment{std::move(s.verdict), s.cost, s.fill_cost, s.reservation_cost, s.completion_loss, entry.tie_break_rank};
  }
  {
    std::lock_guard memo_lock(entry.memo_mu);
    for (const NodeEntry::Memo& m : entry.memo) {
      if (m.version == entry.version && m.shape_id == shape_id) return m.assessment;
    }
  }
  // Score, not Evaluate: the per-node path needs no placement and so allocates nothing.
  core::NodeScore s = policy.Score(entry.node, entry.summary, pod);
  Assessment assessment{std::move(s.verdict), s.cost, s.fill_cost, s.reservation_cost, s.completion_loss, entry.tie_break_rank};
  std::lock_guard memo_lock(entry.memo_mu);
  NodeEntry::Memo& slot = entry.memo[entry.memo_next];
  entry.memo_next = (entry.memo_next + 1) % NodeEntry::kMemoSlots;
  slot.shape_id = shape_id;
  slot.version = entry.version;
  slot.assessment = assessment;
  return assessment;
}

std::optional<ClusterState::Assessment> ClusterState::Assess(std::string_view node, const core::PodRequest& pod,
                                                             const std::string& shape) const {
  std::shared_ptr<NodeEntry> entry = FindNode(node);
  if (!entry) return std::nullopt;
  auto [policy, generation] = PolicyAndGeneration();
  return AssessEntry(*entry, pod, ShapeId(shape), *policy, generation, clock_.Now());
}

void ClusterState::AssessMany(const std::vector<std::string_view>& names, const core::PodRequest& pod,
                              const std::string& shape, std::vector<std::optional<Assessment>>& out) const {
  out.assign(names.size(), std::nullopt);
  // One policy snapshot for the whole call: every node is ranked by the same policy.
  auto [policy, generation] = PolicyAndGeneration();
  const uint64_t shape_id = ShapeId(shape);
  const Clock::TimePoint now = clock_.Now();
  std::shared_lock table(nodes_mu_);
  for (size_t i = 0; i < names.size(); ++i) {
    if (const NodeEntry* entry = IndexedNode(names[i])) {
      out[i] = AssessEntry(*entry, pod, shape_id, *policy, generation, now);
    }
  }
}

const ClusterState::NodeEntry* ClusterState::IndexedNode(std::string_view name) const {
  if (index_.empty()) return nullptr;
  const size_t hash = NameHash{}(name);
  const size_t mask = index_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const IndexSlot& slot = index_[i];
    if (slot.entry == nullptr) return nullptr;
    if (slot.hash == hash && slot.entry->name == name) return slot.entry;
  }
}

void ClusterState::AddToIndex(const NodeEntry& entry) {
  const size_t mask = index_.size() - 1;
  const size_t hash = NameHash{}(entry.name);
  size_t i = hash & mask;
  while (index_[i].entry != nullptr) i = (i + 1) & mask;
  index_[i] = IndexSlot{hash, &entry};
}

void ClusterState::IndexNewNode(const NodeEntry& entry) {
  if (index_.size() >= 2 * nodes_.size()) {
    AddToIndex(entry);
  } else {
    RebuildIndex();  // includes `entry`, already in nodes_
  }
}

void ClusterState::RebuildIndex() {
  // Load ≤ 1/4 after a rebuild, so the next one comes after the node count doubles: adding
  // thousands of nodes at start-up stays linear.
  size_t size = 16;
  while (size < 4 * nodes_.size()) size *= 2;
  index_.assign(size, IndexSlot{});
  for (const auto& [name, entry] : nodes_) AddToIndex(*entry);
}

std::shared_ptr<ClusterState::NodeEntry> ClusterState::FindNode(std::string_view name) const {
  std::shared_lock table(nodes_mu_);
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : it->second;
}

void ClusterState::ReattachShares(NodeEntry& entry) {
  std::unordered_map<std::string_view, core::Device*> by_uuid;
  for (core::Device& device : entry.node.devices) {
    device.shares.clear();
    by_uuid.emplace(device.uuid, &device);
  }
  entry.node.requested_cpu_milli = 0;
  entry.node.requested_memory_bytes = 0;
  auto pods = pods_by_node_.find(entry.node.name);
  if (pods == pods_by_node_.end()) return;
  for (const std::string& uid : pods->second) {
    const PodRecord& record = pods_.at(uid);
    entry.node.requested_cpu_milli += record.cpu_milli;
    entry.node.requested_memory_bytes += record.memory_bytes;
    for (auto& [uuid, share] : api::AllocationShares(record.allocation, uid, record.pod_key)) {
      auto device = by_uuid.find(uuid);
      if (device != by_uuid.end()) device->second->shares.push_back(std::move(share));
    }
  }
}

std::optional<core::Verdict> ClusterState::StaleVerdict(const NodeEntry& entry, Clock::TimePoint now) const {
  if (!entry.heartbeat || heartbeat_ttl_.count() <= 0) return std::nullopt;
  const auto age = now - *entry.heartbeat;
  if (age <= heartbeat_ttl_) return std::nullopt;
  const int64_t age_s = std::chrono::duration_cast<std::chrono::seconds>(age).count();
  const int64_t ttl_s = std::chrono::duration_cast<std::chrono::seconds>(heartbeat_ttl_).count();
  // Preemption cannot refresh a heartbeat, so the node is unresolvable for this pod.
  return core::Verdict::Reject(core::RejectReason::kNodeStale, /*unresolvable=*/true, ttl_s, age_s,
                               "GPUNode heartbeat " + std::to_string(age_s) + "s old > TTL " +
                                   std::to_string(ttl_s) + "s");
}

void ClusterState::UpsertNode(core::Node inventory, std::optional<Clock::TimePoint> heartbeat) {
  std::unique_lock table(nodes_mu_);
  std::shared_ptr<NodeEntry>& slot = nodes_[inventory.name];
  if (!slot) {
    slot = std::make_shared<NodeEntry>(inventory.name, core::NodeTieBreakRank(inventory.name, tie_break_salt_));
    IndexNewNode(*slot);
  }
  std::shared_ptr<NodeEntry> entry = slot;
  // Lock the entry before the table is released so nobody evaluates a half-filled new node.
  std::unique_lock node_lock(entry->mu);
  table.unlock();
  entry->node = std::move(inventory);
  entry->heartbeat = heartbeat;
  {
    std::lock_guard ledger(ledger_mu_);
    ReattachShares(*entry);
  }
  Resummarize(*entry);
}

void ClusterState::RemoveNode(std::string_view name) {
  std::unique_lock table(nodes_mu_);
  if (nodes_.erase(std::string(name)) > 0) RebuildIndex();
}

void ClusterState::UpsertPodAllocation(std::string_view pod_uid, std::string_view pod_key,
                                       const api::Allocation& allocation) {
  const std::string uid(pod_uid);
  // A record on another node must leave that node first (lock order: one node at a time).
  std::optional<std::string> previous = NodeOfPod(uid);
  if (previous && *previous != allocation.node) RemovePod(uid);

  std::shared_ptr<NodeEntry> entry = FindNode(allocation.node);
  std::unique_lock<std::shared_mutex> node_lock;
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
  if (!entry) return;
  ReattachShares(*entry);
  Resummarize(*entry);
  if (Status invariant = core::CheckLedgerInvariant(entry->node); !invariant.ok()) {
    GPUPACK_LOG(kWarning, "extender") << "pod " << pod_key << " as recorded by the cluster overbooks node "
                                      << allocation.node << ": " << invariant.message();
  }
}

void ClusterState::RemovePod(std::string_view pod_uid) {
  const std::string uid(pod_uid);
  std::optional<std::string> node = NodeOfPod(uid);
  if (!node) return;
  std::shared_ptr<NodeEntry> entry = FindNode(*node);
  std::unique_lock<std::shared_mutex> node_lock;
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
  if (!entry) return;
  core::RemovePod(entry->node, uid);
  entry->node.requested_cpu_milli -= cpu;
  entry->node.requested_memory_bytes -= memory;
  Resummarize(*entry);
}

bool ClusterState::TracksHostResources(std::string_view node) const {
  std::shared_ptr<NodeEntry> entry = FindNode(node);
  if (!entry) return false;
  std::shared_lock lock(entry->mu);
  return entry->node.cpu_milli >= 0 || entry->node.memory_bytes >= 0;
}

std::optional<core::NodeEvaluation> ClusterState::Evaluate(std::string_view node, const core::PodRequest& pod) const {
  std::shared_ptr<NodeEntry> entry = FindNode(node);
  if (!entry) return std::nullopt;
  std::shared_lock lock(entry->mu);
  if (std::optional<core::Verdict> stale = StaleVerdict(*entry, clock_.Now())) return core::NodeEvaluation{*stale, 0, {}};
  auto [policy, generation] = PolicyAndGeneration();
  if (entry->summary_generation == generation) return policy->Evaluate(entry->node, entry->summary, pod);
  return policy->Evaluate(entry->node, pod);  // a SetPolicy is re-summarising right now
}

std::optional<core::NodeEvaluation> ClusterState::EvaluateWithout(std::string_view node, const core::PodRequest& pod,
                                                                  const std::set<std::string>& victim_uids) const {
  std::shared_ptr<NodeEntry> entry = FindNode(node);
  if (!entry) return std::nullopt;
  core::Node copy;
  {
    std::shared_lock lock(entry->mu);
    if (std::optional<core::Verdict> stale = StaleVerdict(*entry, clock_.Now())) return core::NodeEvaluation{*stale, 0, {}};
    copy = entry->node;
  }
  for (const std::string& uid : victim_uids) core::RemovePod(copy, uid);
  return policy()->Evaluate(copy, pod);
}

StatusOr<ClusterState::Reservation> ClusterState::Reserve(const core::PodRequest& pod, std::string_view node) {
  std::shared_ptr<NodeEntry> entry = FindNode(node);
  if (!entry) return Status::NotFound("node \"" + std::string(node) + "\" is not in gpupack's inventory");
  std::unique_lock node_lock(entry->mu);
  // Held across the evaluation so two binds of one UID cannot both pass the check below.
  std::lock_guard ledger(ledger_mu_);
  if (auto it = pods_.find(pod.uid); it != pods_.end()) {
    const PodRecord& record = it->second;
    if (record.node != node) {
      return Status::FailedPrecondition("pod " + pod.Key() + " (uid " + pod.uid + ") already holds devices on node " +
                                        record.node);
    }
    if (record.state == PodState::kReserved) {
      return Status::FailedPrecondition("a bind of pod " + pod.Key() + " to node " + record.node +
                                        " is already in progress");
    }
    return Reservation{record.allocation, /*repeated=*/true};
  }
  if (std::optional<core::Verdict> stale = StaleVerdict(*entry, clock_.Now())) {
    return Status::FailedPrecondition("node " + std::string(node) + ": " + stale->Message());
  }
  auto [policy, generation] = PolicyAndGeneration();
  if (entry->summary_generation != generation) Resummarize(*entry);
  core::NodeEvaluation evaluation = policy->Evaluate(entry->node, entry->summary, pod);
  if (!evaluation.verdict.fits()) {
    return Status::FailedPrecondition("pod " + pod.Key() + " no longer fits on node " + std::string(node) + ": " +
                                      evaluation.verdict.Message());
  }
  GPUPACK_RETURN_IF_ERROR(core::ApplyPlacement(entry->node, pod, evaluation.placement, policy->options()));
  PodRecord record;
  record.node = std::string(node);
  record.pod_key = pod.Key();
  record.allocation = api::AllocationFromPlacement(entry->node, evaluation.placement);
  record.allocation.spread_key = pod.spread_key;
  record.state = PodState::kReserved;
  record.since = clock_.Now();
  record.cpu_milli = pod.cpu_milli;  // ApplyPlacement added these to the node
  record.memory_bytes = pod.memory_bytes;
  Reservation reservation{record.allocation, /*repeated=*/false};
  pods_.emplace(pod.uid, std::move(record));
  pods_by_node_[std::string(node)].insert(pod.uid);
  ++reservations_;
  Resummarize(*entry);
  return reservation;
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

void ClusterState::ForEachNode(const std::function<void(const core::Node&, const core::NodeSummary&,
                                                       std::optional<Clock::TimePoint>)>& fn) const {
  std::vector<std::shared_ptr<NodeEntry>> entries;
  {
    std::shared_lock table(nodes_mu_);
    entries.reserve(nodes_.size());
    for (const auto& [name, entry] : nodes_) entries.push_back(entry);
  }
  for (const auto& entry : entries) {
    std::shared_lock lock(entry->mu);
    fn(entry->node, entry->summary, entry->heartbeat);
  }
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

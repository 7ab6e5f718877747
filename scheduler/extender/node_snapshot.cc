#include "scheduler/extender/node_snapshot.h"

namespace gpupack::extender {

SnapshotCell::SnapshotCell(std::shared_ptr<const placement::Policy> policy, uint64_t generation) {
  auto snapshot = std::make_shared<NodeSnapshot>();
  snapshot->policy = std::move(policy);
  snapshot->generation = generation;
  current_ = std::move(snapshot);
}

std::shared_ptr<const NodeSnapshot> SnapshotCell::Current() const {
  std::lock_guard lock(mu_);
  return current_;
}

void SnapshotCell::PublishRows(const std::vector<std::pair<size_t, std::shared_ptr<const NodeView>>>& rows,
                               std::shared_ptr<const placement::Policy> policy, uint64_t generation) {
  std::shared_ptr<const NodeSnapshot> previous;  // released after the lock: the last reader may be us
  std::lock_guard lock(mu_);
  auto next = std::make_shared<NodeSnapshot>(*current_);
  if (policy != nullptr) {
    next->policy = std::move(policy);
    next->generation = generation;
  }
  std::vector<bool> copied;  // chunks already copied by this publication
  for (const auto& [row, view] : rows) {
    const size_t c = row / NodeChunk::kRows;
    if (next->chunks.size() <= c) next->chunks.resize(c + 1);
    if (copied.size() <= c) copied.resize(c + 1, false);
    if (!copied[c]) {
      next->chunks[c] = next->chunks[c] ? std::make_shared<NodeChunk>(*next->chunks[c]) : std::make_shared<NodeChunk>();
      copied[c] = true;
    }
    // Copied just above by this publication and not yet shared with any reader.
    NodeChunk& chunk = const_cast<NodeChunk&>(*next->chunks[c]);
    const size_t r = row % NodeChunk::kRows;
    chunk.views[r] = view;
    chunk.versions[r] = view ? view->version : 0;
    chunk.heartbeats[r] = view ? view->heartbeat : std::nullopt;
  }
  previous = std::exchange(current_, std::move(next));
}

}  // namespace gpupack::extender

// What every read verb reads: one immutable snapshot of every node's view, published
// copy-on-write.
//
// Contract:
//   - a published NodeView, Chunk or Snapshot is never modified; it lives while any snapshot or
//     reader holds it, so readers read plain memory without locks;
//   - publishing rows copies the chunk list and each chunk touched (64 rows), so a write costs
//     O(nodes / 64), not O(nodes);
//   - Current() returns the last published snapshot: a row published before it is in it.
//
// Thread safety: one mutex, over the current snapshot's pointer only (never held with another
// lock of this file; writers of one row are serialised by the caller, ClusterState's node lock).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "model/model.h"
#include "placement/placement.h"

namespace gpupack::extender {

// One node as the read verbs see it.
struct NodeView {
  std::shared_ptr<const model::Node> node;  // shared by views that differ only by summary
  placement::NodeSummary summary;
  uint64_t summary_generation = 0;  // the policy generation `summary` was computed with
  std::optional<Clock::TimePoint> heartbeat;
  uint64_t tie_break_rank = 0;
  int gpu_count = 0;     // placement::GpuCount(*node)
  uint64_t version = 0;  // unique across every view the state ever publishes (never 0)
};

// The snapshot's rows in chunks, so that publishing one row copies one chunk, not every row.
struct NodeChunk {
  static constexpr size_t kRows = 64;
  std::array<std::shared_ptr<const NodeView>, kRows> views;
  // views[r]->version (0: no node) and views[r]->heartbeat, kept beside the pointers so that a
  // memoised assessment is served without touching the view.
  std::array<uint64_t, kRows> versions{};
  std::array<std::optional<Clock::TimePoint>, kRows> heartbeats{};
};

struct NodeSnapshot {
  std::shared_ptr<const placement::Policy> policy;
  uint64_t generation = 0;  // of `policy`
  std::vector<std::shared_ptr<const NodeChunk>> chunks;

  const NodeChunk* ChunkOf(size_t row) const {
    const size_t c = row / NodeChunk::kRows;
    return c < chunks.size() ? chunks[c].get() : nullptr;
  }
  // The view in `row`, or null (an empty row, or one past the end).
  const std::shared_ptr<const NodeView>* ViewOf(size_t row) const {
    const NodeChunk* chunk = ChunkOf(row);
    return chunk == nullptr ? nullptr : &chunk->views[row % NodeChunk::kRows];
  }
  size_t RowCapacity() const { return chunks.size() * NodeChunk::kRows; }
};

class SnapshotCell {
 public:
  // An empty snapshot under `policy`.
  SnapshotCell(std::shared_ptr<const placement::Policy> policy, uint64_t generation);

  std::shared_ptr<const NodeSnapshot> Current() const;
  // Publishes the current snapshot with `rows` swapped (a null view empties its row); `policy`
  // non-null also replaces the snapshot's policy and generation.
  void PublishRows(const std::vector<std::pair<size_t, std::shared_ptr<const NodeView>>>& rows,
                   std::shared_ptr<const placement::Policy> policy = nullptr, uint64_t generation = 0);

 private:
  mutable std::mutex mu_;  // guards the pointer only; the snapshot itself is immutable
  std::shared_ptr<const NodeSnapshot> current_;
};

}  // namespace gpupack::extender

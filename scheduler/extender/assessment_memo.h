// The assessment memo: verdicts and costs of the last few pod shapes on every node, so that
// prioritize after filter, and the next replica of the same shape, cost one lookup per node.
//
// A memo is keyed by (shape id, policy generation, ranking id) and holds one assessment per
// snapshot row, each valid while the row's view version is the one stored beside it. View
// versions are never reused (ClusterState), so a memo can never serve an answer about an older
// view. Memos are immutable once stored: a call that scores rows afresh stores a new one, which
// shares every chunk of rows it did not write with the memo it came from (copy on write), so a
// call that rescored one node copies one chunk, not the whole cluster's assessments.
//
// Thread safety: one mutex, over the shape table and the memo slots, never held with another
// lock; stored memos and their chunks are read without it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "placement/decision.h"
#include "placement/verdict.h"

namespace gpupack::extender {

// One node's verdict and cost for one pod, for filter and prioritize.
struct Assessment {
  placement::Verdict verdict;
  double cost = 0;
  double fill_cost = 0;         // placement::NodeScore::fill_cost: the second key after the FGD level
  double reservation_cost = 0;  // placement::NodeScore::reservation_cost: ranked with fill_cost
  double completion_loss = 0;   // placement::NodeScore::completion_loss: the first key
  uint64_t tie_break_rank = 0;  // placement::NodeTieBreakRank(node, tie_break_salt)
  int gpu_count = 0;            // placement::GpuCount(node)
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

class AssessmentMemo {
 public:
  static constexpr size_t kRowsPerChunk = 64;
  struct Chunk {
    std::array<uint64_t, kRowsPerChunk> versions{};  // 0: not assessed
    std::array<Assessment, kRowsPerChunk> assessments;
  };
  // Assessments of one pod shape under one policy generation, by row, each valid while the
  // row's view version is the one stored beside it.
  struct Memo {
    uint64_t shape_id = 0;
    uint64_t generation = 0;
    std::array<uint64_t, 2> ranking{};  // the Ranking::id its ranks are from
    // By row / kRowsPerChunk; null: no row of the chunk assessed.
    std::vector<std::shared_ptr<Chunk>> chunks;

    // The assessment of `row` stored for view `version`, or null.
    const Assessment* Find(size_t row, uint64_t version) const;
    // The slot for `row`'s assessment at `version`, to fill before the memo is stored. The first
    // write into a chunk this memo shares with another copies it; later writes reuse the copy.
    Assessment& Write(size_t row, uint64_t version);
  };

  // A number that stands for `shape` in the memos: equal shapes get equal ids while the shape
  // table remembers them; the table is dropped when it grows past a bound, and ids are never
  // reused, so a forgotten shape only costs memo misses.
  uint64_t ShapeId(const std::string& shape);
  // The stored memo of exactly this key, or null.
  std::shared_ptr<const Memo> Find(uint64_t shape_id, uint64_t generation,
                                   const std::array<uint64_t, 2>& ranking) const;
  // Stores `memo` in its shape's slot (or the oldest slot), replacing what was there.
  void Store(std::shared_ptr<const Memo> memo);

 private:
  static constexpr int kShapes = 8;
  mutable std::mutex mu_;
  std::unordered_map<std::string, uint64_t> shape_ids_;
  uint64_t next_shape_id_ = 1;
  std::array<std::shared_ptr<const Memo>, kShapes> memos_;
  int next_ = 0;
};

}  // namespace gpupack::extender

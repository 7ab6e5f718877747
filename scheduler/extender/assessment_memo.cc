#include "scheduler/extender/assessment_memo.h"

#include <algorithm>
#include <utility>

namespace gpupack::extender {

uint64_t AssessmentMemo::ShapeId(const std::string& shape) {
  // Far more than the shapes of one scheduling burst; each id costs one string.
  constexpr size_t kMaxShapes = 4096;
  std::lock_guard lock(mu_);
  auto it = shape_ids_.find(shape);
  if (it != shape_ids_.end()) return it->second;
  if (shape_ids_.size() >= kMaxShapes) shape_ids_.clear();
  return shape_ids_.emplace(shape, next_shape_id_++).first->second;
}

std::shared_ptr<const AssessmentMemo::Memo> AssessmentMemo::Find(uint64_t shape_id, uint64_t generation,
                                                                 const std::array<uint64_t, 2>& ranking) const {
  std::lock_guard lock(mu_);
  for (const auto& memo : memos_) {
    if (memo && memo->shape_id == shape_id && memo->generation == generation && memo->ranking == ranking) return memo;
  }
  return nullptr;
}

void AssessmentMemo::Store(std::shared_ptr<const Memo> memo) {
  std::shared_ptr<const Memo> replaced;  // freed after the lock
  std::lock_guard lock(mu_);
  auto slot =
      std::find_if(memos_.begin(), memos_.end(), [&](const auto& m) { return m && m->shape_id == memo->shape_id; });
  if (slot == memos_.end()) {
    slot = memos_.begin() + next_;
    next_ = (next_ + 1) % kShapes;
  }
  replaced = std::exchange(*slot, std::move(memo));
}

const Assessment* AssessmentMemo::Memo::Find(size_t row, uint64_t version) const {
  const size_t c = row / kRowsPerChunk;
  if (c >= chunks.size() || chunks[c] == nullptr) return nullptr;
  const size_t r = row % kRowsPerChunk;
  return chunks[c]->versions[r] == version ? &chunks[c]->assessments[r] : nullptr;
}

Assessment& AssessmentMemo::Memo::Write(size_t row, uint64_t version) {
  const size_t c = row / kRowsPerChunk;
  if (c >= chunks.size()) chunks.resize(c + 1);
  std::shared_ptr<Chunk>& chunk = chunks[c];
  // use_count 1: only this memo, which nobody can read before it is stored, holds the chunk.
  if (chunk == nullptr) {
    chunk = std::make_shared<Chunk>();
  } else if (chunk.use_count() != 1) {
    chunk = std::make_shared<Chunk>(*chunk);
  }
  const size_t r = row % kRowsPerChunk;
  chunk->versions[r] = version;
  return chunk->assessments[r];
}

}  // namespace gpupack::extender

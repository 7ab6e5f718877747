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
  // Out of memos_ and held by no reader, it can be reused: no one can reach it any more. Memos
  // are only ever created non-const (New), so the cast is sound.
  if (replaced && replaced.use_count() == 1) spare_ = std::const_pointer_cast<Memo>(std::move(replaced));
}

std::shared_ptr<AssessmentMemo::Memo> AssessmentMemo::New() {
  {
    std::lock_guard lock(mu_);
    if (spare_) return std::move(spare_);
  }
  return std::make_shared<Memo>();
}

}  // namespace gpupack::extender

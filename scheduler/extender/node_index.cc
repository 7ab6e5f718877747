#include "scheduler/extender/node_index.h"

#include <functional>

namespace gpupack::extender {

namespace {

size_t HashOf(std::string_view name) { return std::hash<std::string_view>{}(name); }

}  // namespace

size_t NodeIndex::Add(const std::string& name) {
  size_t row = names_.size();
  if (!free_rows_.empty()) {
    row = free_rows_.back();
    free_rows_.pop_back();
  } else {
    names_.emplace_back();
    in_use_.push_back(false);
  }
  names_[row] = name;
  in_use_[row] = true;
  ++size_;
  if (slots_.size() >= 2 * size_) {
    Insert(row);
  } else {
    Rebuild();  // includes `row`
  }
  return row;
}

void NodeIndex::Remove(size_t row) {
  names_[row].clear();
  in_use_[row] = false;
  free_rows_.push_back(row);
  --size_;
  Rebuild();
}

size_t NodeIndex::RowOf(std::string_view name) const {
  if (slots_.empty()) return kNoRow;
  const size_t hash = HashOf(name);
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.row == kNoRow) return kNoRow;
    if (slot.hash == hash && names_[slot.row] == name) return slot.row;
  }
}

void NodeIndex::RowsOf(const std::vector<std::string_view>& names, std::vector<size_t>& rows) const {
  std::shared_ptr<const Hint> hint;
  {
    std::lock_guard lock(hints_mu_);
    for (const auto& h : hints_) {
      if (h != nullptr && h->rows.size() == names.size()) hint = h;
    }
  }
  rows.resize(names.size());
  bool moved = hint == nullptr;
  for (size_t i = 0; i < names.size(); ++i) {
    const size_t guess = hint != nullptr ? hint->rows[i] : kNoRow;
    if (guess < names_.size() && !names[i].empty() && names_[guess] == names[i]) {
      rows[i] = guess;
      continue;
    }
    rows[i] = RowOf(names[i]);
    moved = moved || rows[i] != guess;
  }
  if (!moved) return;
  auto next = std::make_shared<Hint>();
  next->rows = rows;
  std::lock_guard lock(hints_mu_);
  for (auto& h : hints_) {
    if (h != nullptr && h->rows.size() == names.size()) {
      h = std::move(next);
      return;
    }
  }
  hints_[next_hint_] = std::move(next);
  next_hint_ = (next_hint_ + 1) % kHints;
}

void NodeIndex::Rebuild() {
  size_t size = 16;
  while (size < 4 * size_) size *= 2;
  slots_.assign(size, Slot{});
  for (size_t row = 0; row < names_.size(); ++row) {
    if (in_use_[row]) Insert(row);
  }
}

void NodeIndex::Insert(size_t row) {
  const size_t mask = slots_.size() - 1;
  const size_t hash = HashOf(names_[row]);
  size_t i = hash & mask;
  while (slots_[i].row != kNoRow) i = (i + 1) & mask;
  slots_[i] = Slot{hash, row};
}

}  // namespace gpupack::extender

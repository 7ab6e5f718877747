// Node names to snapshot rows, for the read verbs that look up thousands of names per call.
//
// std::unordered_map pays a division (prime bucket count) per probe and a pointer chase per
// node; this open-addressing index over the rows (power-of-two size, linear probing, load ≤ 1/2)
// pays a mask and one array read, and the names it compares against sit in one array. Rows are
// assigned when a node enters and freed (for reuse) when it leaves.
//
// Even so, a lookup is a cache miss in an index far larger than the CPU's cache, and the
// scheduler sends the same list of names, in the same order, call after call. So RowsOf
// remembers the rows of the last few lists (one per list length): hint[i] is where names[i] was,
// checked against the row's name before use (a row may since hold another node), and the index
// is searched only for names that moved. Hints, not truth: a wrong one costs a lookup.
//
// Thread safety: the rows and the index have no lock of their own: the owner's table lock
// guards them (Add and Remove need it exclusively, the lookups shared). The hints have their own
// mutex, taken under the table lock and never with another.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace gpupack::extender {

class NodeIndex {
 public:
  static constexpr size_t kNoRow = static_cast<size_t>(-1);

  // Gives `name` (not in the index) a row: a freed one if any, else a new one at the end.
  size_t Add(const std::string& name);
  // Frees `row`'s name and row.
  void Remove(size_t row);
  // The row of `name`, or kNoRow.
  size_t RowOf(std::string_view name) const;
  // The rows of `names` (kNoRow: unknown node), through the hints.
  void RowsOf(const std::vector<std::string_view>& names, std::vector<size_t>& rows) const;
  // Rows in use or free: every row is below this.
  size_t RowCount() const { return names_.size(); }

 private:
  struct Slot {
    size_t hash = 0;
    size_t row = kNoRow;  // kNoRow: empty slot
  };
  struct Hint {
    std::vector<size_t> rows;
  };
  // Slots afresh from names_, at load ≤ 1/4, so the next rebuild comes after the node count
  // doubles: adding thousands of nodes at start-up stays linear.
  void Rebuild();
  // One row into a free slot of an index with room.
  void Insert(size_t row);

  std::vector<Slot> slots_;
  std::vector<std::string> names_;  // by row; empty for a free row
  std::vector<bool> in_use_;        // by row (a node's name may be empty)
  std::vector<size_t> free_rows_;
  size_t size_ = 0;  // rows in use

  static constexpr int kHints = 4;
  mutable std::mutex hints_mu_;  // guards the pointers only; a hint is immutable
  mutable std::array<std::shared_ptr<const Hint>, kHints> hints_;
  mutable int next_hint_ = 0;
};

}  // namespace gpupack::extender

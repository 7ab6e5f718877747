#include "placement/completion.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>
#include <queue>
#include <utility>

#include "placement/fgd_cost.h"
#include "placement/placement.h"

namespace gpupack::placement {
namespace {

constexpr double kEps = 1e-9;
// The grid a table falls back to: quanta of 1/1024 of the capacity (completion.h).
constexpr MiB kGridQuanta = 1024;

struct Item {
  int64_t size = 0;  // quanta, 1..capacity
  double demand = 0;
};

// The best fillings of every free amount up to a capacity, as the amounts where the best value
// rises: a step at `size` quanta holds the most Σ price of items within `size`, which is also the
// most within any amount up to the next step. The best filling at a step ends with `item` on top
// of the best filling at step `from` (the first step, at 0, has neither).
struct Step {
  int64_t size = 0;
  double value = 0;
  int item = -1;
  int from = -1;
};

// The unbounded knapsack by its steps alone (items of price ≤ 0 left out), in order of size: a
// step extended by an item is a candidate, and a candidate is a step when it is worth more than
// every smaller one (a filling beaten by a smaller one is beaten in every extension too). Item i
// extends the steps one by one, in order, so its next candidate is steps[next[i]] + item i, and
// a heap of one candidate per item yields them by size. Work: steps × items × log(items), however
// large the capacity. Each candidate drawn costs one of `budget`; returns false, with `steps`
// cut, when the budget runs out.
bool SparseKnapsack(const std::vector<Item>& items, const std::vector<double>& price, int64_t capacity, int64_t& budget,
                    std::vector<Step>& steps) {
  steps.assign(1, Step{});
  using Candidate = std::pair<int64_t, int>;  // size, item
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  std::vector<int> next(items.size(), 0), waiting, popped;  // waiting: next[i] is no step yet
  auto offer = [&](int i) {
    if (next[i] == static_cast<int>(steps.size())) {
      waiting.push_back(i);
    } else if (steps[next[i]].size + items[i].size <= capacity) {
      heap.emplace(steps[next[i]].size + items[i].size, i);
    }
  };
  for (size_t i = 0; i < items.size(); ++i) {
    if (price[i] > kEps) offer(static_cast<int>(i));
  }
  while (!heap.empty()) {
    Step best{heap.top().first, steps.back().value, -1, -1};
    popped.clear();
    for (; !heap.empty() && heap.top().first == best.size; heap.pop()) {
      if (--budget < 0) return false;
      const int i = heap.top().second;
      if (steps[next[i]].value + price[i] > best.value + kEps) {
        best.value = steps[next[i]].value + price[i];
        best.item = i;
        best.from = next[i];
      }
      ++next[i];
      popped.push_back(i);
    }
    if (best.item >= 0) {
      steps.push_back(best);
      for (int i : waiting) {
        if (best.size + items[i].size <= capacity) heap.emplace(best.size + items[i].size, i);
      }
      waiting.clear();
    }
    for (int i : popped) offer(i);
  }
  return true;
}

// The same over every amount of quanta, 0..capacity: work capacity × items, for the grid.
void DenseKnapsack(const std::vector<Item>& items, const std::vector<double>& price, int64_t capacity,
                   std::vector<Step>& steps) {
  // best[c] and the item a best filling of c ends with (-1: c − 1's filling) in flat arrays, which
  // the inner loop reads fastest; then the steps are the amounts where an item was added.
  std::vector<double> best(capacity + 1, 0.0);
  std::vector<int> last(capacity + 1, -1);
  for (int64_t c = 1; c <= capacity; ++c) {
    best[c] = best[c - 1];
    for (size_t i = 0; i < items.size(); ++i) {
      if (price[i] <= kEps || items[i].size > c) continue;
      const double v = best[c - items[i].size] + price[i];
      if (v > best[c] + kEps) {
        best[c] = v;
        last[c] = static_cast<int>(i);
      }
    }
  }
  steps.assign(1, Step{});
  std::vector<int> step_at(capacity + 1, 0);  // the step that holds each amount
  for (int64_t c = 1; c <= capacity; ++c) {
    if (last[c] >= 0) steps.push_back(Step{c, best[c], last[c], step_at[c - items[last[c]].size]});
    step_at[c] = static_cast<int>(steps.size()) - 1;
  }
}

// How a table counts memory (completion.h): in quanta of `quantum_mib` with the dense knapsack,
// or in MiB with the sparse one while `sparse_budget` candidates last (over the whole LP).
struct Counting {
  MiB quantum_mib = 1;
  bool sparse = false;
  int64_t sparse_budget = 0;
};

bool Knapsack(const std::vector<Item>& items, const std::vector<double>& price, int64_t capacity, Counting& counting,
              std::vector<Step>& steps) {
  if (counting.sparse) return SparseKnapsack(items, price, capacity, counting.sparse_budget, steps);
  DenseKnapsack(items, price, capacity, steps);
  return true;
}

// Dual prices of the covering LP  min Σ_p x_p  s.t.  Σ_p a_ip x_p ≥ demand_i, x ≥ 0, over every
// pattern p (a multiset of items within one device), by column generation: a revised simplex on
// the m rows with an explicit basis inverse, the entering pattern from the knapsack on the
// current duals (or a surplus column where a dual is negative). The start basis packs each item
// alone, as many copies as fit, which is feasible. m ≤ kMaxTypicalSpecs, so everything is small;
// the iteration cap only guards against degenerate cycling (the duals are then a good
// approximation, not optimal). Returns false when an exact knapsack runs past its bound.
bool DualPrices(const std::vector<Item>& items, int64_t capacity, Counting& counting, std::vector<double>& y) {
  const int m = static_cast<int>(items.size());
  std::vector<std::vector<double>> inv(m, std::vector<double>(m, 0.0));  // B⁻¹
  std::vector<double> x(m);                                              // basic values
  std::vector<double> cost(m, 1.0);                                      // basic costs
  for (int i = 0; i < m; ++i) {
    const double copies = static_cast<double>(capacity / items[i].size);
    inv[i][i] = 1.0 / copies;
    x[i] = items[i].demand / copies;
  }
  y.assign(m, 0.0);
  std::vector<double> column(m), u(m);
  std::vector<Step> steps;
  const int max_iterations = 50 * m + 200;
  for (int it = 0; it < max_iterations; ++it) {
    for (int j = 0; j < m; ++j) {
      y[j] = 0;
      for (int r = 0; r < m; ++r) y[j] += cost[r] * inv[r][j];
    }
    // Entering column: the pattern of greatest value (reduced cost 1 − value), or a surplus
    // column −e_j (cost 0, reduced cost y_j) where y_j < 0.
    if (!Knapsack(items, y, capacity, counting, steps)) return false;
    double reduced = 1.0 - steps.back().value;
    int surplus = -1;
    for (int j = 0; j < m; ++j) {
      if (y[j] < reduced - kEps) {
        reduced = y[j];
        surplus = j;
      }
    }
    if (reduced > -1e-7) break;
    double entering_cost;
    std::fill(column.begin(), column.end(), 0.0);
    if (surplus >= 0) {
      column[surplus] = -1;
      entering_cost = 0;
    } else {
      for (int p = static_cast<int>(steps.size()) - 1; p > 0; p = steps[p].from) column[steps[p].item] += 1;
      entering_cost = 1;
    }
    for (int r = 0; r < m; ++r) {
      u[r] = 0;
      for (int j = 0; j < m; ++j) u[r] += inv[r][j] * column[j];
    }
    int leave = -1;
    double ratio = 0;
    for (int r = 0; r < m; ++r) {
      if (u[r] <= kEps) continue;
      const double t = x[r] / u[r];
      if (leave < 0 || t < ratio - kEps) {
        leave = r;
        ratio = t;
      }
    }
    if (leave < 0) break;  // cannot happen for a covering LP with positive costs; stop safely
    for (int r = 0; r < m; ++r) x[r] -= ratio * u[r];
    x[leave] = ratio;
    const double pivot = u[leave];
    for (int j = 0; j < m; ++j) inv[leave][j] /= pivot;
    for (int r = 0; r < m; ++r) {
      if (r == leave || u[r] == 0) continue;
      for (int j = 0; j < m; ++j) inv[r][j] -= u[r] * inv[leave][j];
    }
    cost[leave] = entering_cost;
  }
  for (double& v : y) v = std::clamp(v, 0.0, 1.0);
  return true;
}

// Whether a shape takes a slice of a device of `capacity_mib` that the value prices: part of one
// device's memory, no MIG profile (MIG-profile shapes are fixed slices).
bool IsPricedSlice(const TypicalSpec& s, MiB capacity_mib) {
  return s.device_count > 0 && s.mem_per_device_mib > 0 && s.mem_per_device_mib < capacity_mib &&
         s.mig_profile.empty() && s.weight > 0;
}

// The greatest common divisor of the priced slice sizes (0: none): every filling is a multiple.
MiB SliceGcd(const TypicalWorkload& workload, MiB capacity_mib) {
  MiB gcd = 0;
  for (const TypicalSpec& s : workload.specs) {
    if (IsPricedSlice(s, capacity_mib)) gcd = std::gcd(gcd, s.mem_per_device_mib);
  }
  return gcd;
}

// One capacity's table, counted as `counting` says; false when the sparse budget runs out.
bool BuildTable(const TypicalWorkload& workload, MiB capacity_mib, Counting counting, CompletionValue::Table& table) {
  table = CompletionValue::Table{
      capacity_mib, counting.quantum_mib, true, {}, {}, {}, {}, 1.0 / static_cast<double>(counting.quantum_mib)};
  const int64_t capacity = capacity_mib / counting.quantum_mib;
  std::map<int64_t, double> demand_by_size;
  for (const TypicalSpec& s : workload.specs) {
    if (!IsPricedSlice(s, capacity_mib)) continue;
    // Rounded down: slices that fit together stay within the capacity, itself rounded down.
    const int64_t size = std::max<int64_t>(1, s.mem_per_device_mib / counting.quantum_mib);
    table.exact = table.exact && s.mem_per_device_mib % counting.quantum_mib == 0;
    demand_by_size[size] += s.weight * s.device_count;
  }
  std::vector<Item> items;
  for (auto it = demand_by_size.rbegin(); it != demand_by_size.rend(); ++it) items.push_back({it->first, it->second});
  std::vector<double> price;
  if (!items.empty() && !DualPrices(items, capacity, counting, price)) return false;
  for (size_t i = 0; i < items.size(); ++i) table.prices.push_back({items[i].size * counting.quantum_mib, price[i]});
  std::vector<Step> steps;
  if (!Knapsack(items, price, capacity, counting, steps)) return false;
  for (const Step& step : steps) {
    table.step_mib.push_back(step.size * counting.quantum_mib);
    table.step_value.push_back(step.value);
  }
  if (!counting.sparse) {  // ≤ 1025 quanta: K at each, for a lookup without a search
    table.value_by_quantum.resize(capacity + 1);
    for (size_t i = 0; i < steps.size(); ++i) {
      const int64_t end = i + 1 < steps.size() ? steps[i + 1].size : capacity + 1;
      std::fill(table.value_by_quantum.begin() + steps[i].size, table.value_by_quantum.begin() + end, steps[i].value);
    }
  }
  return true;
}

}  // namespace

CompletionValue CompletionValue::Build(const TypicalWorkload& workload, const std::vector<MiB>& device_capacities_mib,
                                       int64_t sparse_budget) {
  CompletionValue out;
  std::vector<MiB> capacities;
  for (MiB c : device_capacities_mib) {
    if (c > 0) capacities.push_back(c);
  }
  std::sort(capacities.begin(), capacities.end());
  capacities.erase(std::unique(capacities.begin(), capacities.end()), capacities.end());
  for (MiB capacity_mib : capacities) {
    Table table;
    const MiB gcd = std::max<MiB>(1, SliceGcd(workload, capacity_mib));
    if (capacity_mib / gcd <= kGridQuanta) {
      BuildTable(workload, capacity_mib, Counting{gcd, false, 0}, table);  // exact: the gcd divides every slice
    } else if (!BuildTable(workload, capacity_mib, Counting{1, true, sparse_budget}, table)) {
      BuildTable(workload, capacity_mib, Counting{(capacity_mib + kGridQuanta - 1) / kGridQuanta, false, 0}, table);
    }
    out.tables_.push_back(std::move(table));
  }
  return out;
}

CompletionValue::Builder::Builder(TypicalWorkload workload, const PlacementOptions& placement)
    : workload_(std::move(workload)), placement_(placement) {}

void CompletionValue::Builder::AddNode(const Node& node) {
  for (const Device& d : node.devices) {
    const MiB usable = DeviceUsableMiB(d, placement_);
    // Nodes mostly repeat one capacity: keep the list short without a set.
    if (capacities_.empty() || capacities_.back() != usable) capacities_.push_back(usable);
  }
}

CompletionValue CompletionValue::Builder::Build() && { return CompletionValue::Build(workload_, capacities_); }

int CompletionValue::TableFor(MiB capacity_mib) const {
  int best = -1;
  for (int t = 0; t < static_cast<int>(tables_.size()); ++t) {
    if (best < 0 ||
        std::llabs(tables_[t].capacity_mib - capacity_mib) < std::llabs(tables_[best].capacity_mib - capacity_mib)) {
      best = t;
    }
  }
  return best;
}

double CompletionValue::Value(int table, MiB free_mib) const {
  const Table& t = tables_[table];
  if (free_mib <= 0) return 0;
  // Free memory rounds down to the quantum (exact where the quantum divides every slice).
  if (!t.value_by_quantum.empty()) {
    const size_t q = std::min<size_t>(FloorDiv(free_mib, t.inv_quantum), t.value_by_quantum.size() - 1);
    return t.value_by_quantum[q] * static_cast<double>(t.capacity_mib);
  }
  // The last step at or below the free memory (the first step is at 0), by a binary search
  // without branches (a conditional move per halving): this runs for every candidate device of
  // every node, and with few steps a mispredicted branch costs more than the search.
  const MiB* step = t.step_mib.data();
  for (size_t n = t.step_mib.size(); n > 1;) {
    const size_t half = n / 2;
    step = step[half] <= free_mib ? step + half : step;
    n -= half;
  }
  return t.step_value[step - t.step_mib.data()] * static_cast<double>(t.capacity_mib);
}

int64_t CompletionLossLevel(double loss_mib, MiB unit_mib) {
  // floor(x + ε), not round: the exact losses are ratios of small integers, so an x.5 is common
  // and rounding would split equal losses by float noise; an exact integer is safe either side.
  return static_cast<int64_t>(std::floor(loss_mib * 1000.0 / static_cast<double>(unit_mib) + 1e-6));
}

}  // namespace gpupack::placement

#include "placement/completion.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include "placement/placement.h"

namespace gpupack::placement {
namespace {

constexpr double kEps = 1e-9;

struct Item {
  int64_t size = 0;  // quanta, 1..capacity
  double demand = 0;
};

// The most valuable multiset of items within `capacity` quanta (an unbounded knapsack over item
// values `price`, items of value ≤ 0 left out): best[c] for every c ≤ capacity, and through
// `last`, the item a best filling of c ends with (-1: c − 1's filling).
void Knapsack(const std::vector<Item>& items, const std::vector<double>& price, int64_t capacity,
              std::vector<double>& best, std::vector<int>* last) {
  best.assign(capacity + 1, 0.0);
  if (last != nullptr) last->assign(capacity + 1, -1);
  for (int64_t c = 1; c <= capacity; ++c) {
    best[c] = best[c - 1];
    for (size_t i = 0; i < items.size(); ++i) {
      if (price[i] <= kEps || items[i].size > c) continue;
      const double v = best[c - items[i].size] + price[i];
      if (v > best[c] + kEps) {
        best[c] = v;
        if (last != nullptr) (*last)[c] = static_cast<int>(i);
      }
    }
  }
}

// Dual prices of the covering LP  min Σ_p x_p  s.t.  Σ_p a_ip x_p ≥ demand_i, x ≥ 0, over every
// pattern p (a multiset of items within one device), by column generation: a revised simplex on
// the m rows with an explicit basis inverse, the entering pattern from the knapsack on the
// current duals (or a surplus column where a dual is negative). The start basis packs each item
// alone, as many copies as fit, which is feasible. m ≤ kMaxTypicalSpecs, so everything is small;
// the iteration cap only guards against degenerate cycling (the duals are then a good
// approximation, not optimal).
std::vector<double> DualPrices(const std::vector<Item>& items, int64_t capacity) {
  const int m = static_cast<int>(items.size());
  std::vector<std::vector<double>> inv(m, std::vector<double>(m, 0.0));  // B⁻¹
  std::vector<double> x(m);                                              // basic values
  std::vector<double> cost(m, 1.0);                                      // basic costs
  for (int i = 0; i < m; ++i) {
    const double copies = static_cast<double>(capacity / items[i].size);
    inv[i][i] = 1.0 / copies;
    x[i] = items[i].demand / copies;
  }
  std::vector<double> y(m), best, column(m), u(m);
  std::vector<int> last;
  const int max_iterations = 50 * m + 200;
  for (int it = 0; it < max_iterations; ++it) {
    for (int j = 0; j < m; ++j) {
      y[j] = 0;
      for (int r = 0; r < m; ++r) y[j] += cost[r] * inv[r][j];
    }
    // Entering column: the pattern of greatest value (reduced cost 1 − value), or a surplus
    // column −e_j (cost 0, reduced cost y_j) where y_j < 0.
    Knapsack(items, y, capacity, best, &last);
    double reduced = 1.0 - best[capacity];
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
      for (int64_t c = capacity; c > 0;) {
        if (last[c] < 0) {
          --c;
          continue;
        }
        column[last[c]] += 1;
        c -= items[last[c]].size;
      }
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
  return y;
}

}  // namespace

CompletionValue CompletionValue::Build(const TypicalWorkload& workload, const std::vector<MiB>& device_capacities_mib) {
  CompletionValue out;
  std::vector<MiB> capacities;
  for (MiB c : device_capacities_mib) {
    if (c > 0) capacities.push_back(c);
  }
  std::sort(capacities.begin(), capacities.end());
  capacities.erase(std::unique(capacities.begin(), capacities.end()), capacities.end());
  for (MiB capacity_mib : capacities) {
    Table table;
    table.capacity_mib = capacity_mib;
    table.quantum_mib = std::max<MiB>(1, (capacity_mib + 1023) / 1024);
    const int64_t capacity = capacity_mib / table.quantum_mib;
    std::map<int64_t, double> demand_by_size;
    for (const TypicalSpec& s : workload.specs) {
      if (s.device_count == 0 || s.mem_per_device_mib <= 0 || s.mem_per_device_mib >= capacity_mib ||
          !s.mig_profile.empty() || s.weight <= 0) {
        continue;
      }
      const int64_t size = (s.mem_per_device_mib + table.quantum_mib - 1) / table.quantum_mib;
      if (size <= capacity) demand_by_size[size] += s.weight * s.device_count;
    }
    std::vector<Item> items;
    for (auto it = demand_by_size.rbegin(); it != demand_by_size.rend(); ++it) items.push_back({it->first, it->second});
    const std::vector<double> price = items.empty() ? std::vector<double>() : DualPrices(items, capacity);
    for (size_t i = 0; i < items.size(); ++i) table.prices.push_back({items[i].size * table.quantum_mib, price[i]});
    Knapsack(items, price, capacity, table.value, nullptr);
    out.tables_.push_back(std::move(table));
  }
  return out;
}

CompletionValue::Builder::Builder(TypicalWorkload workload, const PlacementOptions& placement)
    : workload_(std::move(workload)), reserve_mib_per_device_(placement.reserve_mib_per_device) {}

void CompletionValue::Builder::AddNode(const Node& node) {
  PlacementOptions options;
  options.reserve_mib_per_device = reserve_mib_per_device_;
  for (const Device& d : node.devices) {
    const MiB usable = DeviceUsableMiB(d, options);
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
  const int64_t q = std::min<int64_t>(free_mib / t.quantum_mib, static_cast<int64_t>(t.value.size()) - 1);
  return t.value[q] * static_cast<double>(t.capacity_mib);
}

int64_t CompletionLossLevel(double loss_mib, MiB unit_mib) {
  // floor(x + ε), not round: the exact losses are ratios of small integers, so an x.5 is common
  // and rounding would split equal losses by float noise; an exact integer is safe either side.
  return static_cast<int64_t>(std::floor(loss_mib * 1000.0 / static_cast<double>(unit_mib) + 1e-6));
}

}  // namespace gpupack::placement

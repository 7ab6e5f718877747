#include "scheduler/extender/rank_order.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "placement/decision.h"
#include "placement/placement.h"

namespace gpupack::extender {
namespace {

// The order std::sort gives by (rank, index): what SortByRank must reproduce exactly.
std::vector<size_t> Reference(const std::vector<placement::RankKey>& ranks) {
  std::vector<size_t> order(ranks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ranks[a] != ranks[b]) return ranks[a] < ranks[b];
    return a < b;
  });
  return order;
}

std::vector<size_t> Sorted(const std::vector<placement::RankKey>& ranks) {
  std::vector<RankedIndex> items;
  for (size_t i = 0; i < ranks.size(); ++i) items.emplace_back(ranks[i], i);
  SortByRank(items);
  std::vector<size_t> order;
  for (size_t k = 0; k < items.size(); ++k) {
    EXPECT_EQ(items[k].rank(), ranks[items[k].index]) << "the rank survives the encoding";
    order.push_back(items[k].index);
  }
  return order;
}

// placement::RankOf's tie: the node's tie-break rank as a fraction in [0, 1).
double Tie(uint64_t node) {
  return static_cast<double>(placement::NodeTieBreakRank("node-" + std::to_string(node), 7) >> 11) /
         static_cast<double>(uint64_t{1} << 53);
}

// The same while the ranking puts fewer GPUs first: a reservation price and a GPU count in the
// leading bits, which most nodes share (here four in five have 8 GPUs and no price).
double FewerGpusFirstTie(uint64_t node, std::mt19937_64& rng) {
  const int gpus = rng() % 5 == 0 ? static_cast<int>(1 + rng() % 4) : 8;
  const double price = rng() % 5 == 0 ? static_cast<double>(rng() % 200) : 0.0;
  return placement::RankOf({0, 0, price, 0, placement::NodeTieBreakRank("node-" + std::to_string(node), 7), gpus}, 1000,
                           placement::DecisionOptions{}, std::nullopt, true)
      .tie;
}

TEST(SortByRank, OrdersExactlyAsAComparisonSort) {
  std::mt19937_64 rng(1);
  struct Case {
    const char* name;
    size_t nodes;
    int distinct_costs;  // costs drawn from this many integer levels
    int tie_kind;        // 0: node ties; 1: all 0; 2: duplicated node ties; 3: not k / 2^53; 4: fewer GPUs first
  };
  const Case cases[] = {
      {"bucketed: few costs, node ties", 5000, 7, 0},
      {"bucketed: one cost", 3000, 1, 0},
      {"bucketed: no tie-break (all ties 0)", 2000, 5, 1},
      {"bucketed: equal (cost, tie) pairs keep index order", 2000, 3, 2},
      {"bucketed: ties that share their leading bits", 5000, 7, 4},
      {"compared: more costs than the table takes", 4000, 1000, 0},
      {"compared: ties that are not fractions of 2^53", 1000, 4, 3},
      {"compared: below the bucketing threshold", 40, 3, 0},
  };
  for (const Case& c : cases) {
    std::vector<placement::RankKey> ranks;
    for (size_t i = 0; i < c.nodes; ++i) {
      // Integer-valued costs around 0, so that −0.0 and +0.0 both occur and must compare equal.
      double cost = static_cast<double>(static_cast<int>(rng() % c.distinct_costs) - c.distinct_costs / 2) * 128;
      if (cost == 0 && rng() % 2 == 0) cost = -0.0;
      double tie = c.tie_kind == 1 ? 0.0 : Tie(c.tie_kind == 2 ? rng() % 50 : i);
      if (c.tie_kind == 3) tie = static_cast<double>(rng() % 1000) / 7.0;
      if (c.tie_kind == 4) tie = FewerGpusFirstTie(i, rng);
      ranks.push_back({cost, tie});
    }
    EXPECT_EQ(Sorted(ranks), Reference(ranks)) << c.name;
  }
}

}  // namespace
}  // namespace gpupack::extender

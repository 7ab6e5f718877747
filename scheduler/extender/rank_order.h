// Ordering a prioritize's fitting nodes by rank: what prioritize spends most of its time on at
// thousands of nodes, so it gets its own module and test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "placement/decision.h"

namespace gpupack::extender {

// A rank and an index (into the request's node list) as integers that order as (rank, index)
// does. REQUIRES: neither rank field is NaN.
struct RankedIndex {
  RankedIndex(const placement::RankKey& rank, size_t index);
  placement::RankKey rank() const;

  uint64_t cost;  // rank.cost's bits, in an order that follows the double's
  uint64_t tie;   // likewise rank.tie's
  size_t index;
};

// Sorts by (rank, index), exactly as std::sort with that comparison would. Prioritize's ranks have
// few distinct costs (integer FGD / fill / completion levels) and ties that are fixed
// pseudo-random fractions of the node (placement::NodeTieBreakRank, below a prefix that many nodes
// may share), so this buckets by cost, then by the leading bits of the tie's distance from the least
// tie of its cost, and sorts only within buckets of one or two: linear in the nodes, where
// a comparison sort cost a sixth of a filter + prioritize pair at 5,000 nodes. Ranks that do not
// look like that (many distinct costs, ties outside [0, 1)) are sorted by comparison.
void SortByRank(std::vector<RankedIndex>& items);

}  // namespace gpupack::extender

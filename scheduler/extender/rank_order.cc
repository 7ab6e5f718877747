#include "scheduler/extender/rank_order.h"

#include <algorithm>
#include <bit>

namespace gpupack::extender {

namespace {

constexpr uint64_t kSign = uint64_t{1} << 63;

// The bits of x as an unsigned integer that orders as x does (adding 0.0 turns −0.0 into +0.0,
// which compares equal to it).
uint64_t OrderedBits(double x) {
  const uint64_t bits = std::bit_cast<uint64_t>(x + 0.0);
  return (bits & kSign) != 0 ? ~bits : bits | kSign;
}

double FromOrderedBits(uint64_t ordered) {
  return std::bit_cast<double>((ordered & kSign) != 0 ? ordered & ~kSign : ~ordered);
}

bool Less(const RankedIndex& a, const RankedIndex& b) {
  if (a.cost != b.cost) return a.cost < b.cost;
  if (a.tie != b.tie) return a.tie < b.tie;
  return a.index < b.index;
}

// Ties in [0, 1) (placement::RankOf's) scaled to 53-bit integers: the same order, and for
// pseudo-random ties uniform in their leading bits. 2^53 = none.
constexpr uint64_t kNoFraction = uint64_t{1} << 53;
uint64_t TieFraction(uint64_t ordered_tie) {
  const double tie = FromOrderedBits(ordered_tie);
  if (!(tie >= 0 && tie < 1)) return kNoFraction;
  const double scaled = tie * static_cast<double>(kNoFraction);  // exact: a power of two
  const auto whole = static_cast<uint64_t>(scaled);
  return static_cast<double>(whole) == scaled ? whole : kNoFraction;
}

}  // namespace

RankedIndex::RankedIndex(const placement::RankKey& rank, size_t index)
    : cost(OrderedBits(rank.cost)), tie(OrderedBits(rank.tie)), index(index) {}

placement::RankKey RankedIndex::rank() const { return {FromOrderedBits(cost), FromOrderedBits(tie)}; }

void SortByRank(std::vector<RankedIndex>& items) {
  const size_t n = items.size();
  auto by_comparison = [&items] { std::sort(items.begin(), items.end(), Less); };
  if (n < 64) return by_comparison();
  // Distinct costs, through a small open-addressing table; more than it holds: compare instead.
  constexpr size_t kTable = 512;
  constexpr size_t kMaxCosts = kTable / 4;
  struct Slot {
    uint64_t cost = 0;
    uint32_t group = 0;  // 0: empty; else 1 + the cost's index in `costs`
  };
  std::vector<Slot> table(kTable);
  std::vector<uint64_t> costs;
  std::vector<uint32_t> group_of(n);
  std::vector<uint64_t> fraction(n);
  for (size_t i = 0; i < n; ++i) {
    fraction[i] = TieFraction(items[i].tie);
    if (fraction[i] == kNoFraction) return by_comparison();
    const uint64_t cost = items[i].cost;
    size_t s = static_cast<size_t>((cost * 0x9e3779b97f4a7c15ULL) >> 55);  // 9 bits: kTable
    while (table[s].group != 0 && table[s].cost != cost) s = (s + 1) & (kTable - 1);
    if (table[s].group == 0) {
      if (costs.size() == kMaxCosts) return by_comparison();
      costs.push_back(cost);
      table[s] = Slot{cost, static_cast<uint32_t>(costs.size())};
    }
    group_of[i] = table[s].group - 1;
  }
  // Groups in cost order, each with a power-of-two run of buckets at least its size, a tie's
  // bucket in the run being the leading bits of its distance from the group's least tie: buckets
  // follow (cost, tie) order. Measured from the least tie, not from 0, because ties may share
  // leading bits (placement::RankOf's fewer-GPUs-first puts a price and a GPU count above the
  // node order's bits), and buckets of those bits alone would hold whole groups.
  const size_t groups = costs.size();
  std::vector<uint64_t> least(groups, kNoFraction), most(groups, 0);
  for (size_t i = 0; i < n; ++i) {
    least[group_of[i]] = std::min(least[group_of[i]], fraction[i]);
    most[group_of[i]] = std::max(most[group_of[i]], fraction[i]);
  }
  std::vector<uint32_t> order(groups);
  for (uint32_t g = 0; g < groups; ++g) order[g] = g;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return costs[a] < costs[b]; });
  std::vector<size_t> size(groups, 0);
  for (size_t i = 0; i < n; ++i) ++size[group_of[i]];
  std::vector<size_t> first_bucket(groups);
  std::vector<int> shift(groups);
  size_t buckets = 0;
  for (uint32_t g : order) {
    const int bits = std::bit_width(std::bit_ceil(size[g])) - 1;  // log2 of the run's length
    first_bucket[g] = buckets;
    shift[g] = std::max(0, static_cast<int>(std::bit_width(most[g] - least[g])) - bits);
    buckets += size_t{1} << bits;
  }
  std::vector<uint32_t> bucket_of(n);
  std::vector<size_t> start(buckets + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t g = group_of[i];
    bucket_of[i] = static_cast<uint32_t>(first_bucket[g] + ((fraction[i] - least[g]) >> shift[g]));
    ++start[bucket_of[i] + 1];
  }
  for (size_t b = 0; b < buckets; ++b) start[b + 1] += start[b];
  std::vector<RankedIndex> sorted(items);
  std::vector<size_t> next(start.begin(), start.end() - 1);
  for (size_t i = 0; i < n; ++i) sorted[next[bucket_of[i]]++] = items[i];
  for (size_t b = 0; b < buckets; ++b) {
    if (start[b + 1] - start[b] > 1) std::sort(sorted.begin() + start[b], sorted.begin() + start[b + 1], Less);
  }
  items.swap(sorted);
}

}  // namespace gpupack::extender

#include "sim/replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace gpupack::sim {

StatusOr<Replayer> Replayer::Create(std::vector<model::Node> nodes, std::vector<model::PodRequest> pods,
                                    ReplayOptions options) {
  if (nodes.empty()) return Status::InvalidArgument("the cluster has no nodes");
  if (pods.empty()) return Status::InvalidArgument("the workload has no pods");
  std::vector<placement::TypicalSpec> specs;
  specs.reserve(pods.size());
  for (const auto& pod : pods) specs.push_back(placement::SpecOfPod(pod));
  placement::TypicalWorkload typical = placement::TypicalWorkloadFromPods(specs, options.coverage);
  ClusterState base(nodes, typical);
  std::vector<Demand> demands;
  demands.reserve(pods.size());
  for (const auto& pod : pods) {
    GPUPACK_ASSIGN_OR_RETURN(Demand d, base.DemandOf(pod));
    demands.push_back(d);
  }
  return Replayer(std::move(nodes), std::move(pods), options, std::move(typical), std::move(base), std::move(demands));
}

std::vector<int> Replayer::Order(Rng& rng) const {
  std::vector<int> order(pods_.size());
  std::iota(order.begin(), order.end(), 0);
  if (options_.shuffle) {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return pods_[a].name < pods_[b].name; });
    rng.Shuffle(order);
  }
  return order;
}

std::vector<int> Replayer::Arrivals(Rng& rng) const {
  std::vector<int> order = Order(rng);
  if (options_.tune <= 0) return order;
  const double target = options_.tune * static_cast<double>(base_.total_capacity());
  double total = 0;
  for (int i : order) total += static_cast<double>(base_.ArrivedOf(demands_[i]));
  if (total < target) {
    for (;;) {
      const int i = static_cast<int>(rng.Below(pods_.size()));
      const Demand& d = demands_[i];
      // The artifact tests the per-device request, not k × it: multi-device draws may overshoot.
      const MiB per_device = d.device_count == 0 ? 0 : (d.whole() ? base_.unit_mib() : d.mem_per_device);
      if (total + static_cast<double>(per_device) > target) break;
      order.push_back(i);
      total += static_cast<double>(base_.ArrivedOf(d));
      // A workload of CPU-only pods alone never reaches a GPU target; stop at 10× its size.
      if (order.size() > 10 * pods_.size() + 1000) break;
    }
  } else {
    while (total > target && !order.empty()) {
      const size_t at = rng.Below(order.size());
      total -= static_cast<double>(base_.ArrivedOf(demands_[order[at]]));
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(at));
    }
  }
  return order;
}

StatusOr<Replayer::SeedCluster> Replayer::ClusterOfSeed(Rng& rng) const {
  if (options_.fill_pods <= 0) return SeedCluster{nodes_, base_, demands_, Arrivals(rng)};
  const std::vector<int> order = Order(rng);
  std::vector<int> node_order(nodes_.size());
  std::iota(node_order.begin(), node_order.end(), 0);
  rng.Shuffle(node_order);
  double demand = 0;
  for (size_t i = 0; i < order.size() && i < static_cast<size_t>(options_.fill_pods); ++i) {
    demand += static_cast<double>(base_.ArrivedOf(demands_[order[i]]));
  }
  SeedCluster out{{}, base_, {}, {}};
  double capacity = 0;
  for (int n : node_order) {
    if (capacity >= demand) break;
    out.nodes.push_back(nodes_[n]);
    for (const model::Device& d : nodes_[n].devices) capacity += static_cast<double>(d.capacity_mib);
  }
  out.state = ClusterState(out.nodes, typical_);
  out.demands.reserve(pods_.size());
  for (const auto& pod : pods_) {
    GPUPACK_ASSIGN_OR_RETURN(Demand d, out.state.DemandOf(pod));
    out.demands.push_back(d);
  }
  const double target = options_.tune * static_cast<double>(out.state.total_capacity());
  double arrived = 0;
  for (int i : order) {
    if (arrived >= target) break;
    out.arrivals.push_back(i);
    arrived += static_cast<double>(out.state.ArrivedOf(out.demands[i]));
  }
  return out;
}

StatusOr<SeedRun> Replayer::RunSeed(SimPolicy& policy, uint64_t seed) const {
  const auto started = std::chrono::steady_clock::now();
  Rng rng(seed);
  GPUPACK_ASSIGN_OR_RETURN(SeedCluster cluster, ClusterOfSeed(rng));
  const std::vector<int>& arrivals = cluster.arrivals;
  std::vector<int> rank(cluster.nodes.size());
  std::iota(rank.begin(), rank.end(), 0);
  rng.Shuffle(rank);

  ClusterState& state = cluster.state;
  GPUPACK_RETURN_IF_ERROR(policy.Start(state, cluster.nodes, rank));

  const double capacity = static_cast<double>(state.total_capacity());
  struct Bucket {
    double unallocated = 0, unallocated_compute = 0, frag_rate = 0, frag_amount = 0;
    int events = 0;
  };
  std::vector<Bucket> buckets;
  SeedRun run;
  run.seed = seed;
  MiB arrived = 0;
  std::vector<int> copies(pods_.size(), 0);
  std::vector<SimPod> queue(arrivals.size());
  for (size_t i = 0; i < arrivals.size(); ++i) {
    const int index = arrivals[i];
    queue[i].request = &pods_[index];
    queue[i].demand = cluster.demands[index];
    queue[i].name = ArrivalName(pods_[index].name, copies[index]++);
  }
  const size_t burst = options_.burst ? std::min(queue.size(), static_cast<size_t>(options_.fill_pods)) : 0;
  for (size_t i = 0; i < burst; ++i) queue[i].waiting = std::span<const SimPod>(queue).subspan(i + 1, burst - i - 1);
  for (const SimPod& pod : queue) {
    GPUPACK_ASSIGN_OR_RETURN(std::optional<Choice> choice, policy.Choose(state, pod, rng));
    arrived += state.ArrivedOf(pod.demand);
    ++run.pods;
    if (choice.has_value()) {
      state.Apply(*choice, pod.demand);
      policy.Committed(pod, *choice);
    } else {
      ++run.failed;
    }
    const int x = static_cast<int>(std::lround(100.0 * static_cast<double>(arrived) / capacity));
    if (x >= static_cast<int>(buckets.size())) buckets.resize(x + 1);
    Bucket& b = buckets[x];
    const double idle = static_cast<double>(state.idle());
    b.unallocated += 100.0 - 100.0 * static_cast<double>(state.allocated()) / capacity;
    b.unallocated_compute += 100.0 - 100.0 * static_cast<double>(state.compute_allocated()) /
                                         static_cast<double>(std::max<int64_t>(1, state.compute_capacity()));
    b.frag_rate += idle > 0 ? 100.0 * state.fragmentation() / idle : 0.0;
    b.frag_amount += 100.0 * state.fragmentation() / capacity;
    ++b.events;
  }
  for (int x = 0; x < static_cast<int>(buckets.size()); ++x) {
    Bucket sum;
    if (buckets[x].events > 0) {
      sum = buckets[x];
    } else {
      for (int y = std::max(0, x - 1); y <= x + 1 && y < static_cast<int>(buckets.size()); ++y) {
        sum.unallocated += buckets[y].unallocated;
        sum.unallocated_compute += buckets[y].unallocated_compute;
        sum.frag_rate += buckets[y].frag_rate;
        sum.frag_amount += buckets[y].frag_amount;
        sum.events += buckets[y].events;
      }
    }
    SeedPoint p;
    p.arrived_pct = x;
    if (sum.events > 0) {
      p.unallocated_pct = sum.unallocated / sum.events;
      p.unallocated_compute_pct = sum.unallocated_compute / sum.events;
      p.frag_rate_pct = sum.frag_rate / sum.events;
      p.frag_amount_pct = sum.frag_amount / sum.events;
    } else if (!run.curve.empty()) {
      // A gap wider than one point (a large pod on a small cluster): hold the last value.
      p = run.curve.back();
      p.arrived_pct = x;
    } else {
      p.unallocated_pct = 100;
      p.unallocated_compute_pct = 100;
    }
    run.curve.push_back(p);
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return run;
}

StatusOr<PolicyRun> Replayer::Run(const std::string& policy_name,
                                  const std::function<StatusOr<std::unique_ptr<SimPolicy>>()>& make_policy,
                                  const std::vector<uint64_t>& seeds) const {
  PolicyRun out;
  out.policy = policy_name;
  for (uint64_t seed : seeds) {
    GPUPACK_ASSIGN_OR_RETURN(std::unique_ptr<SimPolicy> policy, make_policy());
    GPUPACK_ASSIGN_OR_RETURN(SeedRun run, RunSeed(*policy, seed));
    out.seconds += run.seconds;
    out.seeds.push_back(std::move(run));
  }
  out.curve = Aggregate(out.seeds);
  return out;
}

std::string ArrivalName(const std::string& pod_name, int copy) {
  return copy == 0 ? pod_name : pod_name + "-tuned-" + std::to_string(copy);
}

Stat Summarize(std::vector<double> values) {
  Stat s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(n);
  if (n > 1) {
    double sq = 0;
    for (double v : values) sq += (v - s.mean) * (v - s.mean);
    s.sd = std::sqrt(sq / static_cast<double>(n - 1));
  }
  return s;
}

std::vector<AggregatePoint> Aggregate(const std::vector<SeedRun>& seeds) {
  size_t longest = 0;
  for (const auto& s : seeds) longest = std::max(longest, s.curve.size());
  std::vector<AggregatePoint> out;
  for (size_t x = 0; x < longest; ++x) {
    std::vector<double> unalloc, unalloc_compute, rate, amount;
    for (const auto& s : seeds) {
      if (x >= s.curve.size()) continue;
      unalloc.push_back(s.curve[x].unallocated_pct);
      unalloc_compute.push_back(s.curve[x].unallocated_compute_pct);
      rate.push_back(s.curve[x].frag_rate_pct);
      amount.push_back(s.curve[x].frag_amount_pct);
    }
    AggregatePoint p;
    p.arrived_pct = static_cast<int>(x);
    p.seeds = static_cast<int>(unalloc.size());
    p.unallocated_pct = Summarize(unalloc);
    p.unallocated_compute_pct = Summarize(unalloc_compute);
    p.frag_rate_pct = Summarize(rate);
    p.frag_amount_pct = Summarize(amount);
    out.push_back(p);
  }
  return out;
}

StatusOr<std::vector<uint64_t>> ParseSeeds(std::string_view text) {
  std::vector<uint64_t> seeds;
  auto number = [&](std::string_view s) -> StatusOr<uint64_t> {
    if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return Status::InvalidArgument("--seeds: \"" + std::string(s) + "\" is not a seed (want e.g. 42-51 or 42,43)");
    }
    return static_cast<uint64_t>(std::stoull(std::string(s)));
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view part = text.substr(start, comma - start);
    size_t dash = part.find('-');
    if (dash == std::string_view::npos) {
      GPUPACK_ASSIGN_OR_RETURN(uint64_t s, number(part));
      seeds.push_back(s);
    } else {
      GPUPACK_ASSIGN_OR_RETURN(uint64_t lo, number(part.substr(0, dash)));
      GPUPACK_ASSIGN_OR_RETURN(uint64_t hi, number(part.substr(dash + 1)));
      if (hi < lo || hi - lo > 10000) {
        return Status::InvalidArgument("--seeds: range \"" + std::string(part) + "\" is empty or too long");
      }
      for (uint64_t s = lo; s <= hi; ++s) seeds.push_back(s);
    }
    start = comma + 1;
  }
  return seeds;
}

}  // namespace gpupack::sim

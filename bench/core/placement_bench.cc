// Filter + score of one pod against N nodes × 8 GPUs with a 30-spec typical workload — the work
// the extender does per filter/prioritize pair (target: ≤ 1 ms at 5,000 nodes, every variant,
// allocs_per_node 0, and linear in nodes up to 20,000). Cases: BM_FilterScore/<nodes> with cached node
// summaries (the extender keeps them next to each node and recomputes only changed nodes), and
// BM_FilterScoreColdSummaries/<nodes> recomputing every summary (the worst case after a policy
// snapshot swap); BM_FilterScoreWithCompute/<nodes>/<shares> the same pod asking for a compute
// share, so scored in two dimensions, with typical shapes that ask for memory alone (0) or name
// compute shares of their own (1, WithComputeShares). Allocation counts per iteration are reported as a counter.
// BM_RefreshReservation/<nodes> is the extra work of a policy refresh with capacity reservation:
// building it over every node, on a cluster where one node in eight has T4 GPUs that four pinned
// shapes depend on; BM_RefreshSummaries/<nodes>/<reserve>/<shares> re-summarises every node under
// the new policy without (0) and with (1) the reservation, with shapes that name compute shares of
// their own (shares 1: the two-dimensional tallies kept too) — the rest of the refresh.
// BM_RefreshCompletion/<nodes> builds the completion value (the cutting-stock dual and value table
// per device capacity) over every node, one node in eight with 24 GiB GPUs; BM_FilterScore's
// second argument is 1 when the policy carries that completion value (the extender's default).
// BM_RefreshCompletionShapes/<capacity>/<shapes> builds one table for one device capacity: the
// Alibaba trace's fractional shapes (0) or 64 small shapes of unrelated sizes (1, the bound's case).
// BM_LearnerSnapshot is the learner's typical set with its histogram full, which the extender
// computes on the filter's path for a pod it sees first once a refresh could be due.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <new>
#include <random>
#include <string>
#include <utility>

#include <benchmark/benchmark.h>

#include "placement/decision.h"
#include "placement/placement.h"

namespace {

std::atomic<long> g_allocations{0};

}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace gpupack::placement {
namespace {

// A realistic mid-life cluster: 80 GiB GPUs, each 0–4 shares of 5–40 GiB, some empty.
std::vector<Node> MakeCluster(int nodes) {
  std::mt19937_64 rng(42);
  std::vector<Node> out(nodes);
  for (int i = 0; i < nodes; ++i) {
    Node& n = out[i];
    n.name = "node-" + std::to_string(i);
    n.cpu_milli = 128000;
    n.requested_cpu_milli = static_cast<int64_t>(rng() % 96000);
    for (int g = 0; g < 8; ++g) {
      Device d;
      d.uuid = "GPU-" + std::to_string(i) + "-" + std::to_string(g);
      d.index = g;
      d.model = "NVIDIA A100-SXM4-80GB";
      d.capacity_mib = 81920;
      MiB left = 81920;
      int shares = static_cast<int>(rng() % 5);
      for (int s = 0; s < shares; ++s) {
        MiB mem = 5120 * static_cast<MiB>(1 + rng() % 8);
        if (mem > left) break;
        left -= mem;
        d.shares.push_back(DeviceShare{"u", "ns/p", "c", mem, false});
      }
      n.devices.push_back(std::move(d));
    }
  }
  return out;
}

// How many nodes ahead the scoring loops prefetch summaries (scheduler/extender/cluster_state.cc).
constexpr int kPrefetchAhead = 2;

TypicalWorkload ThirtySpecs() {
  TypicalWorkload w;
  for (int i = 0; i < 30; ++i) {
    TypicalSpec s;
    s.cpu_milli = 1000 * (1 + i % 16);
    s.device_count = i % 10 == 9 ? 2 : (i % 7 == 6 ? 0 : 1);
    s.mem_per_device_mib = i % 5 == 4 ? 0 : 2048 * (1 + i % 20);
    s.weight = 1.0 / (1 + i);
    w.specs.push_back(s);
  }
  return w;
}

// The same shapes naming compute shares of their own, unrelated to their memory (as learned from
// pods that ask for compute): the summaries then keep the two-dimensional tallies.
TypicalWorkload WithComputeShares(TypicalWorkload w) {
  for (size_t i = 0; i < w.specs.size(); ++i) {
    if (w.specs[i].mem_per_device_mib > 0) w.specs[i].compute_pct = 5 + static_cast<int>(i * 37 % 60);
  }
  return w;
}

PodRequest TheIncomingPod() {
  PodRequest p;
  p.ns = "ml";
  p.name = "infer";
  p.uid = "u";
  p.cpu_milli = 4000;
  p.containers.push_back(ContainerRequest{"main", 0, false, 1, 10240});
  return p;
}

CompletionValue CompletionFor(const TypicalWorkload& workload, const std::vector<Node>& cluster) {
  CompletionValue::Builder builder(workload, PlacementOptions{});
  for (const Node& n : cluster) builder.AddNode(n);
  return std::move(builder).Build();
}

void BM_FilterScore(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  std::vector<Node> cluster = MakeCluster(nodes);
  const bool complete = state.range(1) != 0;
  Policy policy(PolicyKind::kFgd, ThirtySpecs(), {}, {},
                complete ? CompletionFor(ThirtySpecs(), cluster) : CompletionValue());
  std::vector<NodeSummary> summaries;
  for (const auto& n : cluster) summaries.push_back(policy.Summarize(n));
  const PodRequest request = TheIncomingPod();
  const PreparedPod pod(request);  // once per pod, as the extender does
  long allocations = 0;
  int64_t iterations = 0;
  for (auto _ : state) {
    double best = 1e300;
    int feasible = 0;
    long before = g_allocations.load();
    for (int i = 0; i < nodes; ++i) {
      // As the extender does: the next nodes' summaries load while this one is scored.
      if (i + kPrefetchAhead < nodes) summaries[i + kPrefetchAhead].Prefetch();
      NodeScore e = policy.Score(cluster[i], summaries[i], pod);
      if (e.verdict.fits()) {
        ++feasible;
        best = std::min(best, e.cost);
      }
    }
    allocations += g_allocations.load() - before;
    ++iterations;
    benchmark::DoNotOptimize(best);
    benchmark::DoNotOptimize(feasible);
  }
  state.counters["allocs_per_node"] = static_cast<double>(allocations) / static_cast<double>(iterations * nodes);
  state.counters["ns_per_node"] = benchmark::Counter(
      static_cast<double>(nodes), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_FilterScore)
    ->Args({1000, 0})
    ->Args({5000, 0})
    ->Args({5000, 1})
    ->Args({20000, 0})
    ->Args({20000, 1})
    ->Unit(benchmark::kMicrosecond);

// The same pod asking for 30 % compute: every node is evaluated in two dimensions
// (placement/compute_cost.h), on the same cluster, whose shares reserve no compute.
void BM_FilterScoreWithCompute(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  std::vector<Node> cluster = MakeCluster(nodes);
  Policy policy(PolicyKind::kFgd, state.range(1) == 1 ? WithComputeShares(ThirtySpecs()) : ThirtySpecs(), {});
  std::vector<NodeSummary> summaries;
  for (const auto& n : cluster) summaries.push_back(policy.Summarize(n));
  PodRequest request = TheIncomingPod();
  request.containers[0].compute_pct = 30;
  const PreparedPod pod(request);
  for (auto _ : state) {
    double best = 1e300;
    for (int i = 0; i < nodes; ++i) {
      if (i + kPrefetchAhead < nodes) summaries[i + kPrefetchAhead].Prefetch();
      NodeScore e = policy.Score(cluster[i], summaries[i], pod);
      if (e.verdict.fits()) best = std::min(best, e.cost);
    }
    benchmark::DoNotOptimize(best);
  }
  state.counters["ns_per_node"] = benchmark::Counter(
      static_cast<double>(nodes), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_FilterScoreWithCompute)->Args({5000, 0})->Args({5000, 1})->Unit(benchmark::kMicrosecond);

void BM_FilterScoreColdSummaries(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  std::vector<Node> cluster = MakeCluster(nodes);
  Policy policy(PolicyKind::kFgd, ThirtySpecs(), {});
  const PodRequest request = TheIncomingPod();
  const PreparedPod pod(request);
  for (auto _ : state) {
    double best = 1e300;
    for (int i = 0; i < nodes; ++i) {
      NodeScore e = policy.Score(cluster[i], policy.Summarize(cluster[i]), pod);
      if (e.verdict.fits()) best = std::min(best, e.cost);
    }
    benchmark::DoNotOptimize(best);
  }
}
BENCHMARK(BM_FilterScoreColdSummaries)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);

// MakeCluster with one node in eight on T4 GPUs, and ThirtySpecs plus four shapes pinned to T4.
std::vector<Node> MakeMixedCluster(int nodes) {
  std::vector<Node> cluster = MakeCluster(nodes);
  for (int i = 0; i < nodes; i += 8) {
    for (Device& d : cluster[i].devices) d.model = "NVIDIA T4";
  }
  return cluster;
}
TypicalWorkload ThirtySpecsAndFourPinned() {
  TypicalWorkload w = ThirtySpecs();
  for (int i = 0; i < 4; ++i) {
    TypicalSpec s;
    s.cpu_milli = 2000 * (1 + i);
    s.device_count = 1;
    s.mem_per_device_mib = 4096 * (1 + i);
    s.gpu_models = {"T4"};
    s.weight = 0.02;
    w.specs.push_back(s);
  }
  w.Normalize();
  return w;
}

void BM_RefreshReservation(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  std::vector<Node> cluster = MakeMixedCluster(nodes);
  const TypicalWorkload workload = ThirtySpecsAndFourPinned();
  size_t reserving = 0;
  for (auto _ : state) {
    CapacityReservation::Builder builder(workload, PlacementOptions{});
    for (const Node& n : cluster) builder.AddNode(n);
    CapacityReservation reservation = std::move(builder).Build();
    reserving = reservation.reserving().size();
    benchmark::DoNotOptimize(reservation);
  }
  state.counters["reserving_host_sets"] = static_cast<double>(reserving);
}
BENCHMARK(BM_RefreshReservation)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);

void BM_RefreshSummaries(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  std::vector<Node> cluster = MakeMixedCluster(nodes);
  const TypicalWorkload workload =
      state.range(2) == 1 ? WithComputeShares(ThirtySpecsAndFourPinned()) : ThirtySpecsAndFourPinned();
  CapacityReservation reservation;
  if (state.range(1) != 0) {
    CapacityReservation::Builder builder(workload, PlacementOptions{});
    for (const Node& n : cluster) builder.AddNode(n);
    reservation = std::move(builder).Build();
  }
  Policy policy(PolicyKind::kFgd, workload, {}, reservation);
  std::vector<NodeSummary> summaries(cluster.size());
  for (auto _ : state) {
    for (size_t i = 0; i < cluster.size(); ++i) summaries[i] = policy.Summarize(cluster[i]);
    benchmark::DoNotOptimize(summaries.data());
  }
}
BENCHMARK(BM_RefreshSummaries)
    ->Args({5000, 0, 0})
    ->Args({5000, 1, 0})
    ->Args({5000, 0, 1})
    ->Unit(benchmark::kMicrosecond);

void BM_RefreshCompletion(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  std::vector<Node> cluster = MakeMixedCluster(nodes);
  for (int i = 0; i < nodes; i += 8) {
    for (Device& d : cluster[i].devices) d.capacity_mib = 24576;
  }
  const TypicalWorkload workload = ThirtySpecsAndFourPinned();
  size_t tables = 0, prices = 0;
  for (auto _ : state) {
    CompletionValue completion = CompletionFor(workload, cluster);
    tables = completion.tables().size();
    prices = completion.tables().back().prices.size();
    benchmark::DoNotOptimize(completion);
  }
  state.counters["tables"] = static_cast<double>(tables);
  state.counters["priced_slices_80g"] = static_cast<double>(prices);
}
BENCHMARK(BM_RefreshCompletion)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);

// Decision::Refresh over MakeMixedCluster(nodes), the device size configured: the reservation and
// the completion value built (the caller re-summarises the nodes; BM_RefreshSummaries). The
// learner has seen pods of 8–32 GiB and 1–8 cores, one of them pinned to the A100 and one asking
// for two whole GPUs: range(1) = 0, 300 of them, past the hedges' window, so the nodes are visited
// once, for the prices; 1, 10 of them, so the refresh also tallies the GPU models and the largest
// nodes, the blend holds the model hedge's shape for the T4, which no pod has named, and the
// whole-node hedge's shape, and the ranking puts fewer GPUs first.
void BM_DecisionRefresh(benchmark::State& state) {
  const std::vector<Node> cluster = MakeMixedCluster(static_cast<int>(state.range(0)));
  DecisionOptions options;
  options.device_mib = 81920;
  Decision decision(PolicyKind::kFgd, PlacementOptions{}, options);
  const int pods = state.range(1) == 0 ? 300 : 10;
  for (int i = 0; i < pods; ++i) {
    PodRequest pod;
    pod.uid = "u" + std::to_string(i);
    pod.cpu_milli = 1000 * (1 + i % 8);
    pod.containers.push_back(
        ContainerRequest{.name = "c", .device_count = 1, .mem_per_device_mib = 8192 * (1 + i % 4)});
    if (i == 3) pod.gpu_models = {"A100"};
    if (i == 5) pod.containers.back() = ContainerRequest{.name = "c", .device_count = 2, .mem_per_device_mib = 0};
    decision.Observe(pod);
  }
  const auto each = [&](const std::function<void(const Node&)>& visit) {
    for (const Node& n : cluster) visit(n);
  };
  size_t shapes = 0;
  for (auto _ : state) {
    Policy policy = decision.Refresh(each);
    shapes = policy.workload().specs.size();
    benchmark::DoNotOptimize(policy);
  }
  state.counters["typical_shapes"] = static_cast<double>(shapes);
}
BENCHMARK(BM_DecisionRefresh)->Args({5000, 0})->Args({5000, 1})->Unit(benchmark::kMicrosecond);

// The fractional shapes of the Alibaba default trace (gpu_milli: pods) on one device of
// `capacity_mib`, asking gpu_milli / 1000 of it rounded down to the MiB, as the device matrix
// does (bench/sim/device_matrix.cc): sizes that share no factor on most capacities.
TypicalWorkload TraceShapes(MiB capacity_mib) {
  const std::pair<int, int> milli_pods[] = {{810, 1078}, {470, 750}, {320, 328}, {650, 253}, {230, 140},
                                            {460, 128},  {590, 75},  {160, 74},  {550, 72},  {220, 62},
                                            {370, 47},   {110, 24},  {480, 19},  {50, 7},    {330, 7},
                                            {350, 6},    {270, 4},   {440, 2},   {140, 1},   {290, 1}};
  TypicalWorkload w;
  for (const auto& [milli, pods] : milli_pods) {
    TypicalSpec s;
    s.cpu_milli = 4000;
    s.device_count = 1;
    s.mem_per_device_mib = milli * capacity_mib / 1000;
    s.weight = pods;
    w.specs.push_back(s);
  }
  w.Normalize();
  return w;
}

// 64 shapes of 0.2–5 % of the device at unrelated sizes: fillings reach almost every MiB, so the
// exact knapsack runs past its bound and the table is built on the grid (completion.h).
TypicalWorkload ManySmallShapes(MiB capacity_mib) {
  std::mt19937_64 rng(7);
  TypicalWorkload w;
  for (int i = 0; i < 64; ++i) {
    TypicalSpec s;
    s.cpu_milli = 1000;
    s.device_count = 1;
    s.mem_per_device_mib = capacity_mib / 500 + static_cast<MiB>(rng() % static_cast<uint64_t>(capacity_mib / 21));
    s.weight = 1.0 + static_cast<double>(rng() % 100);
    w.specs.push_back(s);
  }
  w.Normalize();
  return w;
}

// One table: BM_RefreshCompletionShapes/<capacity MiB>/<0: trace shapes, 1: many small shapes>.
void BM_RefreshCompletionShapes(benchmark::State& state) {
  const MiB capacity = state.range(0);
  const TypicalWorkload workload = state.range(1) == 0 ? TraceShapes(capacity) : ManySmallShapes(capacity);
  size_t steps = 0;
  MiB quantum = 0;
  for (auto _ : state) {
    CompletionValue completion = CompletionValue::Build(workload, {capacity});
    steps = completion.tables()[0].step_mib.size();
    quantum = completion.tables()[0].quantum_mib;
    benchmark::DoNotOptimize(completion);
  }
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["quantum_mib"] = static_cast<double>(quantum);
}
BENCHMARK(BM_RefreshCompletionShapes)
    ->Args({16000, 0})
    ->Args({9728, 0})
    ->Args({24576, 0})
    ->Args({81920, 0})
    ->Args({144384, 0})
    ->Args({144384, 1})
    ->Unit(benchmark::kMicrosecond);

// The learner's snapshot with the histogram full (4 × kMaxTypicalSpecs shapes, whole-GPU pods of
// as many CPU sizes, as the Alibaba trace's are) and the cold-start prior: the extender takes one
// per pod it first sees once a refresh could be due (Decision::Observe), on the filter's path.
void BM_LearnerSnapshot(benchmark::State& state) {
  WorkloadLearner learner(DefaultPriorWorkload(81920), 1000, 100, 360, 0.95);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 4 * kMaxTypicalSpecs; ++i) {
    PodRequest pod;
    pod.cpu_milli = 1000 + 100 * i;
    pod.containers.push_back(ContainerRequest{.name = "c", .device_count = 1});
    for (int k = 0, copies = static_cast<int>(rng() % 8); k <= copies; ++k) learner.Observe(pod);
  }
  const long before = g_allocations.load();
  for (auto _ : state) benchmark::DoNotOptimize(learner.Snapshot());
  state.counters["allocs"] =
      static_cast<double>(g_allocations.load() - before) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_LearnerSnapshot)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpupack::placement

BENCHMARK_MAIN();

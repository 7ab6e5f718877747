// The defragmentation planner (placement/defrag.h) on a cluster of N nodes × 8 80 GiB GPUs where
// every device holds 2–4 pods of 8–24 GiB and no device has 48 GiB free, for a 48 GiB pod that
// therefore fits nowhere; a third of the pods are movable. BM_PlanDefragmentation/<nodes>/<homes>:
// with homes = 1 the other devices keep 8–32 GiB free, so the cheapest plan's moved pod fits
// again at once (what a fragmented cluster looks like); with homes = 0 every device is filled
// to within 4 GiB after the planner's pod would go, so no moved pod fits anywhere and the planner
// spends its whole simulation budget (the bound on its time). Default DefragOptions throughout.
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "placement/defrag.h"
#include "placement/placement.h"

namespace gpupack::placement {
namespace {

struct Cluster {
  std::vector<Node> nodes;
  std::deque<PodRequest> pods;
  std::vector<MovablePod> movable;
};

Cluster MakeCluster(int node_count, bool homes) {
  std::mt19937_64 rng(7);
  Cluster c;
  c.nodes.resize(node_count);
  for (int i = 0; i < node_count; ++i) {
    Node& n = c.nodes[i];
    n.name = "node-" + std::to_string(i);
    for (int g = 0; g < 8; ++g) {
      Device d;
      d.uuid = "GPU-" + std::to_string(i) + "-" + std::to_string(g);
      d.index = g;
      d.model = "NVIDIA A100-SXM4-80GB";
      d.capacity_mib = 81920;
      // Free after the fill: 8–32 GiB with homes, under 8 GiB without.
      const MiB keep = homes ? 8192 * static_cast<MiB>(1 + rng() % 4) : 4096;
      MiB left = 81920 - keep;
      while (left >= 8192) {
        MiB mem = std::min<MiB>(left, 8192 * static_cast<MiB>(1 + rng() % 3));
        PodRequest& p = c.pods.emplace_back();
        p.ns = "ml";
        p.name = "p-" + std::to_string(c.pods.size());
        p.uid = "u-" + std::to_string(c.pods.size());
        p.containers.push_back(ContainerRequest{"main", 0, false, 1, mem});
        DeviceShare share;
        share.pod_uid = p.uid;
        share.pod_key = p.Key();
        share.container = "main";
        share.mem_mib = mem;
        d.shares.push_back(std::move(share));
        if (rng() % 3 == 0) c.movable.push_back(MovablePod{&p, i});
        left -= mem;
      }
      n.devices.push_back(std::move(d));
    }
  }
  return c;
}

void BM_PlanDefragmentation(benchmark::State& state) {
  const int node_count = static_cast<int>(state.range(0));
  const bool homes = state.range(1) != 0;
  Cluster c = MakeCluster(node_count, homes);
  TypicalWorkload w;
  for (MiB mem : {8192, 16384, 24576, 49152}) {
    TypicalSpec spec;
    spec.device_count = 1;
    spec.mem_per_device_mib = mem;
    spec.weight = 0.25;
    w.specs.push_back(spec);
  }
  const Policy policy(PolicyKind::kFgd, w, {});
  std::vector<NodeSummary> summaries;
  for (const Node& n : c.nodes) summaries.push_back(policy.Summarize(n));
  PodRequest pending;
  pending.ns = "ml";
  pending.name = "train";
  pending.uid = "u-train";
  pending.containers.push_back(ContainerRequest{"main", 0, false, 1, 49152});
  DefragResult r;
  for (auto _ : state) {
    r = PlanDefragmentation(policy, c.nodes, summaries, pending, c.movable);
    benchmark::DoNotOptimize(r);
  }
  state.counters["planned"] = r.outcome == DefragOutcome::kPlanned ? 1 : 0;
  state.counters["moves"] = static_cast<double>(r.plan.moves.size());
  state.counters["nodes_with_room"] = r.nodes_with_room;
  state.counters["sets_that_fit"] = r.sets_that_fit;
  state.counters["sets_simulated"] = r.sets_simulated;
}
BENCHMARK(BM_PlanDefragmentation)
    ->Args({1000, 1})
    ->Args({5000, 1})
    ->Args({1000, 0})
    ->Args({5000, 0})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpupack::placement

BENCHMARK_MAIN();

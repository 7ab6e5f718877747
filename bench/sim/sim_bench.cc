// Replay speed of gpupack-sim: one seed of the FGD paper's default trace (1,213 nodes, ~10.8k pods
// after inflation to 130 %) per policy, and a synthetic 2,000-node cluster for scale.
// The trace folder comes from GPUPACK_TRACE_DIR (environment, else the CMake default); without it
// the trace cases report an error and the synthetic ones still run.
// Goal: ≤ 15 s per seed of the default trace on a 2-core machine.
#include <cstdlib>
#include <string>

#include <benchmark/benchmark.h>

#include "sim/inputs.h"
#include "sim/policy.h"
#include "sim/replay.h"

namespace gpupack::sim {
namespace {

std::string TraceDir() {
  const char* env = std::getenv("GPUPACK_TRACE_DIR");
  return env != nullptr ? env : GPUPACK_TRACE_DIR;
}

void ReplayOneSeed(benchmark::State& state, const Replayer& replayer, const std::string& policy) {
  double seconds = 0;
  int pods = 0;
  uint64_t seed = 42;
  for (auto _ : state) {
    auto p = MakePolicy(policy, replayer.typical());
    auto run = replayer.RunSeed(**p, seed++);
    if (!run.ok()) {
      state.SkipWithError(run.status().ToString().c_str());
      return;
    }
    pods += run->pods;
    seconds += run->seconds;
  }
  state.counters["pods_per_seed"] = static_cast<double>(pods) / static_cast<double>(state.iterations());
  state.counters["us_per_pod"] = pods > 0 ? seconds * 1e6 / pods : 0;
}

const Replayer* DefaultTrace() {
  static const StatusOr<Replayer>* replayer = [] {
    const std::string dir = TraceDir();
    auto nodes = LoadCluster(dir + "/openb_node_list_gpu_node.csv");
    auto pods = LoadWorkload(dir + "/openb_pod_list_default.csv");
    if (!nodes.ok()) return new StatusOr<Replayer>(nodes.status());
    if (!pods.ok()) return new StatusOr<Replayer>(pods.status());
    return new StatusOr<Replayer>(Replayer::Create(std::move(*nodes), std::move(*pods), ReplayOptions{}));
  }();
  return replayer->ok() ? &**replayer : nullptr;
}

// A synthetic cluster: `nodes` 8-GPU nodes of 1000 MiB GPUs and a trace-like pod mix.
const Replayer* Synthetic(int nodes) {
  std::vector<model::Node> cluster;
  for (int i = 0; i < nodes; ++i) {
    model::Node n;
    n.name = std::string("node-").append(std::to_string(i));
    n.cpu_milli = 96000;
    n.memory_bytes = int64_t{384} << 30;
    for (int g = 0; g < 8; ++g) {
      model::Device d;
      d.uuid = n.name + std::string("-").append(std::to_string(g));
      d.index = g;
      d.model = "G2";
      d.capacity_mib = kTraceGpuMiB;
      n.devices.push_back(d);
    }
    cluster.push_back(std::move(n));
  }
  static const int kShares[] = {810, 470, 320, 650, 1000, 1000, 1000, 0};
  std::vector<model::PodRequest> pods;
  for (int i = 0; i < nodes * 8; ++i) {
    model::PodRequest p;
    p.ns = "default";
    p.name = std::string("pod-").append(std::to_string(i));
    p.uid = p.name;
    p.cpu_milli = 4000 + (i % 5) * 2000;
    const int share = kShares[i % 8];
    if (share > 0) {
      model::ContainerRequest c;
      c.name = "main";
      c.device_count = 1;
      c.mem_per_device_mib = share == 1000 ? 0 : share;
      p.containers.push_back(c);
    }
    pods.push_back(std::move(p));
  }
  auto r = Replayer::Create(std::move(cluster), std::move(pods), ReplayOptions{});
  return r.ok() ? new Replayer(std::move(*r)) : nullptr;
}

void BM_ReplayDefaultTrace(benchmark::State& state, const std::string& policy) {
  const Replayer* r = DefaultTrace();
  if (r == nullptr) {
    state.SkipWithError(("trace not found under " + TraceDir()).c_str());
    for (auto _ : state) {
    }
    return;
  }
  ReplayOneSeed(state, *r, policy);
}

void BM_ReplaySynthetic(benchmark::State& state, const std::string& policy) {
  static const Replayer* r = Synthetic(2000);
  ReplayOneSeed(state, *r, policy);
}

}  // namespace
}  // namespace gpupack::sim

int main(int argc, char** argv) {
  using namespace gpupack::sim;
  // Scale in the name: nodes of the cluster.
  for (const char* policy : {"gpupack", "fgd", "bestfit", "random"}) {
    benchmark::RegisterBenchmark((std::string("BM_ReplayDefaultTrace_") + policy + "/1213").c_str(),
                                 BM_ReplayDefaultTrace, std::string(policy))
        ->Unit(benchmark::kSecond)
        ->Iterations(1);
  }
  for (const char* policy : {"gpupack", "fgd"}) {
    benchmark::RegisterBenchmark((std::string("BM_ReplaySynthetic_") + policy + "/2000").c_str(), BM_ReplaySynthetic,
                                 std::string(policy))
        ->Unit(benchmark::kSecond)
        ->Iterations(1);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

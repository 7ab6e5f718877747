// One decision, two paths: the same arrivals replayed in process (policy gpupack) and through a
// real standalone gpupack-extender over HTTP (started here with no config file, port 0; the
// client plays kube-scheduler: its own CPU/memory fit, filter, prioritize with random ties, bind)
// must get the same node, pod by pod, and the same devices: the extender's per-device allocation
// (its /metrics) is compared with the in-process one every `checkpoint_every` pods and at the end.
//
// Label unit (ExampleGivesIdenticalDecisions: the shipped example, every pod) and slow
// (DefaultTraceGivesIdenticalDecisions: the Alibaba default trace, 10.8k pods, devices every 50).
#include <httplib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/extender_policy.h"
#include "sim/extender_process.h"
#include "sim/inputs.h"
#include "sim/policy.h"
#include "sim/replay.h"

namespace gpupack::sim {
namespace {

// Device UUID → allocated MiB.
using Allocation = std::map<std::string, int64_t>;

// The extender's per-device allocation, from gpupack_gpu_memory_allocated_bytes.
Allocation ScrapeAllocation(httplib::Client& client) {
  Allocation out;
  auto res = client.Get("/metrics");
  if (!res || res->status != 200) return out;
  const std::string prefix = "gpupack_gpu_memory_allocated_bytes{";
  size_t at = 0;
  while ((at = res->body.find(prefix, at)) != std::string::npos) {
    const size_t end = res->body.find('\n', at);
    const std::string line = res->body.substr(at, end - at);
    at = end;
    const size_t uuid = line.find("gpu_uuid=\"");
    const size_t close = line.rfind('}');
    if (uuid == std::string::npos || close == std::string::npos) continue;
    const size_t uuid_end = line.find('"', uuid + 10);
    const double bytes = std::strtod(line.c_str() + close + 1, nullptr);
    const auto mib = static_cast<int64_t>(bytes / (1024.0 * 1024.0) + 0.5);
    if (mib != 0) out[line.substr(uuid + 10, uuid_end - uuid - 10)] = mib;
  }
  return out;
}

// What a replay decided for one pod: the node (-1: failed) and the device slots.
struct PodDecision {
  std::string pod;
  int node = -1;
  std::vector<int> slots;
  bool operator==(const PodDecision&) const = default;
};

// Wraps a policy, records every decision and the per-device allocation it implies, and calls
// `checkpoint(pods so far, allocation)` before every `every`-th pod.
class Recorder final : public SimPolicy {
 public:
  using Checkpoint = std::function<void(size_t, const Allocation&)>;
  Recorder(SimPolicy& inner, size_t every, Checkpoint checkpoint)
      : inner_(inner), every_(every), checkpoint_(std::move(checkpoint)) {}

  Status Start(const ClusterState& s, const std::vector<model::Node>& nodes, std::span<const int> rank) override {
    nodes_ = &nodes;
    return inner_.Start(s, nodes, rank);
  }
  StatusOr<std::optional<Choice>> Choose(const ClusterState& s, const SimPod& pod, Rng& rng) override {
    if (decisions_.size() % every_ == 0) checkpoint_(decisions_.size(), allocation_);
    StatusOr<std::optional<Choice>> choice = inner_.Choose(s, pod, rng);
    decisions_.push_back(PodDecision{pod.name, -1, {}});
    return choice;
  }
  void Committed(const SimPod& pod, const Choice& choice) override {
    inner_.Committed(pod, choice);
    decisions_.back().node = choice.node;
    decisions_.back().slots = choice.slots;
    for (int slot : choice.slots) {
      const model::Device& device = (*nodes_)[choice.node].devices[slot];
      allocation_[device.uuid] += pod.demand.whole() ? device.capacity_mib : pod.demand.mem_per_device;
    }
  }
  void Finish() { checkpoint_(decisions_.size(), allocation_); }
  const std::vector<PodDecision>& decisions() const { return decisions_; }

 private:
  SimPolicy& inner_;
  size_t every_;
  Checkpoint checkpoint_;
  const std::vector<model::Node>* nodes_ = nullptr;
  std::vector<PodDecision> decisions_;
  Allocation allocation_;
};

std::string Describe(const PodDecision& d, const std::vector<model::Node>& nodes) {
  std::string out = d.pod + " → " + (d.node < 0 ? "(failed)" : nodes[d.node].name) + " [";
  for (int s : d.slots) out += std::to_string(s) + " ";
  return out + "]";
}

void ExpectIdenticalDecisions(const std::string& cluster_path, const std::string& workload_path, uint64_t seed,
                              size_t checkpoint_every) {
  auto nodes = LoadCluster(cluster_path);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  auto pods = LoadWorkload(workload_path);
  ASSERT_TRUE(pods.ok()) << pods.status();
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) /
                                    ("decision_http_" + std::to_string(getpid()) + "_" + std::to_string(seed));
  std::filesystem::create_directories(dir);
  const std::string cluster_file = (dir / "cluster.yaml").string();
  std::ofstream(cluster_file) << ClusterYaml(*nodes);
  auto replayer = Replayer::Create(std::move(*nodes), std::move(*pods), ReplayOptions{});
  ASSERT_TRUE(replayer.ok()) << replayer.status();

  // In process: the decisions and the allocation at every checkpoint.
  auto local = MakePolicy("gpupack", replayer->typical());
  ASSERT_TRUE(local.ok());
  std::vector<Allocation> expected;
  Recorder local_recorder(**local, checkpoint_every, [&](size_t, const Allocation& a) { expected.push_back(a); });
  ASSERT_TRUE(replayer->RunSeed(local_recorder, seed).ok());
  local_recorder.Finish();

  // Over HTTP, through a fresh extender with default settings.
  StatusOr<ExtenderProcess> extender =
      ExtenderProcess::Start(GPUPACK_EXTENDER_BIN, cluster_file, (dir / "extender.log").string());
  ASSERT_TRUE(extender.ok()) << extender.status();
  httplib::Client scrape(extender->url());
  auto http = MakeExtenderPolicy(extender->url(), 1);
  ASSERT_TRUE(http.ok());
  size_t checkpoints = 0, first_device_mismatch = SIZE_MAX;
  Recorder http_recorder(**http, checkpoint_every, [&](size_t pods_so_far, const Allocation&) {
    const Allocation got = ScrapeAllocation(scrape);
    if (checkpoints < expected.size() && got != expected[checkpoints] && first_device_mismatch == SIZE_MAX) {
      first_device_mismatch = pods_so_far;
    }
    ++checkpoints;
  });
  StatusOr<SeedRun> run = replayer->RunSeed(http_recorder, seed);
  ASSERT_TRUE(run.ok()) << run.status();
  http_recorder.Finish();

  const std::vector<PodDecision>& want = local_recorder.decisions();
  const std::vector<PodDecision>& got = http_recorder.decisions();
  ASSERT_EQ(got.size(), want.size());
  size_t placed = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].node, want[i].node) << "pod " << i << ": in process " << Describe(want[i], replayer->nodes())
                                         << ", over HTTP " << Describe(got[i], replayer->nodes());
    placed += want[i].node >= 0;
  }
  EXPECT_GT(placed, want.size() / 2);
  EXPECT_EQ(checkpoints, expected.size());
  EXPECT_EQ(first_device_mismatch, SIZE_MAX)
      << "the extender's devices differ from the in-process ones after " << first_device_mismatch << " pods";
  // Every checkpoint must have seen something once the cluster fills (the scrape works).
  EXPECT_FALSE(expected.back().empty());
}

TEST(DecisionHttp, ExampleGivesIdenticalDecisions) {
  for (uint64_t seed : {42, 43}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ExpectIdenticalDecisions(GPUPACK_SOURCE_DIR "/examples/cluster.yaml", GPUPACK_SOURCE_DIR "/examples/workload.yaml",
                             seed, 1);
  }
}

std::string TraceDir() {
  const char* env = std::getenv("GPUPACK_TRACE_DIR");
  return env != nullptr ? env : GPUPACK_TRACE_DIR;
}

TEST(DecisionHttpSlow, DefaultTraceGivesIdenticalDecisions) {
  const std::string dir = TraceDir();
  ExpectIdenticalDecisions(dir + "/openb_node_list_gpu_node.csv", dir + "/openb_pod_list_default.csv", 42, 50);
}

}  // namespace
}  // namespace gpupack::sim

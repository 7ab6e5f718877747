// The fragmentation benchmark on the real Alibaba trace (label: slow, ~10 s): two seeds of the
// default trace must land the fgd baseline near the FGD paper's 4.77 % unallocated GPUs at
// arrived 100 % (the artifact's results, docs/simulator.md; our RNG differs from Go's, so ±0.6 pp), and
// bestfit near 7.09 %. It needs only the two files the repository ships
// (data/traces/alibaba-gpu-v2023); GPUPACK_TRACE_DIR, when set, points it at a fuller copy.
#include <cstdlib>
#include <iostream>
#include <string>

#include <gtest/gtest.h>

#include "sim/inputs.h"
#include "sim/policy.h"
#include "sim/replay.h"

namespace gpupack::sim {
namespace {

std::string TraceDir() {
  const char* env = std::getenv("GPUPACK_TRACE_DIR");
  return env != nullptr ? env : GPUPACK_TRACE_DIR;
}

TEST(AlibabaTrace, BaselinesReproduceThePaperAtArrived100) {
  const std::string dir = TraceDir();
  std::cout << "trace: openb_node_list_gpu_node.csv and openb_pod_list_default.csv from " << dir << "\n";
  auto nodes = LoadCluster(dir + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status()
                          << " (the repository ships it in data/traces/alibaba-gpu-v2023; GPUPACK_TRACE_DIR overrides)";
  EXPECT_EQ(nodes->size(), 1213u);
  auto pods = LoadWorkload(dir + "/openb_pod_list_default.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ(pods->size(), 8152u);
  auto replayer = Replayer::Create(std::move(*nodes), std::move(*pods), ReplayOptions{});
  ASSERT_TRUE(replayer.ok()) << replayer.status();
  EXPECT_EQ(replayer->capacity_mib(), 6212 * 1000);
  // FGD's typical set (GetTypicalPods): 35 of the 91 distinct specs cover 95 % of the pods.
  EXPECT_EQ(replayer->typical().specs.size(), 35u);

  struct Expect {
    const char* policy;
    double paper;
  };
  for (const Expect& e : {Expect{"fgd", 4.77}, Expect{"bestfit", 7.09}}) {
    auto run = replayer->Run(e.policy, [&]() { return MakePolicy(e.policy, replayer->typical()); }, {42, 43});
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_GT(run->curve.size(), 125u) << e.policy;  // inflation to 130 %
    // ≈ 10.8k pods after inflation.
    EXPECT_NEAR(run->seeds[0].pods, 10800, 300) << e.policy;
    const double at100 = run->curve[100].unallocated_pct.median;
    EXPECT_NEAR(at100, e.paper, 0.6) << e.policy;
    // Before the cluster fills every policy tracks the ideal line: 20 % unallocated at 80 %.
    EXPECT_NEAR(run->curve[80].unallocated_pct.median, 20, 0.3) << e.policy;
  }
}

}  // namespace
}  // namespace gpupack::sim

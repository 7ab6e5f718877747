// Observed use to a recommendation, end to end (docs/recommendations.md): the real gpupack-agent
// on the fake NVML library, whose process usage the test drives over time through its usageFile;
// the agent's GPUNode status carries the container's peak and percentiles; the real extender keeps
// them per owning workload (a Deployment, read back from its ReplicaSet) and answers
// `gpupack-extender recommend` with the right-sizing.
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "api/annotations.h"
#include "api/gpunode.h"
#include "api/recommendation.h"
#include "e2e/harness.h"
#include "testing/eventually.h"

namespace gpupack::e2e {
namespace {

using builders::Eventually;
constexpr std::chrono::seconds kAgentLoops(40);

constexpr char kOneGpuNode[] = R"(nodes:
  - name: gpu-1
    gpus:
      - {model: NVIDIA H100 80GB HBM3, memory: 80Gi, count: 1}
)";
const std::string kContainer(64, 'e');

void WriteUsage(const std::string& path, model::MiB used) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << Json{{"100", used}}.dump();
  std::rename(tmp.c_str(), path.c_str());  // whole, so the library never reads half a file
}

TEST(RecommendScenario, FakeUsageOverTimeBecomesTheWorkloadsRecommendation) {
  auto made = Cluster::Create("FakeUsageOverTimeBecomesTheWorkloadsRecommendation", kOneGpuNode, DefaultBinaries());
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<Cluster> cluster = std::move(made).value();
  if (cluster->server() == nullptr)
    GTEST_SKIP() << "a pod that runs without a kubelet needs the in-tree API server, not GPUPACK_E2E_KUBECONFIG";

  // A pod of Deployment "web" (through its ReplicaSet), asking 8 GiB.
  auto owned = [](const Json& pod) -> StatusOr<Json> {
    Json p = pod;
    p["metadata"]["labels"]["pod-template-hash"] = "7d9f8c6b5";
    p["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", "apps/v1"},
                                                     {"kind", "ReplicaSet"},
                                                     {"name", "web-7d9f8c6b5"},
                                                     {"uid", "rs-1"},
                                                     {"controller", true}}});
    return p;
  };
  auto pod = cluster->CreatePod("web-7d9f8c6b5-x1", "8Gi", 1, {}, owned);
  ASSERT_TRUE(pod.ok()) << pod.status();
  ASSERT_TRUE(cluster->PlaceProcess("gpu-1", 100, (*pod)["metadata"]["uid"], kContainer).ok());

  const std::string usage = ::testing::TempDir() + "/recommend-usage.json";
  WriteUsage(usage, 1000);
  const Json nvml = {{"driverVersion", "580.65.06"},
                     {"usageFile", usage},
                     {"devices", Json::array({{{"uuid", "GPU-e2e-0"},
                                               {"name", "NVIDIA H100 80GB HBM3"},
                                               {"memoryMiB", 81920},
                                               {"processes", Json::array({{{"pid", 100}, {"usedMiB", 1000}}})}}})}};
  auto agent = cluster->StartNvmlAgent("gpu-1", nvml);
  ASSERT_TRUE(agent.ok()) << agent.status();
  // Few samples suffice here (the agent passes every second); the default asks 30.
  auto ext = cluster->StartExtender("rightsizing: {minSamples: 6}\n");
  ASSERT_TRUE(ext.ok()) << ext.status();
  FakeKubeScheduler sched(*cluster);
  sched.SetExtender(ext->url);
  ASSERT_EQ(sched.Schedule({*pod}).bound.size(), 1u);
  ASSERT_TRUE(cluster->MarkRunning("web-7d9f8c6b5-x1", kContainer).ok());

  // Usage over time: 1000 MiB, then a climb to the 5.2 GiB peak (5325 MiB), then 5000. Each value
  // is held until the GPUNode shows a sample of it.
  auto reported = [&]() -> std::optional<api::GpuNodeContainerUsage> {
    auto g = cluster->api().GetGpuNode("gpu-1");
    if (!g.ok()) return std::nullopt;
    auto s = api::GpuNodeStatusFromJson((*g)["status"]);
    if (!s.ok() || s->usage.size() != 1) return std::nullopt;
    return s->usage[0];
  };
  int64_t samples_before = 0;
  for (model::MiB used : {1000, 3000, 5325, 5000, 5000, 5000}) {
    WriteUsage(usage, used);
    ASSERT_TRUE(Eventually(
        [&] {
          auto u = reported();
          return u && u->samples > samples_before + 1 && u->peak_mib >= used;  // a pass after the write
        },
        kAgentLoops))
        << "the GPUNode never showed " << used << " MiB";
    samples_before = reported()->samples;
  }
  const api::GpuNodeContainerUsage u = *reported();
  EXPECT_EQ(u.workload_kind, "Deployment");
  EXPECT_EQ(u.workload_name, "web");
  EXPECT_EQ(u.peak_mib, 5325);
  EXPECT_EQ(u.cap_mib, 8192);
  EXPECT_EQ(u.device_memory_mib, 81920);

  // The command a platform engineer runs, against the extender.
  const std::string out = ::testing::TempDir() + "/recommend.out";
  auto fetch = [&]() -> std::optional<api::WorkloadRecommendation> {
    const std::string cmd = DefaultBinaries().extender + " recommend --json --extender " + ext->url + " > " + out;
    if (std::system(cmd.c_str()) != 0) return std::nullopt;
    std::ifstream in(out);
    auto report = api::RecommendationReportFromJson(Json::parse(in, nullptr, false));
    if (!report.ok() || report->recommendations.size() != 1) return std::nullopt;
    return report->recommendations[0];
  };
  std::optional<api::WorkloadRecommendation> r;
  ASSERT_TRUE(Eventually(
      [&] {
        r = fetch();
        return r && r->verdict == "shrink" && r->peak_mib == 5325;
      },
      kAgentLoops))
      << "no shrink recommendation for web";
  EXPECT_EQ(r->ns, cluster->ns());
  EXPECT_EQ(r->workload_kind, "Deployment");
  EXPECT_EQ(r->workload_name, "web");
  EXPECT_EQ(r->request_mib, 8192);
  // p99 of the samples is the peak's bucket capped at the peak (fewer than 100 samples: the
  // largest), 5325; guaranteed 5325 × 1.1 = 5858 → 13 per 80 GiB device → 6144, ceiling the same.
  EXPECT_EQ(r->p99_mib, 5325);
  EXPECT_EQ(r->guaranteed_mib, 6144);
  EXPECT_EQ(r->ceiling_mib, 6144);
  EXPECT_EQ(r->fit_now, 10);
  EXPECT_EQ(r->fit_recommended, 13);
  // Advice only: the pod keeps its allocation.
  auto after = cluster->api().GetPod(cluster->ns(), "web-7d9f8c6b5-x1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(
      (*after)["metadata"]["annotations"][api::ContainerAnnotationKey(false, 0, api::ContainerEnvKey::kMemoryLimitMiB)],
      "8192");
}

}  // namespace
}  // namespace gpupack::e2e

// The agent catches what slipped through, end to end: the real gpupack-agent on the NVML backend
// with the fake driver library the tests build (agent/testing/fake_nvml.cc) and a /proc of its
// own, so the processes the library lists map to pods through their cgroup files as on a node;
// the in-tree API test server answers the evictions (docs/e2e.md).
#include <gtest/gtest.h>

#include "api/annotations.h"
#include "api/gpunode.h"
#include "e2e/harness.h"
#include "testing/eventually.h"

namespace gpupack::e2e {
namespace {

using builders::Eventually;
// The agent audits and evicts on its own intervals: waits on them get longer than the default.
constexpr std::chrono::seconds kAgentLoops(30);

// One node of two whole GPUs for the agent on the fake NVML library.
constexpr char kTwoGpuNode[] = R"(nodes:
  - name: gpu-1
    gpus:
      - {model: NVIDIA H100 80GB HBM3, memory: 80Gi, count: 2}
)";
constexpr char kHeld[] = "GPU-e2e-held";  // where the gpupack pod is placed
constexpr char kIdle[] = "GPU-e2e-idle";  // no gpupack allocation
const std::string kStrayContainer(64, 'f');
const std::string kGpupackContainer(64, 'e');

// The fake NVML state: both GPUs, with `processes` (device → [{pid, usedMiB}]).
Json TwoGpus(const std::map<std::string, Json>& processes) {
  Json devices = Json::array();
  for (const char* uuid : {kHeld, kIdle}) {
    Json d = {{"uuid", uuid}, {"name", "NVIDIA H100 80GB HBM3"}, {"memoryMiB", 81559}, {"usedMiB", 0}};
    auto it = processes.find(uuid);
    if (it != processes.end()) {
      d["processes"] = it->second;
      for (const Json& p : it->second) d["usedMiB"] = d["usedMiB"].get<int64_t>() + p["usedMiB"].get<int64_t>();
    }
    devices.push_back(d);
  }
  return {{"driverVersion", "580.65.06"}, {"devices", devices}};
}

// The agent catches what slipped through: a pod without gpupack resources whose process uses a GPU
// that holds no allocation (on a node where a gpupack pod holds the other GPU) is reported with its
// pod, a host process on that GPU is reported as not in a pod, the gpupack pod's own process is
// not reported, and with the policy on the stray pod is evicted through the Eviction API, once.
class ForeignProcessScenario : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = Cluster::Create(::testing::UnitTest::GetInstance()->current_test_info()->name(), kTwoGpuNode,
                             DefaultBinaries());
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(c).value();
    if (cluster_->server() == nullptr)
      GTEST_SKIP() << "pods that run without a kubelet need the in-tree API server, not GPUPACK_E2E_KUBECONFIG";
  }
  // Events on pod `name`, by reason.
  std::vector<std::string> EventReasons(const std::string& name) {
    std::vector<std::string> reasons;
    auto events = cluster_->api().List(kube::EventsResource(), cluster_->ns());
    EXPECT_TRUE(events.ok()) << events.status();
    if (!events.ok()) return reasons;
    for (const Json& e : events->items) {
      if (kube::StringAt(e, {"involvedObject", "name"}) == name) reasons.push_back(e.value("reason", ""));
    }
    return reasons;
  }
  std::vector<api::GpuNodeAuditFinding> Audit() {
    auto g = cluster_->api().GetGpuNode("gpu-1");
    if (!g.ok()) return {};
    auto s = api::GpuNodeStatusFromJson((*g)["status"]);
    return s.ok() ? s->audit : std::vector<api::GpuNodeAuditFinding>{};
  }
  std::unique_ptr<Cluster> cluster_;
  std::string Metrics(const std::string& url) {
    StatusOr<std::string> text = GetText(url, "/metrics");
    return text.ok() ? *text : "";
  }
};

TEST_F(ForeignProcessScenario, StrayOnAnIdleDeviceIsReportedWithItsPodAndEvicted) {
  // The gpupack pod, pinned to kHeld, and the stray, a pod without gpupack resources.
  auto gpupack = cluster_->CreatePod("train", "8Gi", 1, {{std::string(api::kAnnotationGpuUuids), kHeld}});
  ASSERT_TRUE(gpupack.ok()) << gpupack.status();
  auto stray = cluster_->CreateRunningPod("stray", "gpu-1", kStrayContainer);
  ASSERT_TRUE(stray.ok()) << stray.status();
  const std::string stray_uid = (*stray)["metadata"]["uid"];
  ASSERT_TRUE(cluster_->PlaceProcess("gpu-1", 100, (*gpupack)["metadata"]["uid"], kGpupackContainer).ok());
  ASSERT_TRUE(cluster_->PlaceProcess("gpu-1", 200, stray_uid, kStrayContainer).ok());
  ASSERT_TRUE(cluster_->PlaceProcess("gpu-1", 300, "", "").ok());
  auto agent = cluster_->StartNvmlAgent(
      "gpu-1",
      TwoGpus({{kHeld, Json::array({Json{{"pid", 100}, {"usedMiB", 2000}}})},
               {kIdle, Json::array({Json{{"pid", 200}, {"usedMiB", 900}}, Json{{"pid", 300}, {"usedMiB", 300}}})}}),
      {"--evict-foreign-pods", "--foreign-eviction-interval", "1s"});
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto ext = cluster_->StartExtender();
  ASSERT_TRUE(ext.ok()) << ext.status();
  FakeKubeScheduler sched(*cluster_);
  sched.SetExtender(ext->url);
  ScheduleResult r = sched.Schedule({*gpupack});
  ASSERT_EQ(r.bound.size(), 1u) << "the gpupack pod is placed on its GPU";
  ASSERT_TRUE(cluster_->MarkRunning("train", kGpupackContainer).ok());

  // Reported: the stray with its pod and container, the host process as not in a pod; the
  // gpupack pod's own process, once its allocation is in the agent's pod list, not at all.
  auto reported = [&] {
    std::set<int64_t> pids;
    for (const api::GpuNodeAuditFinding& f : Audit()) pids.insert(f.pid);
    return pids == std::set<int64_t>{200, 300};
  };
  ASSERT_TRUE(Eventually(reported, kAgentLoops)) << "audit never settled on the stray and the host process";
  for (const api::GpuNodeAuditFinding& f : Audit()) {
    EXPECT_EQ(f.kind, "foreign-process");
    EXPECT_EQ(f.device, kIdle);
    if (f.pid == 200) {
      EXPECT_EQ(f.pod, cluster_->ns() + "/stray");
      EXPECT_EQ(f.pod_uid, stray_uid);
      EXPECT_EQ(f.container, "main");
    } else {
      EXPECT_EQ(f.pod, "");
      EXPECT_NE(f.message.find("not in a pod"), std::string::npos) << f.message;
    }
  }

  // Evicted through the Eviction API, with the pod's UID as precondition; the API server marks it
  // for deletion, and the agent does not ask again while it terminates.
  TestApiServer& server = *cluster_->server();
  ASSERT_TRUE(Eventually([&] { return !server.evictions().empty(); }, kAgentLoops)) << "no eviction arrived";
  const EvictionRecord sent = server.evictions()[0];
  EXPECT_EQ(sent.pod, "stray");
  EXPECT_EQ(sent.code, 201);
  EXPECT_EQ(sent.body, (Json{{"apiVersion", "policy/v1"},
                             {"kind", "Eviction"},
                             {"metadata", {{"name", "stray"}, {"namespace", cluster_->ns()}}},
                             {"deleteOptions", {{"preconditions", {{"uid", stray_uid}}}}}}));
  auto pod = cluster_->api().GetPod(cluster_->ns(), "stray");
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_TRUE((*pod)["metadata"].contains("deletionTimestamp"));
  EXPECT_TRUE(Eventually(
      [&] {
        const std::vector<std::string> reasons = EventReasons("stray");
        return reasons == std::vector<std::string>{"GpupackForeignProcess", "GpupackForeignPodEvicted"};
      },
      kAgentLoops))
      << "events on the stray pod";
  EXPECT_TRUE(Eventually(
      [&] {
        return Metrics(*agent).find("gpupack_agent_evictions_total{node=\"gpu-1\",result=\"evicted\"} 1") !=
               std::string::npos;
      },
      kAgentLoops));
  const std::string metrics = Metrics(*agent);
  EXPECT_NE(metrics.find("gpu_uuid=\"" + std::string(kIdle) + "\",mig_profile=\"\",node=\"gpu-1\"} 2"),
            std::string::npos)
      << "gpupack_agent_foreign_processes counts both strays on the idle GPU\n"
      << metrics;
  std::this_thread::sleep_for(std::chrono::seconds(3));  // three more passes
  EXPECT_EQ(server.evictions().size(), 1u) << "a terminating pod is not evicted again";
  for (const std::string& reason : EventReasons("train")) {
    EXPECT_EQ(reason.find("GpupackForeign"), std::string::npos) << "the gpupack pod's own process is no finding";
    EXPECT_EQ(reason.find("GpupackEviction"), std::string::npos);
  }
  auto ledger = CheckLedger(cluster_->api(), cluster_->ns(), cluster_->run_label());
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  EXPECT_EQ(ledger->pods_with_allocation, 1);
}

TEST_F(ForeignProcessScenario, DisruptionBudgetBlocksTheEvictionAndTheAgentAsksAgain) {
  auto stray = cluster_->CreateRunningPod("web-0", "gpu-1", kStrayContainer, {{"app", "web"}});
  ASSERT_TRUE(stray.ok()) << stray.status();
  const kube::Resource pdbs{"policy", "v1", "poddisruptionbudgets", true};
  auto pdb = cluster_->api().Create(
      pdbs, cluster_->ns(),
      Json{{"metadata", {{"name", "web"}}}, {"spec", {{"selector", {{"matchLabels", {{"app", "web"}}}}}}}});
  ASSERT_TRUE(pdb.ok()) << pdb.status();
  (*pdb)["status"] = {{"disruptionsAllowed", 0}};
  auto held = cluster_->api().Update(pdbs, cluster_->ns(), *pdb, "status");
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_TRUE(cluster_->PlaceProcess("gpu-1", 200, (*stray)["metadata"]["uid"], kStrayContainer).ok());
  auto agent =
      cluster_->StartNvmlAgent("gpu-1", TwoGpus({{kIdle, Json::array({Json{{"pid", 200}, {"usedMiB", 900}}})}}),
                               {"--evict-foreign-pods", "--foreign-eviction-interval", "1s"});
  ASSERT_TRUE(agent.ok()) << agent.status();

  TestApiServer& server = *cluster_->server();
  ASSERT_TRUE(Eventually([&] { return server.evictions().size() >= 3; }, kAgentLoops)) << "the agent did not ask again";
  for (const EvictionRecord& e : server.evictions()) EXPECT_EQ(e.code, 429);
  auto pod = cluster_->api().GetPod(cluster_->ns(), "web-0");
  ASSERT_TRUE(pod.ok()) << "the pod was deleted despite its budget: " << pod.status();
  EXPECT_FALSE((*pod)["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(EventReasons("web-0"), (std::vector<std::string>{"GpupackForeignProcess", "GpupackEvictionBlocked"}))
      << "the refusal is told once, not at every attempt";
  EXPECT_TRUE(Eventually(
      [&] {
        return Metrics(*agent).find("gpupack_agent_evictions_total{node=\"gpu-1\",result=\"blocked_by_pdb\"} ") !=
               std::string::npos;
      },
      kAgentLoops));

  // The budget allows one disruption: the next attempt evicts.
  auto latest = cluster_->api().Get(pdbs, cluster_->ns(), "web");
  ASSERT_TRUE(latest.ok());
  (*latest)["status"]["disruptionsAllowed"] = 1;
  ASSERT_TRUE(cluster_->api().Update(pdbs, cluster_->ns(), *latest, "status").ok());
  ASSERT_TRUE(Eventually([&] { return server.evictions().back().code == 201; }, kAgentLoops))
      << "never evicted once allowed";
  pod = cluster_->api().GetPod(cluster_->ns(), "web-0");
  ASSERT_TRUE(pod.ok());
  EXPECT_TRUE((*pod)["metadata"].contains("deletionTimestamp"));
  EXPECT_TRUE(Eventually(
      [&] {
        const std::vector<std::string> reasons = EventReasons("web-0");
        return !reasons.empty() && reasons.back() == "GpupackForeignPodEvicted";
      },
      kAgentLoops));
}

}  // namespace
}  // namespace gpupack::e2e

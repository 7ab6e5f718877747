// End-to-end scenarios: real gpupack-extender and gpupack-agent processes against the in-tree
// API test server (or a real cluster, see docs/e2e.md), driven by FakeKubeScheduler. Every
// scenario asserts the device ledger invariant from the pods' annotations and that no pod is lost.
#include <signal.h>

#include <future>
#include <random>

#include <gtest/gtest.h>

#include "api/allocation.h"
#include "api/annotations.h"
#include "api/gpunode.h"
#include "e2e/harness.h"
#include "webhook/mutator.h"

namespace gpupack::e2e {
namespace {

constexpr char kMixedCluster[] = R"(nodes:
  - name: a100-1
    gpus:
      - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 4}
  - name: a100-mig
    gpus:
      - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 1}
      - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, mig: [{profile: 3g.40gb, memory: 40Gi}, {profile: 2g.20gb, memory: 20Gi}, {profile: 1g.10gb, memory: 10Gi}, {profile: 1g.10gb, memory: 10Gi}]}
  - name: v100-1
    gpus:
      - {model: Tesla V100-SXM2-32GB, memory: 32Gi, count: 4}
  - name: t4-1
    gpus:
      - {model: Tesla T4, memory: 16Gi, count: 2}
)";

// 2 nodes × 2 GPUs × 16 GiB: 16 pods of 4 GiB fill it exactly, so any double booking overflows.
constexpr char kTightCluster[] = R"(nodes:
  - name: t4-a
    gpus:
      - {model: Tesla T4, memory: 16Gi, count: 2}
  - name: t4-b
    gpus:
      - {model: Tesla T4, memory: 16Gi, count: 2}
)";

std::string TestName() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info->name();
}

class Scenario : public ::testing::Test {
 protected:
  void Up(const char* cluster_yaml) {
    auto c = Cluster::Create(TestName(), cluster_yaml, DefaultBinaries());
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(c).value();
    ASSERT_TRUE(cluster_->StartAgents().ok());
  }
  ExtenderProcess StartExtender(const std::string& config = "") {
    auto e = cluster_->StartExtender(config);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? std::move(e).value() : ExtenderProcess{};
  }
  std::vector<Json> CreatePods(const std::string& prefix, int n, const std::string& mem, int gpus = 1,
                               const std::map<std::string, std::string>& annotations = {}) {
    std::vector<Json> out;
    for (int i = 0; i < n; ++i) {
      auto p = cluster_->CreatePod(prefix + "-" + std::to_string(i), mem, gpus, annotations);
      EXPECT_TRUE(p.ok()) << p.status();
      if (p.ok()) out.push_back(*p);
    }
    return out;
  }
  // The invariant, plus: every pod the scheduler reports bound is bound there in the API, and
  // every pod is accounted for (bound, unschedulable or deleted), none unfinished.
  LedgerReport Check(const ScheduleResult& r, size_t pods) {
    auto report = CheckLedger(cluster_->api(), cluster_->ns(), cluster_->run_label());
    EXPECT_TRUE(report.ok()) << report.status();
    EXPECT_TRUE(r.unfinished.empty()) << r.unfinished.size() << " pods never finished, e.g. " << *r.unfinished.begin();
    std::set<std::string> accounted;
    for (const auto& [key, node] : r.bound) {
      accounted.insert(key);
      const std::string name = key.substr(key.find('/') + 1);
      auto pod = cluster_->api().GetPod(cluster_->ns(), name);
      if (!pod.ok()) {
        EXPECT_TRUE(r.deleted.count(key) || pod.status().code() == StatusCode::kNotFound) << key;
        continue;
      }
      EXPECT_EQ((*pod)["spec"].value("nodeName", ""), node) << key;
    }
    accounted.insert(r.unschedulable.begin(), r.unschedulable.end());
    accounted.insert(r.deleted.begin(), r.deleted.end());
    EXPECT_EQ(accounted.size() + r.unfinished.size(), pods) << "pods lost by the scheduler loop";
    return report.ok() ? *report : LedgerReport{};
  }

  std::unique_ptr<Cluster> cluster_;
};

TEST_F(Scenario, PacksMixedClusterWithMig) {
  Up(kMixedCluster);
  ExtenderProcess ext = StartExtender();
  // The constrained pods first (in a real queue they would be as likely as any), then the bulk.
  std::vector<Json> pods = CreatePods("mig", 6, "5Gi", 1, {{std::string(api::kAnnotationMigProfile), "1g.10gb"}});
  for (const Json& p : CreatePods("whole", 3, "", 1)) pods.push_back(p);
  for (const Json& p : CreatePods("two", 4, "4Gi", 2)) pods.push_back(p);
  const char* sizes[] = {"1Gi", "2Gi", "3Gi", "4Gi", "6Gi", "8Gi"};
  for (int i = 0; i < 200; ++i) {
    auto p = cluster_->CreatePod("frac-" + std::to_string(i), sizes[i % 6], 1);
    ASSERT_TRUE(p.ok());
    pods.push_back(*p);
  }
  FakeKubeScheduler sched(*cluster_);
  sched.SetExtender(ext.url);
  ScheduleResult r = sched.Schedule(pods);
  LedgerReport report = Check(r, pods.size());
  // 213 pods asking ~1.1 TiB of ~650 GiB: the cluster fills up, the rest is unschedulable.
  EXPECT_GT(report.pods_with_allocation, 90);
  EXPECT_GT(report.allocated_mib, report.capacity_mib * 8 / 10) << "the packer left more than 20% unused";
  EXPECT_EQ(report.pods_with_allocation, static_cast<int>(r.bound.size()));
  // The MIG-profile pods landed on 1g.10gb instances only (two exist, 5 GiB each fits twice).
  int mig_bound = 0;
  for (const auto& [key, node] : r.bound) mig_bound += key.find("/mig-") != std::string::npos;
  EXPECT_EQ(mig_bound, 4);
}

TEST_F(Scenario, ExtenderKilledMidStreamAndRestarted) {
  Up(kTightCluster);
  ExtenderProcess ext = StartExtender();
  std::vector<Json> pods = CreatePods("p", 24, "4Gi");
  FakeKubeScheduler sched(*cluster_);
  sched.SetExtender(ext.url);
  ScheduleResult r = sched.Schedule(pods, [&](int cycle) {
    if (cycle == 8) {
      ext.process.Kill(SIGKILL);  // mid-stream: binds may be in flight
      ext = StartExtender();      // rebuilds its ledger from the pods' annotations
      sched.SetExtender(ext.url);
    }
  });
  LedgerReport report = Check(r, pods.size());
  EXPECT_EQ(report.pods_with_allocation, 16);  // exactly full, never more
  EXPECT_EQ(report.allocated_mib, report.capacity_mib);
}

TEST_F(Scenario, TwoExtendersFailOverWithoutDoubleBooking) {
  Up(kTightCluster);
  ExtenderProcess a = StartExtender();
  ExtenderProcess b = StartExtender();
  std::vector<Json> pods = CreatePods("p", 24, "4Gi");
  SchedulerOptions opts;
  opts.bind_workers = 8;
  FakeKubeScheduler sched(*cluster_, opts);
  sched.SetExtender(a.url);
  ScheduleResult r = sched.Schedule(pods, [&](int cycle) {
    if (cycle == 8 && cluster_->server() != nullptr) {
      // B takes over while A's binds are still in flight, and B's watches go deaf: it can only
      // learn A's binds from its fresh read before each bind.
      Faults deaf;
      deaf.watch_error_rate = 1.0;
      cluster_->server()->SetFaults(deaf);
      cluster_->server()->DropWatches();
    }
    if (cycle == 8) sched.SetExtender(b.url);
  });
  if (cluster_->server() != nullptr) cluster_->server()->SetFaults({});
  LedgerReport report = Check(r, pods.size());
  EXPECT_EQ(report.pods_with_allocation, 16);
  EXPECT_EQ(report.allocated_mib, report.capacity_mib);
}

TEST_F(Scenario, ConcurrentBindsToOneNode) {
  Up(R"(nodes:
  - name: big
    gpus:
      - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 1}
)");
  ExtenderProcess ext = StartExtender();
  std::vector<Json> pods = CreatePods("p", 30, "8Gi");
  // Thirty binds at once to the same node, as a kube-scheduler with a stale cache might send.
  std::vector<std::future<bool>> binds;
  for (const Json& p : pods) {
    binds.push_back(std::async(std::launch::async, [&, p] {
      Json args = {{"PodName", p["metadata"]["name"]},
                   {"PodNamespace", p["metadata"]["namespace"]},
                   {"PodUID", p["metadata"]["uid"]},
                   {"Node", "big"}};
      StatusOr<Json> reply = PostToExtender(ext.url, "/bind", args);
      return reply.ok() && reply->value("Error", "").empty();
    }));
  }
  int ok = 0;
  for (auto& f : binds) ok += f.get();
  EXPECT_EQ(ok, 10);
  auto report = CheckLedger(cluster_->api(), cluster_->ns(), cluster_->run_label());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->pods_with_allocation, 10);
  EXPECT_EQ(report->allocated_mib, report->capacity_mib);
}

TEST_F(Scenario, ApiFaultsDuringBindAndWatch) {
  Up(kMixedCluster);
  if (cluster_->server() == nullptr)
    GTEST_SKIP() << "fault injection needs the in-tree API server; this run targets the real cluster "
                    "named by GPUPACK_E2E_KUBECONFIG";
  ExtenderProcess ext = StartExtender();
  std::vector<Json> pods;
  const char* sizes[] = {"2Gi", "4Gi", "8Gi"};
  for (int i = 0; i < 90; ++i) {
    auto p = cluster_->CreatePod("p-" + std::to_string(i), sizes[i % 3], 1);
    ASSERT_TRUE(p.ok());
    pods.push_back(*p);
  }
  Faults f;
  f.error_rate = 0.05;
  f.error_after_commit_rate = 0.2;  // binds that land but whose answer is lost
  f.latency_ms = 2;
  cluster_->server()->SetFaults(f);
  FakeKubeScheduler sched(*cluster_);
  sched.SetExtender(ext.url);
  ScheduleResult r = sched.Schedule(pods, [&](int cycle) {
    if (cycle % 15 == 0) cluster_->server()->DropWatches();
    if (cycle == 45) cluster_->server()->CompactHistory();  // the next resume gets 410 and relists
  });
  cluster_->server()->SetFaults({});
  LedgerReport report = Check(r, pods.size());
  EXPECT_EQ(report.pods_with_allocation, 90);  // ~420 GiB asked of ~650: all fit despite the faults
}

TEST_F(Scenario, PodsDeletedUnderLoad) {
  Up(kTightCluster);
  ExtenderProcess ext = StartExtender();
  std::vector<Json> pods = CreatePods("p", 40, "4Gi");
  std::mt19937 rng(7);
  int deleted = 0;
  FakeKubeScheduler sched(*cluster_);
  sched.SetExtender(ext.url);
  ScheduleResult r = sched.Schedule(pods, [&](int cycle) {
    if (cycle % 5 != 0 || deleted >= 12) return;
    const Json& victim = pods[std::uniform_int_distribution<size_t>(0, pods.size() - 1)(rng)];
    if (cluster_->api()
            .Delete(kube::PodsResource(), cluster_->ns(), victim["metadata"]["name"].get<std::string>())
            .ok())
      ++deleted;
  });
  Check(r, pods.size());
  EXPECT_GT(deleted, 0);
  // A second wave: the deleted pods' devices must have been released and are reused, so the
  // cluster ends exactly full. (No-fit answers are retried for a while: the extender learns of
  // the last deletions through its watch.)
  std::vector<Json> wave = CreatePods("wave", 16, "4Gi");
  SchedulerOptions patient;
  patient.max_no_fit_attempts = 6;
  patient.no_fit_pause = std::chrono::milliseconds(50);
  FakeKubeScheduler sched2(*cluster_, patient);
  sched2.SetExtender(ext.url);
  ScheduleResult r2 = sched2.Schedule(wave);
  LedgerReport report = Check(r2, wave.size());
  EXPECT_EQ(report.allocated_mib, report.capacity_mib);
  EXPECT_EQ(report.pods_with_allocation, 16);
}

TEST_F(Scenario, StaleAgentMakesItsNodeUnschedulable) {
  Up(kTightCluster);
  ExtenderProcess ext = StartExtender("heartbeatTTL: 5s\n");
  cluster_->KillAgent("t4-b");
  // Wait (bounded) until the extender sees t4-b's heartbeat go stale.
  auto probe = cluster_->CreatePod("probe", "1Gi", 1);
  ASSERT_TRUE(probe.ok());
  bool stale = false;
  for (int i = 0; i < 400 && !stale; ++i) {
    StatusOr<Json> reply =
        PostToExtender(ext.url, "/filter", {{"Pod", *probe}, {"Nodes", nullptr}, {"NodeNames", {"t4-a", "t4-b"}}});
    ASSERT_TRUE(reply.ok()) << reply.status();
    // Staleness cannot be fixed by preemption: the node is reported unresolvable.
    const Json failed = (*reply).value("FailedAndUnresolvableNodes", Json::object());
    stale = failed.is_object() && failed.contains("t4-b") &&
            failed["t4-b"].get<std::string>().find("heartbeat") != std::string::npos;
    if (!stale) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(stale) << "t4-b never reported stale";
  ASSERT_TRUE(cluster_->api().Delete(kube::PodsResource(), cluster_->ns(), "probe").ok());
  std::vector<Json> pods = CreatePods("p", 12, "4Gi");
  FakeKubeScheduler sched(*cluster_);
  sched.SetExtender(ext.url);
  ScheduleResult r = sched.Schedule(pods);
  LedgerReport report = Check(r, pods.size());
  EXPECT_EQ(report.bound_per_node["t4-b"], 0);
  EXPECT_EQ(report.bound_per_node["t4-a"], 8);  // t4-a alone: 2 × 16 GiB
}

// The device controls end to end: a pod pinned to a UUID lands on it, an excluded model is
// avoided, two replicas with one spread key get different devices, and a namespace over its
// ResourceQuota on requests.gpupack.io/gpu-memory is refused at admission (the webhook's patch
// charges whole-device pods; the API server's quota admission refuses).
TEST_F(Scenario, PodControlsAndNamespaceQuota) {
  Up(R"(nodes:
  - name: a100-1
    gpus:
      - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 2}
  - name: t4-1
    gpus:
      - {model: Tesla T4, memory: 16Gi, count: 2}
)");
  ExtenderProcess ext = StartExtender();
  auto gpunode = cluster_->api().GetGpuNode("a100-1");
  ASSERT_TRUE(gpunode.ok()) << gpunode.status();
  auto a100 = api::GpuNodeStatusFromJson((*gpunode)["status"]);
  ASSERT_TRUE(a100.ok()) << a100.status();
  ASSERT_EQ(a100->devices.size(), 2u);
  const std::string pinned_uuid = a100->devices[1].uuid;

  // A namespace quota of 40Gi, and the webhook charging each whole device 16Gi.
  ASSERT_TRUE(cluster_->api()
                  .Create(kube::Resource{"", "v1", "resourcequotas", true}, cluster_->ns(),
                          Json{{"metadata", {{"name", "gpu-memory"}}},
                               {"spec", {{"hard", {{"requests.gpupack.io/gpu-memory", "40Gi"}}}}}})
                  .ok());
  webhook::Config wc;
  wc.whole_device_charge_mib = 16384;
  wc.allow_custom_scheduler_name = true;  // keep the harness's scheduler name
  const webhook::Mutator mutator(wc);
  auto admit = [&](const Json& pod) -> StatusOr<Json> {
    GPUPACK_ASSIGN_OR_RETURN(webhook::PodPatch patch, mutator.PatchFor(pod));
    return pod.patch(patch.ops);
  };
  const std::string binpack = "binpack";
  std::vector<Json> pods;
  auto create = [&](const std::string& name, const std::string& mem, int gpus, std::map<std::string, std::string> ann) {
    // Binpack at both levels, so that without the controls every pod would stack on a T4.
    ann[std::string(api::kAnnotationNodePolicy)] = binpack;
    ann[std::string(api::kAnnotationDevicePolicy)] = binpack;
    auto p = cluster_->CreatePod(name, mem, gpus, ann, admit);
    EXPECT_TRUE(p.ok()) << name << ": " << p.status();
    if (p.ok()) pods.push_back(*p);
  };
  create("control", "4Gi", 1, {});                                                          // 4Gi of quota
  create("pinned", "4Gi", 1, {{std::string(api::kAnnotationGpuUuids), pinned_uuid}});       // 8Gi
  create("no-t4", "4Gi", 1, {{std::string(api::kAnnotationGpuModelExclude), "Tesla T4"}});  // 12Gi
  create("web-0", "2Gi", 1, {{std::string(api::kAnnotationSpreadKey), "web"}});             // 14Gi
  create("web-1", "2Gi", 1, {{std::string(api::kAnnotationSpreadKey), "web"}});             // 16Gi
  create("whole", "", 1, {});  // charged 16Gi: 32Gi ≤ 40Gi
  ASSERT_EQ(pods.size(), 6u);
  EXPECT_EQ(pods.back()["spec"]["containers"][0]["resources"]["requests"]["gpupack.io/gpu-memory"], "16384Mi");
  // One more whole device would make 48Gi > 40Gi: refused before anything is created.
  auto refused = cluster_->CreatePod("whole-2", "", 1, {}, admit);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "exceeded quota: gpu-memory, requested: requests.gpupack.io/gpu-memory=16Gi, used: "
                "requests.gpupack.io/gpu-memory=32Gi, limited: requests.gpupack.io/gpu-memory=40Gi"),
            std::string::npos)
      << refused.status();

  FakeKubeScheduler sched(*cluster_);
  sched.SetExtender(ext.url);
  ScheduleResult r = sched.Schedule(pods);
  Check(r, pods.size());
  ASSERT_EQ(r.bound.size(), pods.size()) << "every admitted pod fits; bound: " << testing::PrintToString(r.bound)
                                         << ", unschedulable: " << testing::PrintToString(r.unschedulable);
  auto devices_of = [&](const std::string& name) {
    std::vector<std::string> uuids;
    auto pod = cluster_->api().GetPod(cluster_->ns(), name);
    EXPECT_TRUE(pod.ok()) << pod.status();
    if (!pod.ok()) return uuids;
    auto alloc =
        api::DecodeAllocation((*pod)["metadata"]["annotations"].value(std::string(api::kAnnotationAllocation), ""));
    EXPECT_TRUE(alloc.ok()) << alloc.status();
    if (!alloc.ok()) return uuids;
    for (const auto& c : alloc->containers) {
      for (const auto& d : c.devices) uuids.push_back(d.uuid);
    }
    return uuids;
  };
  const std::string key = cluster_->ns() + "/";
  EXPECT_EQ(r.bound[key + "control"], "t4-1") << "binpack prefers the small T4s";
  EXPECT_EQ(devices_of("pinned"), std::vector<std::string>{pinned_uuid});
  EXPECT_EQ(r.bound[key + "no-t4"], "a100-1");
  const std::vector<std::string> web0 = devices_of("web-0"), web1 = devices_of("web-1");
  ASSERT_EQ(web0.size(), 1u);
  ASSERT_EQ(web1.size(), 1u);
  EXPECT_NE(web0[0], web1[0]) << "replicas with one spread key share no device";
}

}  // namespace
}  // namespace gpupack::e2e

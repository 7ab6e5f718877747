// Long file: the Kubernetes backend's tests share one fixture (a test API server, the backend, a
// ledger); the fence cases (intents, batches, expiry, RBAC) read best beside each other.
#include "scheduler/cluster/kube_backend.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include "api/annotations.h"
#include "api/gpunode.h"
#include "common/rfc3339.h"
#include "placement/placement.h"
#include "placement/workload.h"
#include "scheduler/extender/extender.h"
#include "scheduler/extender/metrics.h"
#include "testing/builders.h"
#include "testing/eventually.h"
#include "testing/fake_clock.h"
#include "testing/test_apiserver.h"
#include "translate/pod_request.h"

namespace gpupack::cluster {
namespace {

using Json = nlohmann::json;
constexpr model::MiB kGiB = 1024;

using builders::Eventually;

// A pod of `gpu_memory` on one device, without a uid: the API server gives it one.
Json PodJson(const std::string& name, const std::string& gpu_memory) { return builders::PodJson(name, "", gpu_memory); }

// The value of the sample `name` (with its labels, as exposed) in the backend's metrics; -1 if none.
double Sample(const KubeBackend& backend, const std::string& name) {
  const std::string text = "\n" + prometheus::TextSerializer().Serialize(backend.Metrics());
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

api::Allocation OneDevice(const std::string& node, const std::string& uuid, model::MiB mib) {
  api::Allocation a;
  a.node = node;
  api::ContainerAllocation c;
  c.name = "main";
  c.devices.push_back(api::AllocatedDevice{uuid, 0, mib, "", ""});
  a.containers.push_back(c);
  return a;
}

class KubeBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    e2e::TestApiServerOptions o;
    o.bookmark_interval = std::chrono::milliseconds(50);
    server_ = std::make_unique<e2e::TestApiServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    kube::Config c;
    c.server = server_->url();
    kube::RetryPolicy p;
    p.initial_backoff = std::chrono::milliseconds(1);
    api_ = std::move(kube::Client::Create(c, p)).value();
    // One 80 GiB GPU on n1, reported by "the agent" now.
    api::GpuNodeStatus status;
    api::GpuNodeDevice dev;
    dev.uuid = "GPU-n1-0";
    dev.model = "NVIDIA A100-SXM4-80GB";
    dev.memory_mib = 80 * kGiB;
    status.devices.push_back(dev);
    status.heartbeat_time = std::chrono::time_point_cast<std::chrono::seconds>(clock_.Now());
    ASSERT_TRUE(api_->UpsertGpuNodeStatus("n1", api::GpuNodeStatusToJson(status)).ok());
  }
  void TearDown() override {
    if (backend_) backend_->Stop();
  }

  // Creates a pod and binds it through the API directly (as another replica would).
  std::string CreateBoundPod(const std::string& name, model::MiB mib) {
    auto created = api_->Create(kube::PodsResource(), "default", PodJson(name, std::to_string(mib) + "Mi"));
    EXPECT_TRUE(created.ok());
    const std::string uid = (*created)["metadata"]["uid"];
    EXPECT_TRUE(
        api_->CreateBinding("default", name, uid, "n1", api::AllocationAnnotations(OneDevice("n1", "GPU-n1-0", mib)))
            .ok());
    return uid;
  }
  // As CreateBoundPod, the pod first shaped by `shape` (annotations, owner references).
  std::string CreateBoundPodShaped(const std::string& name, model::MiB mib, const std::function<void(Json&)>& shape) {
    Json pod = PodJson(name, std::to_string(mib) + "Mi");
    shape(pod);
    auto created = api_->Create(kube::PodsResource(), "default", pod);
    EXPECT_TRUE(created.ok()) << created.status();
    const std::string uid = (*created)["metadata"]["uid"];
    EXPECT_TRUE(
        api_->CreateBinding("default", name, uid, "n1", api::AllocationAnnotations(OneDevice("n1", "GPU-n1-0", mib)))
            .ok());
    return uid;
  }
  std::string CreatePod(const std::string& name, model::MiB mib) {
    auto created = api_->Create(kube::PodsResource(), "default", PodJson(name, std::to_string(mib) + "Mi"));
    EXPECT_TRUE(created.ok());
    return (*created)["metadata"]["uid"];
  }

  // Writes n1's fence as another replica would: one intent of `mib` on GPU-n1-0 for `uid`
  // (pod default/`name`), stamped now.
  void WriteOthersIntent(const std::string& uid, const std::string& name, model::MiB mib) {
    const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
    const Json intents = {{uid,
                           {{"alloc", api::EncodeAllocation(OneDevice("n1", "GPU-n1-0", mib))},
                            {"at", now_s},
                            {"pod", "default/" + name}}}};
    ASSERT_TRUE(api_->Create(kube::LeasesResource(), "default",
                             {{"metadata",
                               {{"name", "gpupack-fence-n1"},
                                {"annotations", {{"gpupack.io/binds-in-flight", intents.dump()}}}}},
                              {"spec", Json::object()}})
                    .ok());
  }

  void StartBackend(const std::function<void(KubeBackendConfig&)>& configure = nullptr) {
    kube::Config c;
    c.server = server_->url();
    kube::RetryPolicy p;
    p.initial_backoff = std::chrono::milliseconds(1);
    KubeBackendConfig config;
    config.informer.initial_backoff = std::chrono::milliseconds(1);
    config.informer.max_backoff = std::chrono::milliseconds(20);
    if (configure) configure(config);
    backend_ = std::make_unique<KubeBackend>(std::move(kube::Client::Create(c, p)).value(), config, clock_);
    ASSERT_TRUE(backend_->Start(state_).ok());
    ASSERT_TRUE(Eventually([&] { return backend_->Synced(); }));
  }

  // What the extender's bind verb does: lookup, reserve, Binding, confirm or release.
  Status ExtenderBind(const std::string& name, const std::string& uid) {
    extender::BindTarget target{"default", name, uid};
    GPUPACK_ASSIGN_OR_RETURN(model::PodRequest request, backend_->LookupPod(target));
    request.uid = uid;
    request.ns = "default";
    request.name = name;
    GPUPACK_ASSIGN_OR_RETURN(extender::ReserveVerdict r, state_.Reserve(request, "n1"));
    if (!r.reserved()) return Status::FailedPrecondition(r.message);
    Status s = backend_->Bind(target, "n1", api::AllocationAnnotations(r.reservation.allocation));
    if (s.ok())
      state_.Confirm(uid);
    else
      state_.Release(uid);
    return s;
  }

  // RBAC refuses every call on Leases (the fence), as it does for a kube-apiserver that just
  // restarted until its caches fill.
  void ForbidLeases() {
    e2e::Faults forbidden;
    forbidden.forbidden_rate = 1.0;
    forbidden.path_contains = "/leases";
    server_->SetFaults(forbidden);
  }

  // "The agent" reports n1 again, now (after the clock moved).
  void RefreshHeartbeat() {
    auto g = api_->GetGpuNode("n1");
    ASSERT_TRUE(g.ok());
    Json st = (*g)["status"];
    st["heartbeatTime"] = FormatRfc3339(clock_.Now());
    ASSERT_TRUE(api_->UpsertGpuNodeStatus("n1", st).ok());
  }

  bool Fits(model::MiB mib) {
    StatusOr<model::PodRequest> req = translate::ParsePodRequest(PodJson("probe", std::to_string(mib) + "Mi"));
    EXPECT_TRUE(req.ok());
    auto ev = state_.Evaluate("n1", *req);
    return ev && ev->verdict.fits();
  }

  FakeClock clock_{std::chrono::time_point_cast<Clock::Duration>(std::chrono::system_clock::now())};
  extender::ClusterState state_{builders::PriorPolicy(model::PolicyKind::kBinpack, 80 * kGiB), clock_,
                                std::chrono::seconds(120)};
  std::unique_ptr<e2e::TestApiServer> server_;
  std::unique_ptr<kube::Client> api_;
  std::unique_ptr<KubeBackend> backend_;
};

TEST(PodAllocationTest, OnlyBoundLivePodsWithValidAnnotations) {
  Json pod = PodJson("p", "1Gi");
  pod["metadata"]["uid"] = "u";
  pod["metadata"]["annotations"][std::string(api::kAnnotationAllocation)] =
      api::EncodeAllocation(OneDevice("n1", "GPU-a", 1024));
  EXPECT_FALSE(PodAllocation(pod)->has_value());  // not bound
  pod["spec"]["nodeName"] = "n1";
  ASSERT_TRUE(PodAllocation(pod)->has_value());
  pod["status"]["phase"] = "Succeeded";
  EXPECT_FALSE(PodAllocation(pod)->has_value());
  pod["status"]["phase"] = "Running";
  pod["metadata"]["annotations"][std::string(api::kAnnotationAllocation)] = "{not json";
  auto bad = PodAllocation(pod);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("default/p"), std::string::npos);
}

TEST(CheckNodeFitsTest, SumsCapsPerDeviceAndHonoursExclusive) {
  const model::Node node = builders::NodeOf({builders::Gpu("GPU-a", 10 * kGiB)});
  auto bound = [](const std::string& uid, model::MiB mib, bool exclusive) {
    Json p = PodJson(uid, "1Gi");
    p["metadata"]["uid"] = uid;
    p["spec"]["nodeName"] = "n1";
    api::Allocation a = OneDevice("n1", "GPU-a", mib);
    a.containers[0].exclusive = exclusive;
    p["metadata"]["annotations"][std::string(api::kAnnotationAllocation)] = api::EncodeAllocation(a);
    return p;
  };
  const std::vector<Json> pods = {bound("a", 4 * kGiB, false), bound("b", 4 * kGiB, false)};
  EXPECT_TRUE(CheckNodeFits(node, pods, "me", OneDevice("n1", "GPU-a", 2 * kGiB)).ok());
  Status over = CheckNodeFits(node, pods, "me", OneDevice("n1", "GPU-a", 3 * kGiB));
  EXPECT_EQ(over.code(), StatusCode::kConflict);
  EXPECT_NE(over.message().find("GPU-a"), std::string::npos);
  // Our own pod in the list (a repeated bind) is not counted twice.
  EXPECT_TRUE(CheckNodeFits(node, {bound("me", 2 * kGiB, false)}, "me", OneDevice("n1", "GPU-a", 10 * kGiB)).ok());
  // An exclusive holder shares with nobody.
  EXPECT_EQ(CheckNodeFits(node, {bound("x", 10 * kGiB, true)}, "me", OneDevice("n1", "GPU-a", 0)).code(),
            StatusCode::kConflict);
}

// A device overbooked by other pods refuses binds onto itself only: GPU-a holds 6 + 6 = 12 GiB
// of 10, and a bind of 4 GiB onto GPU-b (0 + 4 ≤ 10) goes on. (Judging the whole node kept every
// pod off a node whose one device two replicas had overbooked, for as long as those pods lived.)
TEST(CheckNodeFitsTest, JudgesOnlyTheDevicesTheBindTakes) {
  const model::Node node = builders::NodeOf({builders::Gpu("GPU-a", 10 * kGiB), builders::Gpu("GPU-b", 10 * kGiB)});
  auto bound = [](const std::string& uid, model::MiB mib) {
    Json p = PodJson(uid, "1Gi");
    p["metadata"]["uid"] = uid;
    p["spec"]["nodeName"] = "n1";
    p["metadata"]["annotations"][std::string(api::kAnnotationAllocation)] =
        api::EncodeAllocation(OneDevice("n1", "GPU-a", mib));
    return p;
  };
  const std::vector<Json> overbooked = {bound("a", 6 * kGiB), bound("b", 6 * kGiB)};
  EXPECT_TRUE(CheckNodeFits(node, overbooked, "me", OneDevice("n1", "GPU-b", 4 * kGiB)).ok());
  // 12 + 1 = 13 GiB on GPU-a: still refused there, naming both holders.
  Status over = CheckNodeFits(node, overbooked, "me", OneDevice("n1", "GPU-a", 1 * kGiB));
  EXPECT_EQ(over.code(), StatusCode::kConflict);
  EXPECT_NE(over.message().find("13312 MiB of 10240"), std::string::npos) << over;
  EXPECT_NE(over.message().find("default/a default/b"), std::string::npos) << over;
}

// The bind's check against allocations it had not seen keeps the ceiling bound too: on a 10 GiB
// device at 150 %, Σ ceilings ≤ 15 GiB.
TEST(CheckNodeFitsTest, KeepsCeilingsWithinTheOvercommitBound) {
  const model::Node node = builders::NodeOf({builders::Gpu("GPU-a", 10 * kGiB)});
  auto burst = [](model::MiB mib, model::MiB ceiling) {
    api::Allocation a = OneDevice("n1", "GPU-a", mib);
    a.containers[0].devices[0].limit_mib = ceiling;
    return a;
  };
  Json other = PodJson("other", "1Gi");
  other["metadata"]["uid"] = "other";
  other["spec"]["nodeName"] = "n1";
  other["metadata"]["annotations"][std::string(api::kAnnotationAllocation)] =
      api::EncodeAllocation(burst(2 * kGiB, 8 * kGiB));
  // 2 + 2 = 4 GiB guaranteed; 8 + 7 = 15 GiB of ceilings: exactly the bound.
  EXPECT_TRUE(CheckNodeFits(node, {other}, "me", burst(2 * kGiB, 7 * kGiB)).ok());
  // 8 + 8 = 16 GiB > 15 GiB: refused, though 4 GiB guaranteed fits.
  Status over = CheckNodeFits(node, {other}, "me", burst(2 * kGiB, 8 * kGiB));
  EXPECT_EQ(over.code(), StatusCode::kConflict);
  EXPECT_NE(over.message().find("16384 MiB of ceilings over the bound of 15360 MiB"), std::string::npos) << over;
  // A bound of 200 % (20 GiB) takes it.
  EXPECT_TRUE(CheckNodeFits(node, {other}, "me", burst(2 * kGiB, 8 * kGiB), 200).ok());
}

TEST_F(KubeBackendTest, RebuildsLedgerFromPodsAndGpuNodes) {
  const std::string uid0 = CreateBoundPod("p0", 40 * kGiB);
  StartBackend();
  EXPECT_EQ(state_.NodeOfPod(uid0), std::optional<std::string>("n1"));
  EXPECT_TRUE(Fits(40 * kGiB));
  EXPECT_FALSE(Fits(41 * kGiB));
  // A terminated pod releases its devices (the selector turns its update into a delete).
  auto pod = api_->GetPod("default", "p0");
  ASSERT_TRUE(pod.ok());
  ASSERT_TRUE(api_->Patch(kube::PodsResource(), "default", "p0", kube::PatchType::kMerge,
                          {{"status", {{"phase", "Succeeded"}}}}, "status")
                  .ok());
  EXPECT_TRUE(Eventually([&] { return !state_.NodeOfPod(uid0).has_value(); }));
  EXPECT_TRUE(Fits(80 * kGiB));
}

// What a restarted extender learns from: the bound pods holding devices, not the pending one.
TEST_F(KubeBackendTest, HeldPodRequestsAreTheBoundPodsWithAllocations) {
  CreateBoundPod("old", 10 * kGiB);
  CreateBoundPod("new", 20 * kGiB);
  CreatePod("pending", 5 * kGiB);
  StartBackend();
  std::vector<model::PodRequest> held = backend_->HeldPodRequests();
  ASSERT_EQ(held.size(), 2u);
  std::vector<model::MiB> mib;
  for (const model::PodRequest& r : held) {
    ASSERT_EQ(r.containers.size(), 1u);
    mib.push_back(r.containers[0].mem_per_device_mib);
  }
  std::sort(mib.begin(), mib.end());
  EXPECT_EQ(mib, (std::vector<model::MiB>{10 * kGiB, 20 * kGiB}));
}

// What defragmentation may move: bound pods with an allocation that opted in and whose controller
// recreates them (here a Deployment's ReplicaSet and a Job); not a bare pod that opted in, not a
// ReplicaSet pod that did not, not a DaemonSet's.
TEST_F(KubeBackendTest, MovablePodsAreTheOptedInPodsOfRecreatingControllers) {
  auto owned = [](const std::string& kind, const std::string& name, bool movable) {
    return [=](Json& pod) {
      pod["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", "apps/v1"},
                                                         {"kind", kind},
                                                         {"name", name},
                                                         {"uid", "owner-" + name},
                                                         {"controller", true}}});
      if (movable) pod["metadata"]["annotations"]["gpupack.io/movable"] = "true";
    };
  };
  const std::string web = CreateBoundPodShaped("web-7d4b9-x", 10 * kGiB, [&](Json& pod) {
    pod["metadata"]["labels"]["pod-template-hash"] = "7d4b9";
    owned("ReplicaSet", "web-7d4b9", true)(pod);
  });
  const std::string batch = CreateBoundPodShaped("batch-x", 20 * kGiB, owned("Job", "batch", true));
  CreateBoundPodShaped("bare", 5 * kGiB,
                       [](Json& pod) { pod["metadata"]["annotations"]["gpupack.io/movable"] = "true"; });
  CreateBoundPodShaped("kept", 5 * kGiB, owned("ReplicaSet", "kept", false));
  CreateBoundPodShaped("agent", 5 * kGiB, owned("DaemonSet", "agent", true));
  StartBackend();
  const std::vector<extender::MovablePodOnNode> movable = backend_->MovablePods();
  ASSERT_EQ(movable.size(), 2u);
  std::set<std::string> uids;
  for (const extender::MovablePodOnNode& m : movable) {
    EXPECT_EQ(m.node, "n1");
    EXPECT_TRUE(m.request.movable);
    uids.insert(m.request.uid);
  }
  EXPECT_EQ(uids, (std::set<std::string>{web, batch}));
}

// One replica evicts at a time: the defragmentation Lease is the replica's that took it while it
// renews it, and another's only once it went unrenewed for its ttl.
TEST_F(KubeBackendTest, TheDefragmentationLeaseHasOneHolderAtATime) {
  auto make = [&](const std::string& identity, extender::ClusterState& state) {
    kube::Config c;
    c.server = server_->url();
    KubeBackendConfig config;
    config.identity = identity;
    auto backend = std::make_unique<KubeBackend>(std::move(kube::Client::Create(c)).value(), config, clock_);
    EXPECT_TRUE(backend->Start(state).ok());
    return backend;
  };
  extender::ClusterState other_state{builders::PriorPolicy(model::PolicyKind::kBinpack, 80 * kGiB), clock_,
                                     std::chrono::seconds(0)};
  std::unique_ptr<KubeBackend> a = make("replica-a", state_);
  std::unique_ptr<KubeBackend> b = make("replica-b", other_state);
  const std::chrono::seconds ttl{60};
  EXPECT_EQ(a->TakeActorLease(ttl).value(), true);   // created: a's
  EXPECT_EQ(b->TakeActorLease(ttl).value(), false);  // a's until now + 60 s
  clock_.Advance(std::chrono::seconds(30));
  EXPECT_EQ(a->TakeActorLease(ttl).value(), true);  // renewed: a's until now + 60 s
  clock_.Advance(std::chrono::seconds(59));
  EXPECT_EQ(b->TakeActorLease(ttl).value(), false);
  clock_.Advance(std::chrono::seconds(2));  // a went 61 s unrenewed
  EXPECT_EQ(b->TakeActorLease(ttl).value(), true);
  EXPECT_EQ(a->TakeActorLease(ttl).value(), false);  // b's now
  b->Stop();
}

// What the learner counts as demand: the unbound pods, with their UIDs, oldest first, including
// one created after the backend synced (the pod watch delivers it), not the bound ones nor a
// finished one.
TEST_F(KubeBackendTest, WaitingPodRequestsAreTheUnboundLivePods) {
  CreateBoundPod("bound", 10 * kGiB);
  const std::string early = CreatePod("early", 5 * kGiB);
  CreatePod("done", 6 * kGiB);
  ASSERT_TRUE(api_->Patch(kube::PodsResource(), "default", "done", kube::PatchType::kMerge,
                          {{"status", {{"phase", "Failed"}}}}, "status")
                  .ok());
  StartBackend();
  const std::string late = CreatePod("late", 7 * kGiB);
  ASSERT_TRUE(Eventually([&] { return backend_->WaitingPodRequests().size() == 2; }));
  std::vector<model::PodRequest> waiting = backend_->WaitingPodRequests();
  EXPECT_EQ(waiting[0].uid, early);
  EXPECT_EQ(waiting[0].containers[0].mem_per_device_mib, 5 * kGiB);
  EXPECT_EQ(waiting[1].uid, late);
  EXPECT_EQ(waiting[1].containers[0].mem_per_device_mib, 7 * kGiB);
}

TEST_F(KubeBackendTest, MetricsNameEachInformer) {
  StartBackend();
  // Synced means listed; each informer opens its watch after that. Dropping the watches before
  // both are open would restart neither (as on a loaded CI machine).
  ASSERT_TRUE(Eventually([&] { return server_->open_watches() == 2; }));
  server_->DropWatches();
  auto text_of = [&] { return prometheus::TextSerializer().Serialize(backend_->Metrics()); };
  ASSERT_TRUE(Eventually(
      [&] { return text_of().find("gpupack_kube_watch_restarts_total{resource=\"pods\"} 1") != std::string::npos; }));
  const std::string text = text_of();
  EXPECT_NE(text.find("gpupack_kube_relists_total{resource=\"gpunodes\"} 0"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE gpupack_kube_last_sync_timestamp_seconds gauge"), std::string::npos) << text;
}

TEST_F(KubeBackendTest, BindWritesAllocationAndWatchKeepsIt) {
  StartBackend();
  const std::string uid = CreatePod("p1", 30 * kGiB);
  ASSERT_TRUE(ExtenderBind("p1", uid).ok());
  auto pod = api_->GetPod("default", "p1");
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ((*pod)["spec"]["nodeName"], "n1");
  auto alloc = PodAllocation(*pod);
  ASSERT_TRUE(alloc.ok() && alloc->has_value());
  EXPECT_EQ((**alloc).containers.at(0).devices.at(0).mem_mib, 30 * kGiB);
  EXPECT_FALSE(Fits(51 * kGiB));
  // Deleting the pod frees the devices.
  ASSERT_TRUE(api_->Delete(kube::PodsResource(), "default", "p1").ok());
  EXPECT_TRUE(Eventually([&] { return Fits(80 * kGiB); }));
  EXPECT_EQ(backend_->stats().binds, 1u);
}

TEST_F(KubeBackendTest, FreshReadRefusesDeviceBoundByAnotherReplica) {
  CreateBoundPod("p0", 40 * kGiB);
  StartBackend();
  // This replica stops hearing from the API server's watches...
  e2e::Faults deaf;
  deaf.watch_error_rate = 1.0;
  server_->SetFaults(deaf);
  server_->DropWatches();
  // ...while the previous active replica binds another 40 GiB onto the same GPU.
  const std::string other = CreateBoundPod("from-old-replica", 40 * kGiB);
  EXPECT_TRUE(Fits(30 * kGiB));  // our stale view still thinks 40 GiB are free
  const std::string uid = CreatePod("p3", 30 * kGiB);
  Status s = ExtenderBind("p3", uid);
  EXPECT_EQ(s.code(), StatusCode::kConflict) << s;
  // The pod stayed unbound, and the ledger learnt the unseen allocation at once.
  auto pod = api_->GetPod("default", "p3");
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ((*pod)["spec"].value("nodeName", ""), "");
  EXPECT_EQ(state_.NodeOfPod(other), std::optional<std::string>("n1"));
  EXPECT_FALSE(Fits(1));
  EXPECT_EQ(backend_->stats().failover_conflicts, 1u);
  server_->SetFaults({});
}

// gpupack_bind_requests_total counts what the API server answered to the extender's Bindings:
// a 201 (success), a 409 (conflict) and a 500 on every attempt (error).
TEST_F(KubeBackendTest, ExtenderCountsTheApiServersBindingOutcomes) {
  StartBackend();
  extender::ExtenderMetrics metrics(&state_, true, BuildInfo{"0.1.0", "test"});
  extender::Extender ext(state_, *backend_, extender::ExtenderOptions{}, clock_, &metrics);
  auto bind = [&](const std::string& name) {
    const std::string uid = CreatePod(name, 10 * kGiB);
    const Json body = {{"PodName", name}, {"PodNamespace", "default"}, {"PodUID", uid}, {"Node", "n1"}};
    return Json::parse(ext.Bind(body.dump()).body).value("Error", "");
  };
  EXPECT_EQ(bind("ok"), "");
  e2e::Faults faults;
  faults.path_contains = "/binding";
  faults.conflict_rate = 1.0;
  server_->SetFaults(faults);
  EXPECT_NE(bind("conflicted"), "");
  faults.conflict_rate = 0;
  faults.error_rate = 1.0;
  server_->SetFaults(faults);
  EXPECT_NE(bind("failed"), "");
  server_->SetFaults({});
  const std::string text = metrics.Render();
  for (const char* result : {"success", "conflict", "error"}) {
    const std::string sample = std::string("gpupack_bind_requests_total{result=\"") + result + "\"} 1\n";
    EXPECT_NE(text.find(sample), std::string::npos) << sample << text;
  }
  EXPECT_FALSE(Fits(71 * kGiB)) << "the successful bind holds its 10 GiB";
  EXPECT_TRUE(Fits(70 * kGiB)) << "the refused binds released theirs";
}

TEST_F(KubeBackendTest, FenceIntentsOfOtherReplicasCountUntilTheyExpire) {
  CreateBoundPod("p0", 40 * kGiB);
  const std::string other = CreatePod("other", 40 * kGiB);
  StartBackend();
  // Another replica announced a 40 GiB bind on n1 whose Binding has not landed yet.
  WriteOthersIntent(other, "other", 40 * kGiB);
  const std::string uid = CreatePod("p1", 10 * kGiB);
  Status s = ExtenderBind("p1", uid);
  EXPECT_EQ(s.code(), StatusCode::kConflict) << s;
  // Once the intent is older than its TTL it no longer blocks, and our own intent is recorded.
  clock_.Advance(std::chrono::seconds(61));
  RefreshHeartbeat();
  ASSERT_TRUE(ExtenderBind("p1", uid).ok());
  auto lease = api_->Get(kube::LeasesResource(), "default", "gpupack-fence-n1");
  ASSERT_TRUE(lease.ok());
  Json stored = Json::parse((*lease)["metadata"]["annotations"]["gpupack.io/binds-in-flight"].get<std::string>());
  EXPECT_TRUE(stored.contains(uid));
  EXPECT_FALSE(stored.contains(other));
}

// An extender that starts after a pod was deleted never saw the deletion, and the intent that pod
// left in the fence names a pod its informer does not know: a GET shows it gone, so the intent is
// dropped at once instead of refusing binds to the node for the intent's whole TTL.
TEST_F(KubeBackendTest, AnIntentWhosePodIsGoneIsDroppedAtOnce) {
  StartBackend();
  WriteOthersIntent("gone-uid", "gone", 75 * kGiB);
  // 75 GiB in flight would leave no room for 10 GiB on the 80 GiB device, were the intent kept.
  const std::string uid = CreatePod("p1", 10 * kGiB);
  ASSERT_TRUE(ExtenderBind("p1", uid).ok());
  auto lease = api_->Get(kube::LeasesResource(), "default", "gpupack-fence-n1");
  ASSERT_TRUE(lease.ok());
  Json stored = Json::parse((*lease)["metadata"]["annotations"]["gpupack.io/binds-in-flight"].get<std::string>());
  EXPECT_FALSE(stored.contains("gone-uid"));
}

// The fence this replica wrote last is reused without a read; the write's resourceVersion
// precondition catches another replica's intent written since, and the bind re-checks against it.
TEST_F(KubeBackendTest, ReusedFenceStillSeesAnotherReplicasNewIntent) {
  StartBackend();
  const std::string other = CreatePod("other", 65 * kGiB);
  ASSERT_TRUE(ExtenderBind("p1", CreatePod("p1", 10 * kGiB)).ok());
  auto lease = api_->Get(kube::LeasesResource(), "default", "gpupack-fence-n1");
  ASSERT_TRUE(lease.ok());
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
  Json intents = Json::parse((*lease)["metadata"]["annotations"]["gpupack.io/binds-in-flight"].get<std::string>());
  intents[other] = {{"alloc", api::EncodeAllocation(OneDevice("n1", "GPU-n1-0", 65 * kGiB))},
                    {"at", now_s},
                    {"pod", "default/other"}};
  (*lease)["metadata"]["annotations"]["gpupack.io/binds-in-flight"] = intents.dump();
  ASSERT_TRUE(api_->Update(kube::LeasesResource(), "default", *lease).ok());
  Status s = ExtenderBind("p2", CreatePod("p2", 10 * kGiB));
  EXPECT_EQ(s.code(), StatusCode::kConflict) << s;
  EXPECT_EQ(backend_->stats().fence_conflicts, 1u);
}

// An intent leaves the fence at the next write once the informer shows its pod bound.
TEST_F(KubeBackendTest, IntentsOfBoundPodsLeaveTheFence) {
  StartBackend();
  const std::string first = CreatePod("p1", 10 * kGiB);
  ASSERT_TRUE(ExtenderBind("p1", first).ok());
  ASSERT_TRUE(Eventually([&] { return backend_->HeldPodRequests().size() == 1; }));
  const std::string second = CreatePod("p2", 10 * kGiB);
  ASSERT_TRUE(ExtenderBind("p2", second).ok());
  auto lease = api_->Get(kube::LeasesResource(), "default", "gpupack-fence-n1");
  ASSERT_TRUE(lease.ok());
  Json stored = Json::parse((*lease)["metadata"]["annotations"]["gpupack.io/binds-in-flight"].get<std::string>());
  EXPECT_FALSE(stored.contains(first)) << stored;
  EXPECT_TRUE(stored.contains(second)) << stored;
}

// Binds to one node overlap (they take turns only at the fence write) and reuse connections.
TEST_F(KubeBackendTest, ConcurrentBindsToOneNodeAllLandOnKeptAliveConnections) {
  StartBackend();
  constexpr int kPods = 8;
  std::vector<std::string> uids;
  for (int i = 0; i < kPods; ++i) uids.push_back(CreatePod("p" + std::to_string(i), 10 * kGiB));
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < kPods; ++i) {
    threads.emplace_back([&, i] { ok += ExtenderBind("p" + std::to_string(i), uids[i]).ok(); });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), kPods);
  EXPECT_FALSE(Fits(1));
  // Each bind takes two connections at once (fence write and fresh read); eight binds in parallel
  // need at most sixteen, not the four per bind of one connection per call.
  const double opened = Sample(*backend_, "gpupack_kube_connections_opened_total{client=\"bind\"}");
  EXPECT_GE(opened, 1);
  EXPECT_LE(opened, 2.0 * kPods);
}

// Binds to one node share fence writes: while one write is out (here held 100 ms by the API
// server), the binds that arrive queue and the next write carries all their intents, with one
// fresh read for them. Eight binds at once need two writes in the best case, never eight.
TEST_F(KubeBackendTest, ConcurrentBindsToOneNodeShareFenceWrites) {
  StartBackend();
  constexpr int kPods = 8;
  std::vector<std::string> uids;
  for (int i = 0; i < kPods; ++i) uids.push_back(CreatePod("p" + std::to_string(i), 10 * kGiB));
  e2e::Faults slow_fence;
  slow_fence.path_contains = "/leases";
  slow_fence.latency_ms = 100;
  server_->SetFaults(slow_fence);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < kPods; ++i) {
    threads.emplace_back([&, i] { ok += ExtenderBind("p" + std::to_string(i), uids[i]).ok(); });
  }
  for (std::thread& t : threads) t.join();
  server_->SetFaults({});
  EXPECT_EQ(ok.load(), kPods);
  EXPECT_FALSE(Fits(1)) << "all eight are booked";
  const KubeBackendStats stats = backend_->stats();
  EXPECT_LT(stats.fence_writes, static_cast<uint64_t>(kPods)) << "no write carried two binds";
  EXPECT_GE(stats.fence_writes, 1u);
}

// RBAC forbids the fence. For a minute of refusals binds fail (Unavailable, so kube-scheduler
// retries): a kube-apiserver that just restarted refuses like this until its RBAC caches fill.
// Then binds go on with the fresh read, and the backend says so everywhere: Problem() (so
// /readyz), gpupack_bind_fence_up 0 and a Warning Event on the pod; once the permission is
// granted the fence works again at the next try.
TEST_F(KubeBackendTest, FenceThatCannotWorkIsLoudUntilItWorksAgain) {
  StartBackend();
  auto fence_up = [&] { return Sample(*backend_, "gpupack_bind_fence_up") == 1; };
  EXPECT_TRUE(fence_up());
  ForbidLeases();
  const std::string uid1 = CreatePod("p1", 10 * kGiB);
  Status refused = ExtenderBind("p1", uid1);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused;
  EXPECT_NE(refused.message().find("fence of node n1 refused"), std::string::npos) << refused;
  EXPECT_EQ(backend_->Problem(), "");
  EXPECT_TRUE(fence_up());
  clock_.Advance(std::chrono::seconds(59));
  RefreshHeartbeat();
  EXPECT_EQ(ExtenderBind("p1", uid1).code(), StatusCode::kUnavailable) << "refused for 59 s";
  clock_.Advance(std::chrono::seconds(2));
  RefreshHeartbeat();
  ASSERT_TRUE(ExtenderBind("p1", uid1).ok()) << "refused for 61 s: the fence is off";
  EXPECT_NE(backend_->Problem().find("bind fence off"), std::string::npos) << backend_->Problem();
  EXPECT_NE(backend_->Problem().find("namespace default"), std::string::npos) << backend_->Problem();
  EXPECT_FALSE(fence_up());
  EXPECT_TRUE(Eventually([&] {
    auto events = api_->List(kube::EventsResource(), "default");
    return events.ok() && std::any_of(events->items.begin(), events->items.end(), [](const Json& e) {
             return e.value("reason", "") == "GpupackBindFenceOff" && e.value("type", "") == "Warning" &&
                    e["involvedObject"].value("name", "") == "p1";
           });
  }));
  server_->SetFaults({});
  ASSERT_TRUE(ExtenderBind("p2", CreatePod("p2", 10 * kGiB)).ok());
  EXPECT_FALSE(fence_up()) << "tried again only after a while";
  clock_.Advance(std::chrono::seconds(61));
  RefreshHeartbeat();
  ASSERT_TRUE(ExtenderBind("p3", CreatePod("p3", 10 * kGiB)).ok());
  EXPECT_EQ(backend_->Problem(), "");
  EXPECT_TRUE(fence_up());
}

// The minute counts refusals in a row: a fence write that succeeds in between starts it again.
// Refused for 30 s, working, refused again 40 s later: 70 s after the first refusal the bind still
// fails instead of going on unfenced.
TEST_F(KubeBackendTest, FenceRefusalsCountFromTheLastWriteThatWorked) {
  StartBackend();
  ForbidLeases();
  const std::string uid1 = CreatePod("p1", 10 * kGiB);
  EXPECT_EQ(ExtenderBind("p1", uid1).code(), StatusCode::kUnavailable);
  clock_.Advance(std::chrono::seconds(30));
  RefreshHeartbeat();
  server_->SetFaults({});
  ASSERT_TRUE(ExtenderBind("p1", uid1).ok());
  ForbidLeases();
  clock_.Advance(std::chrono::seconds(40));
  RefreshHeartbeat();
  EXPECT_EQ(ExtenderBind("p2", CreatePod("p2", 10 * kGiB)).code(), StatusCode::kUnavailable);
  EXPECT_EQ(backend_->Problem(), "");
}

// Unfenced, this replica's own binds in flight on a node still count. Two binds of 50 GiB onto the
// 80 GiB GPU, chosen without the ledger (as from one that lacks a pod whose Binding failed to
// answer yet landed), overlap while their Bindings are held 300 ms: whichever checks second sees
// the other in flight (or bound) and is refused, so exactly one binds.
TEST_F(KubeBackendTest, UnfencedBindsCountThisReplicasOwnBindsInFlight) {
  StartBackend([](KubeBackendConfig& c) { c.fencing = false; });
  e2e::Faults slow;
  slow.path_contains = "/binding";
  slow.latency_ms = 300;
  server_->SetFaults(slow);
  auto bind = [&](const std::string& name, const std::string& uid) {
    return backend_->Bind({"default", name, uid}, "n1",
                          api::AllocationAnnotations(OneDevice("n1", "GPU-n1-0", 50 * kGiB)));
  };
  const std::string uid1 = CreatePod("p1", 50 * kGiB);
  const std::string uid2 = CreatePod("p2", 50 * kGiB);
  std::future<Status> first = std::async(std::launch::async, [&] { return bind("p1", uid1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const Status second = bind("p2", uid2);
  const Status one = first.get();
  EXPECT_NE(one.ok(), second.ok()) << one << " / " << second;
  const Status& refused = one.ok() ? second : one;
  EXPECT_EQ(refused.code(), StatusCode::kConflict) << refused;
  EXPECT_NE(refused.message().find("102400 MiB of 81920"), std::string::npos) << refused;
}

TEST_F(KubeBackendTest, LostBindResponseIsNotAFailure) {
  StartBackend();
  e2e::Faults lossy;
  lossy.error_after_commit_rate = 1.0;
  lossy.path_contains = "/binding";
  server_->SetFaults(lossy);
  const std::string uid = CreatePod("p1", 10 * kGiB);
  Status s = ExtenderBind("p1", uid);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(backend_->stats().idempotent_rebinds, 1u);
  server_->SetFaults({});
}

TEST_F(KubeBackendTest, LookupPodRejectsRecreatedPod) {
  StartBackend();
  CreatePod("p1", 10 * kGiB);
  auto wrong = backend_->LookupPod({"default", "p1", "some-old-uid"});
  EXPECT_EQ(wrong.status().code(), StatusCode::kNotFound);
  auto missing = backend_->LookupPod({"default", "nope", "u"});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpupack::cluster

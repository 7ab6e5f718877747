// The extender's defragmentation in dry-run (defragmenter.h), through the verbs: a filter that
// finds no room queues the pod, Maintain plans for it and reports the plan on the pod. Three
// one-GPU 80 GiB nodes under binpack; pods are placed through filter + bind as kube-scheduler
// would, and the backend lists which of them may move.
#include "scheduler/extender/defragmenter.h"

#include <gtest/gtest.h>

#include "scheduler/extender/extender.h"
#include "testing/builders.h"
#include "testing/fake_clock.h"
#include "translate/pod_request.h"

namespace gpupack::extender {
namespace {

struct Reported {
  std::string pod;  // namespace/name
  bool warning;
  std::string reason;
  std::string message;
};

class MovableBackend final : public ClusterBackend {
 public:
  Status Start(ClusterState&) override { return Status::Ok(); }
  bool Synced() const override { return true; }
  StatusOr<model::PodRequest> LookupPod(const BindTarget& pod) override {
    return Status::NotFound("pod " + pod.name + " unknown to the test backend");
  }
  Status Bind(const BindTarget&, const std::string&, const std::map<std::string, std::string>&) override {
    return Status::Ok();
  }
  void Stop() override {}
  std::vector<MovablePodOnNode> MovablePods() const override { return movable; }
  StatusOr<bool> TakeActorLease(std::chrono::seconds) override { return acting; }
  StatusOr<EvictionOutcome> EvictPod(const BindTarget& pod) override {
    if (pod.name == refuse)
      return EvictionOutcome{false, "The disruption budget " + pod.name + " needs 1 healthy pods"};
    evicted.push_back(pod.ns + "/" + pod.name);
    return EvictionOutcome{true, ""};
  }
  void ReportOnPod(const BindTarget& pod, bool warning, const std::string& reason,
                   const std::string& message) override {
    reports.push_back({pod.ns + "/" + pod.name, warning, reason, message});
  }

  std::vector<MovablePodOnNode> movable;
  std::vector<Reported> reports;
  std::vector<std::string> evicted;
  std::string refuse;  // a pod whose eviction a PodDisruptionBudget refuses
  bool acting = true;  // this replica holds the defragmentation lease
};

class DefragmenterTest : public ::testing::Test {
 protected:
  DefragmenterTest() {
    for (const char* name : {"n-a", "n-b", "n-c"}) state_.UpsertNode(builders::GpuNode(name, 1, 81920));
  }
  Extender Make(DefragConfig defrag = {}) {
    ExtenderOptions options;
    options.defrag = defrag;
    return Extender(state_, backend_, options, clock_, &metrics_);
  }
  // Places pod `name` of `memory` on `node` through filter and bind; `movable` lists it as a pod
  // the backend's owner lets move.
  void Place(Extender& extender, const std::string& name, const std::string& memory, const std::string& node,
             bool movable) {
    const nlohmann::json pod = builders::PodJson(name, "uid-" + name, memory);
    ASSERT_EQ(extender.Filter(builders::FilterBody(pod, {node})).status, 200);
    const Reply bound = extender.Bind(builders::BindBody(name, "uid-" + name, node));
    ASSERT_EQ(nlohmann::json::parse(bound.body).value("Error", ""), "") << bound.body;
    if (movable) {
      StatusOr<model::PodRequest> request = translate::ParsePodRequest(pod, 16);
      ASSERT_TRUE(request.ok()) << request.status();
      backend_.movable.push_back({*request, node, "default/ReplicaSet/" + name});
    }
  }
  // n-a: movable a1 20 + a2 20 and a fixed 40 (full); n-b and n-c: a fixed 60 each (20 free).
  void Fragment(Extender& extender) {
    Place(extender, "a1", "20Gi", "n-a", true);
    Place(extender, "a2", "20Gi", "n-a", true);
    Place(extender, "a-fixed", "40Gi", "n-a", false);
    Place(extender, "b-fixed", "60Gi", "n-b", false);
    Place(extender, "c-fixed", "60Gi", "n-c", false);
  }
  // The 40 GiB pod's filter over every node: it fits on none.
  void FilterTrain(Extender& extender) {
    const Reply r = extender.Filter(builders::FilterBody(train_, {"n-a", "n-b", "n-c"}));
    ASSERT_EQ(nlohmann::json::parse(r.body)["NodeNames"].size(), 0u) << r.body;
  }

  FakeClock clock_;
  ClusterState state_{builders::PriorPolicy(model::PolicyKind::kBinpack), clock_, std::chrono::seconds(0)};
  MovableBackend backend_;
  ExtenderMetrics metrics_{&state_, true, BuildInfo{"0.1.0", "test"}};
  const nlohmann::json train_ = builders::PodJson("train", "uid-train", "40Gi");
};

TEST_F(DefragmenterTest, DryRunReportsThePlanOnTheWaitingPodAndEvictsNothing) {
  Extender extender = Make();
  Fragment(extender);
  FilterTrain(extender);
  extender.Maintain();
  ASSERT_EQ(backend_.reports.size(), 1u);
  const Reported& r = backend_.reports[0];
  EXPECT_EQ(r.pod, "default/train");
  EXPECT_FALSE(r.warning);
  EXPECT_EQ(r.reason, "GpupackDefragPlan");
  // Fresh nodes in name order; binpack re-places a1 on n-b (0 left; n-c ties later) and a2 on n-c.
  EXPECT_EQ(r.message,
            "gpupack defragmentation (dry-run: nothing evicted): would evict default/a1 (20480 MiB) from n-a, it fits "
            "again on n-b; evict default/a2 (20480 MiB) from n-a, it fits again on n-c: then default/train fits on "
            "n-a (2 moves, 40960 MiB moved)");
  // Nothing moved: the ledger is as the binds left it, and the pod still fits nowhere.
  EXPECT_EQ(state_.NodeOfPod("uid-a1"), "n-a");
  EXPECT_EQ(state_.NodeOfPod("uid-a2"), "n-a");
  const std::string scrape = metrics_.Render();
  EXPECT_NE(scrape.find("gpupack_defrag_plans_total{outcome=\"planned\"} 1"), std::string::npos) << scrape;
  EXPECT_NE(scrape.find("gpupack_defrag_planned_moves_total 2"), std::string::npos);
}

TEST_F(DefragmenterTest, AWaitingPodIsPlannedForAgainOnlyAfterReplanAfter) {
  Extender extender = Make();
  Fragment(extender);
  FilterTrain(extender);
  extender.Maintain();
  // kube-scheduler retries the pod: no second plan, no second Event, within 5 minutes.
  clock_.Advance(std::chrono::minutes(4));
  FilterTrain(extender);
  extender.Maintain();
  EXPECT_EQ(backend_.reports.size(), 1u);
  clock_.Advance(std::chrono::minutes(1));
  FilterTrain(extender);
  extender.Maintain();
  EXPECT_EQ(backend_.reports.size(), 2u);
}

TEST_F(DefragmenterTest, OffPlansNothing) {
  Extender extender = Make(DefragConfig{.mode = DefragMode::kOff});
  Fragment(extender);
  FilterTrain(extender);
  extender.Maintain();
  EXPECT_TRUE(backend_.reports.empty());
  EXPECT_EQ(metrics_.Render().find("gpupack_defrag_plans_total{"), std::string::npos);
}

TEST_F(DefragmenterTest, NothingMovableIsCountedWithoutAnEventAndNoReplacementIsExplained) {
  Extender extender = Make();
  Fragment(extender);
  const std::vector<MovablePodOnNode> listed = backend_.movable;
  backend_.movable.clear();
  FilterTrain(extender);
  extender.Maintain();
  EXPECT_TRUE(backend_.reports.empty());
  EXPECT_NE(metrics_.Render().find("gpupack_defrag_plans_total{outcome=\"no_movable_room\"} 1"), std::string::npos);

  // With a1 and a2 movable again but n-c full, a2 would fit nowhere: the pod is told why.
  backend_.movable = listed;
  Place(extender, "c-more", "20Gi", "n-c", false);
  clock_.Advance(std::chrono::minutes(5));
  FilterTrain(extender);
  extender.Maintain();
  ASSERT_EQ(backend_.reports.size(), 1u);
  EXPECT_EQ(backend_.reports[0].reason, "GpupackDefragNoPlan");
  EXPECT_EQ(backend_.reports[0].message,
            "gpupack defragmentation: no plan: 1 set of moves makes room for default/train on 1 node, but it evicts a "
            "pod that then fits nowhere");
}

TEST_F(DefragmenterTest, OnlyRefusalsForWantOfDeviceRoomArePlannedFor) {
  Extender extender = Make();
  Fragment(extender);
  // A pod pinned to a model no node has is refused for its rule, not for room: never queued.
  nlohmann::json pinned = builders::PodJson("pinned", "uid-pinned", "40Gi");
  pinned["metadata"]["annotations"] = {{"gpupack.io/gpu-model", "H100"}};
  extender.Filter(builders::FilterBody(pinned, {"n-a", "n-b", "n-c"}));
  extender.Maintain();
  EXPECT_TRUE(backend_.reports.empty());
  EXPECT_EQ(metrics_.Render().find("gpupack_defrag_plans_total{"), std::string::npos);
}

// On: the plan's pods are evicted in order, each told why, and once both have left the ledger (as
// the pod informer removes them) the room on n-a is held for the waiting pod.
TEST_F(DefragmenterTest, OnEvictsThePlanAndHoldsTheRoomOnceTheEvictedPodsAreGone) {
  Extender extender = Make(DefragConfig{.mode = DefragMode::kOn});
  Fragment(extender);
  FilterTrain(extender);
  extender.Maintain();
  EXPECT_EQ(backend_.evicted, (std::vector<std::string>{"default/a1", "default/a2"}));
  ASSERT_EQ(backend_.reports.size(), 3u);
  EXPECT_EQ(backend_.reports[0].reason, "GpupackDefragPlan");
  EXPECT_EQ(backend_.reports[0].message.rfind("gpupack defragmentation: evict default/a1 (20480 MiB) from n-a", 0), 0u)
      << backend_.reports[0].message;
  EXPECT_EQ(backend_.reports[1].pod, "default/a1");
  EXPECT_EQ(backend_.reports[1].reason, "GpupackDefragEvicted");
  EXPECT_EQ(backend_.reports[1].message,
            "evicted by gpupack defragmentation to make room for default/train, which fits on no node as the cluster "
            "is; it fits again on n-b");
  EXPECT_EQ(backend_.reports[2].pod, "default/a2");
  EXPECT_EQ(state_.ClaimCount(), 1u);
  EXPECT_EQ(state_.HoldCount(), 0u);
  state_.RemovePod("uid-a1");
  EXPECT_EQ(state_.HoldCount(), 0u);  // a2 still holds 20 GiB of the 40 the pod needs
  state_.RemovePod("uid-a2");
  EXPECT_EQ(state_.ClaimCount(), 0u);
  EXPECT_EQ(state_.HoldCount(), 1u);
  // The room is the waiting pod's: another 40 GiB pod (a replacement, say) finds none on n-a.
  const std::optional<placement::NodeEvaluation> other =
      state_.Evaluate("n-a", *translate::ParsePodRequest(builders::PodJson("other", "uid-other", "40Gi"), 16));
  ASSERT_TRUE(other.has_value());
  EXPECT_FALSE(other->verdict.fits());
  const std::string scrape = metrics_.Render();
  EXPECT_NE(scrape.find("gpupack_defrag_evictions_total{result=\"evicted\"} 2"), std::string::npos) << scrape;
}

TEST_F(DefragmenterTest, OnStopsAtABudgetsRefusalAndClaimsNothing) {
  Extender extender = Make(DefragConfig{.mode = DefragMode::kOn});
  Fragment(extender);
  backend_.refuse = "a2";
  FilterTrain(extender);
  extender.Maintain();
  EXPECT_EQ(backend_.evicted, (std::vector<std::string>{"default/a1"}));
  ASSERT_EQ(backend_.reports.size(), 3u);
  EXPECT_EQ(backend_.reports[2].pod, "default/train");
  EXPECT_EQ(backend_.reports[2].reason, "GpupackDefragStopped");
  EXPECT_FALSE(backend_.reports[2].warning);
  EXPECT_EQ(backend_.reports[2].message,
            "gpupack defragmentation: a PodDisruptionBudget forbids evicting default/a2 now (The disruption budget a2 "
            "needs 1 healthy pods); 1 of 2 moves made, the rest not tried");
  EXPECT_EQ(state_.ClaimCount(), 0u);
  EXPECT_NE(metrics_.Render().find("gpupack_defrag_evictions_total{result=\"refused_by_budget\"} 1"),
            std::string::npos);
}

// A replica without the defragmentation lease evicts nothing (the plan is still reported).
TEST_F(DefragmenterTest, OnEvictsOnlyWithTheLease) {
  Extender extender = Make(DefragConfig{.mode = DefragMode::kOn});
  Fragment(extender);
  backend_.acting = false;
  FilterTrain(extender);
  extender.Maintain();
  EXPECT_TRUE(backend_.evicted.empty());
  EXPECT_EQ(state_.ClaimCount(), 0u);
  EXPECT_NE(metrics_.Render().find("gpupack_defrag_evictions_total{result=\"not_leader\"} 2"), std::string::npos);
}

// maxMovesPerHour 1: the two-move plan waits, and nothing is evicted.
TEST_F(DefragmenterTest, OnDefersAPlanThatWouldPassTheHourlyBound) {
  Extender extender = Make(DefragConfig{.mode = DefragMode::kOn, .max_moves_per_hour = 1});
  Fragment(extender);
  FilterTrain(extender);
  extender.Maintain();
  EXPECT_TRUE(backend_.evicted.empty());
  ASSERT_EQ(backend_.reports.size(), 2u);
  EXPECT_EQ(backend_.reports[1].reason, "GpupackDefragDeferred");
  EXPECT_EQ(backend_.reports[1].message,
            "gpupack defragmentation: the plan's 2 evictions would pass defragmentation.maxMovesPerHour (1; 0 in the "
            "last hour): it waits");
}

// A workload whose pod was moved rests for the cool-down (30 minutes): its pods (the test backend
// keeps listing them, as it would list their replacements) are not moved again before.
TEST_F(DefragmenterTest, OnLetsAMovedWorkloadRestForTheCooldown) {
  Extender extender = Make(DefragConfig{.mode = DefragMode::kOn});
  Fragment(extender);
  FilterTrain(extender);
  extender.Maintain();
  ASSERT_EQ(backend_.evicted.size(), 2u);
  clock_.Advance(std::chrono::minutes(5));
  FilterTrain(extender);
  extender.Maintain();
  EXPECT_EQ(backend_.evicted.size(), 2u);
  EXPECT_NE(metrics_.Render().find("gpupack_defrag_plans_total{outcome=\"no_movable_room\"} 1"), std::string::npos);
  clock_.Advance(std::chrono::minutes(25));
  FilterTrain(extender);
  extender.Maintain();
  EXPECT_EQ(backend_.evicted.size(), 4u);
}

TEST(DefragMode, ParsesItsNamesAndRefusesOthers) {
  EXPECT_EQ(*ParseDefragMode("off"), DefragMode::kOff);
  EXPECT_EQ(*ParseDefragMode("dry-run"), DefragMode::kDryRun);
  EXPECT_EQ(*ParseDefragMode("on"), DefragMode::kOn);
  EXPECT_EQ(ParseDefragMode("yes").status().message(), "expected off, dry-run or on, got \"yes\"");
  EXPECT_EQ(DefragModeName(DefragMode::kDryRun), "dry-run");
}

}  // namespace
}  // namespace gpupack::extender

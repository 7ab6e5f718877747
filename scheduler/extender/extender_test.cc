// Long file: the table tests of one component (the extender's four verbs).
#include "scheduler/extender/extender.h"

#include <algorithm>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "api/allocation.h"
#include "api/annotations.h"
#include "testing/builders.h"
#include "testing/fake_clock.h"
#include "translate/pod_request.h"

namespace gpupack::extender {
namespace {

using builders::BindBody;
using builders::FilterBody;
using builders::GpuNode;
using builders::PodJson;
using nlohmann::json;

// A backend whose sync state and bind outcome a test controls; records binds like standalone.
class ScriptedBackend final : public ClusterBackend {
 public:
  Status Start(ClusterState&) override { return Status::Ok(); }
  bool Synced() const override { return synced; }
  StatusOr<model::PodRequest> LookupPod(const BindTarget& pod) override {
    return Status::NotFound("pod " + pod.name + " unknown to the test backend");
  }
  Status Bind(const BindTarget& pod, const std::string& node,
              const std::map<std::string, std::string>& annotations) override {
    if (!bind_error.ok()) return bind_error;
    binds[pod.uid] = {node, annotations};
    return Status::Ok();
  }
  void Stop() override {}
  std::vector<model::PodRequest> HeldPodRequests() const override { return held; }
  std::vector<model::PodRequest> WaitingPodRequests() const override { return waiting; }

  bool synced = true;
  std::vector<model::PodRequest> held;
  std::vector<model::PodRequest> waiting;
  Status bind_error;
  std::map<std::string, StandaloneBackend::BindRecord> binds;
};

class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Free memory after an 8 GiB pod: a 4 GiB left on n-tight, 8 GiB on n-mid, 72 GiB on n-roomy.
    state_.UpsertNode(GpuNode("n-tight", 1, 12288));
    state_.UpsertNode(GpuNode("n-mid", 1, 16384));
    state_.UpsertNode(GpuNode("n-roomy", 1, 81920));
    state_.UpsertNode(GpuNode("n-small", 1, 4096));
  }
  Extender Make(ExtenderOptions options = {}) { return Extender(state_, backend_, options, clock_, &metrics_); }
  static json Parse(const Reply& r) {
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }

  FakeClock clock_;
  ClusterState state_{builders::PriorPolicy(model::PolicyKind::kBinpack), clock_, std::chrono::seconds(0)};
  ScriptedBackend backend_;
  ExtenderMetrics metrics_{&state_, true, BuildInfo{"0.1.0", "test"}};
  const std::vector<std::string> all_ = {"n-tight", "n-mid", "n-roomy", "n-small", "cpu-only"};
};

TEST_F(ExtenderTest, DecisiveFilterKeepsOnlyTheBestNodeAndExplainsTheRest) {
  Extender ext = Make();
  json r = Parse(ext.Filter(FilterBody(PodJson("p", "u1", "8Gi"), all_)));
  EXPECT_EQ(r["NodeNames"], json({"n-tight"}));
  EXPECT_TRUE(r["Nodes"].is_null());
  EXPECT_EQ(r["Error"], "");
  // A 4 GiB GPU can never hold 8 GiB: preemption cannot help, so it is unresolvable.
  EXPECT_TRUE(r["FailedNodes"].empty());
  EXPECT_NE(r["FailedAndUnresolvableNodes"]["n-small"].get<std::string>().find("8192"), std::string::npos) << r.dump();
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["cpu-only"], "node has no GPUs known to gpupack");
  EXPECT_NE(metrics_.Render().find("gpupack_filter_node_rejections_total{reason=\""), std::string::npos);
}

TEST_F(ExtenderTest, WithoutTheDecisiveFilterPrioritizeRanksByCost) {
  ExtenderOptions options;
  options.decisive_filter = false;
  Extender ext = Make(options);
  json f = Parse(ext.Filter(FilterBody(PodJson("p", "u1", "8Gi"), all_)));
  EXPECT_EQ(f["NodeNames"], json({"n-tight", "n-mid", "n-roomy"}));
  json p = Parse(ext.Prioritize(FilterBody(PodJson("p", "u1", "8Gi"), {"n-roomy", "n-mid", "n-tight", "cpu-only"})));
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0], json({{"Host", "n-roomy"}, {"Score", 1}}));
  EXPECT_EQ(p[1], json({{"Host", "n-mid"}, {"Score", 5}}));
  EXPECT_EQ(p[2], json({{"Host", "n-tight"}, {"Score", 10}}));
  EXPECT_EQ(p[3], json({{"Host", "cpu-only"}, {"Score", 0}}));
}

TEST_F(ExtenderTest, RankScoresKeepTheBestAloneAtTheTop) {
  EXPECT_EQ(Extender::RankScores(1), std::vector<int64_t>{10});
  EXPECT_EQ(Extender::RankScores(2), (std::vector<int64_t>{10, 1}));
  std::vector<int64_t> many = Extender::RankScores(40);
  EXPECT_EQ(many.front(), 10);
  EXPECT_EQ(many[1], 9);
  EXPECT_EQ(many.back(), 1);
  EXPECT_TRUE(std::is_sorted(many.rbegin(), many.rend()));
  // 10 - ceil(9 r / (levels - 1)), computed in integers, for level counts into the thousands.
  for (size_t levels = 2; levels <= 6000; levels += 97) {
    const std::vector<int64_t> scores = Extender::RankScores(levels);
    for (size_t r = 0; r < levels; ++r) {
      ASSERT_EQ(scores[r], 10 - static_cast<int64_t>(std::ceil(9.0 * double(r) / double(levels - 1))))
          << r << " of " << levels;
    }
  }
}

TEST_F(ExtenderTest, FullNodeObjectsAreEchoedInNodes) {
  Extender ext = Make();
  json body = {
      {"Pod", PodJson("p", "u1", "8Gi")},
      {"Nodes",
       {{"metadata", json::object()},
        {"items",
         {{{"metadata", {{"name", "n-mid"}}}, {"status", {{"x", 1}}}}, {{"metadata", {{"name", "n-small"}}}}}}}},
      {"NodeNames", nullptr}};
  json r = Parse(ext.Filter(body.dump()));
  EXPECT_TRUE(r["NodeNames"].is_null());
  ASSERT_EQ(r["Nodes"]["items"].size(), 1u);
  EXPECT_EQ(r["Nodes"]["items"][0], body["Nodes"]["items"][0]);
}

TEST_F(ExtenderTest, PodsWithoutAGpupackRequestPassEveryNode) {
  Extender ext = Make();
  json r = Parse(ext.Filter(FilterBody(PodJson("web", "u9", "", 0), all_)));
  EXPECT_EQ(r["NodeNames"].size(), all_.size());
  json p = Parse(ext.Prioritize(FilterBody(PodJson("web", "u9", "", 0), {"n-mid", "cpu-only"})));
  EXPECT_EQ(p[0]["Score"], 10) << "scored by the policy";
  ExtenderOptions neutral;
  neutral.neutral_non_gpu_pods = true;
  Extender ext2 = Make(neutral);
  p = Parse(ext2.Prioritize(FilterBody(PodJson("web", "u9", "", 0), {"n-mid", "cpu-only"})));
  EXPECT_EQ(p, json::parse(R"([{"Host":"n-mid","Score":0},{"Host":"cpu-only","Score":0}])"));
}

TEST_F(ExtenderTest, AnInvalidRequestFailsEveryNodeUnresolvably) {
  Extender ext = Make();
  json r = Parse(ext.Filter(FilterBody(PodJson("p", "u1", "lots"), {"n-mid", "n-roomy"})));
  EXPECT_TRUE(r["NodeNames"].empty());
  ASSERT_EQ(r["FailedAndUnresolvableNodes"].size(), 2u);
  EXPECT_NE(r["FailedAndUnresolvableNodes"]["n-mid"].get<std::string>().find("gpu-memory"), std::string::npos)
      << r.dump();
  EXPECT_EQ(r["Error"], "");
}

// It used to say "Pod is missing" once per node, as if the nodes were at fault.
TEST_F(ExtenderTest, AFilterWithoutAPodIsOneErrorNotOnePerNode) {
  Extender ext = Make();
  json r = Parse(ext.Filter(R"({"NodeNames":["n-mid","n-roomy"]})"));
  EXPECT_EQ(r["Error"], "ExtenderArgs.Pod is missing or not an object");
  EXPECT_TRUE(r["FailedNodes"].empty()) << r.dump();
  EXPECT_TRUE(r["FailedAndUnresolvableNodes"].empty()) << r.dump();
}

// The webhook denies it; a pod that got past the webhook gets the same message from the extender.
TEST_F(ExtenderTest, AnUnknownGpupackResourceIsUnschedulableWithTheWebhooksMessage) {
  Extender ext = Make();
  json pod = PodJson("p", "u1", "8Gi");
  pod["spec"]["containers"][0]["resources"]["limits"].erase("gpupack.io/gpu-memory");
  pod["spec"]["containers"][0]["resources"]["limits"]["gpupack.io/gpu-mem"] = "8Gi";
  json r = Parse(ext.Filter(FilterBody(pod, {"n-mid", "n-roomy"})));
  EXPECT_TRUE(r["NodeNames"].empty()) << r.dump();
  const StatusOr<model::PodRequest> webhook_view = translate::ParsePodRequest(pod);
  ASSERT_FALSE(webhook_view.ok());
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["n-mid"], "invalid gpupack request: " + webhook_view.status().message());
  EXPECT_NE(webhook_view.status().message().find("gpupack.io/gpu-memory, gpupack.io/gpu"), std::string::npos);
}

// Standalone mode logged nothing about decisions, and a bind did not say which device it chose.
TEST_F(ExtenderTest, LogsOneInfoLinePerDecisionWithNodeDevicesCapAndReason) {
  Extender ext = Make();
  Parse(ext.Filter(FilterBody(PodJson("p", "u1", "8Gi"), all_)));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(Parse(ext.Bind(BindBody("p", "u1", "n-mid")))["Error"], "");
  Parse(ext.Filter(FilterBody(PodJson("huge", "u2", "100Gi"), {"n-mid", "n-small"})));
  Parse(ext.Filter(FilterBody(PodJson("bad", "u3", "lots"), {"n-mid"})));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find(" INFO extender: decision pod=default/p node=n-mid devices=main:GPU-n-mid-0#0 cap=8192MiB "
                     "reason=\"bound (policy binpack)\"\n"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(" INFO extender: decision pod=default/huge node=none devices=none cap=none reason=\"no node fits "
                     "(2 device_too_small), e.g. n-mid: "),
            std::string::npos)
      << log;
  EXPECT_NE(
      log.find(" INFO extender: decision pod=default/bad node=none devices=none cap=none reason=\"invalid gpupack "
               "request: "),
      std::string::npos)
      << log;
}

TEST_F(ExtenderTest, BadBodiesGetErrorsAndNeverTouchTheLedger) {
  Extender ext = Make();
  for (const char* body : {"", "{", "[]", "null", "\xff", R"({"NodeNames":7})", R"({"Pod":"x","NodeNames":[]})"}) {
    json f = Parse(ext.Filter(body));
    EXPECT_FALSE(f["Error"].get<std::string>().empty()) << body;
    EXPECT_EQ(ext.Prioritize(body).status, 400) << body;
  }
  for (const char* body : {"", "{", "[]", R"({"PodUID":1})", R"({"PodUID":"u","Node":""})"}) {
    EXPECT_FALSE(Parse(ext.Bind(body))["Error"].get<std::string>().empty()) << body;
  }
  for (const char* body : {"", "{", "[]", R"({"NodeNameToMetaVictims":[]})", R"({"Pod":1})"}) {
    EXPECT_EQ(ext.Preempt(body).status, 400) << body;
  }
  EXPECT_FALSE(Parse(ext.Bind(BindBody("p", "", "n-mid")))["Error"].get<std::string>().empty());
  EXPECT_EQ(state_.PodCount(), 0u);
  EXPECT_TRUE(backend_.binds.empty());
}

TEST_F(ExtenderTest, BindAfterFilterReservesAndWritesTheAnnotations) {
  Extender ext = Make();
  Parse(ext.Filter(FilterBody(PodJson("p", "u1", "8Gi"), all_)));
  json b = Parse(ext.Bind(BindBody("p", "u1", "n-mid")));
  EXPECT_EQ(b, json({{"Error", ""}}));
  ASSERT_EQ(backend_.binds.count("u1"), 1u);
  const auto& record = backend_.binds["u1"];
  EXPECT_EQ(record.node, "n-mid");
  EXPECT_EQ(record.annotations.at(api::ContainerAnnotationKey(false, 0, api::ContainerEnvKey::kVisibleDevices)),
            "GPU-n-mid-0");
  EXPECT_EQ(record.annotations.at(api::ContainerAnnotationKey(false, 0, api::ContainerEnvKey::kMemoryLimitMiB)),
            "8192");
  StatusOr<api::Allocation> allocation =
      api::DecodeAllocation(record.annotations.at(std::string(api::kAnnotationAllocation)));
  ASSERT_TRUE(allocation.ok()) << allocation.status();
  EXPECT_EQ(allocation->node, "n-mid");
  EXPECT_EQ(state_.ReservationCount(), 0u);
  EXPECT_EQ(state_.NodeOfPod("u1"), "n-mid");
  // kube-scheduler may retry a bind whose reply it lost: same UID, same node = success.
  EXPECT_EQ(Parse(ext.Bind(BindBody("p", "u1", "n-mid"))), json({{"Error", ""}}));
  // The next identical pod no longer fits on n-mid's remaining 8 GiB... it does exactly; a third does not.
  Parse(ext.Filter(FilterBody(PodJson("q", "u2", "8Gi"), all_)));
  EXPECT_EQ(Parse(ext.Bind(BindBody("q", "u2", "n-mid")))["Error"], "");
  Parse(ext.Filter(FilterBody(PodJson("r", "u3", "8Gi"), all_)));
  json full = Parse(ext.Bind(BindBody("r", "u3", "n-mid")));
  EXPECT_NE(full["Error"].get<std::string>().find("no longer fits"), std::string::npos) << full.dump();
  EXPECT_EQ(state_.PodCount(), 2u);
  // The bound u1 asked for on another node: refused, and counted apart from the lost race above.
  json elsewhere = Parse(ext.Bind(BindBody("p", "u1", "n-roomy")));
  EXPECT_NE(elsewhere["Error"].get<std::string>().find("already holds devices on node n-mid"), std::string::npos)
      << elsewhere.dump();
  const std::string text = metrics_.Render();
  for (const char* sample : {"gpupack_extender_requests_total{result=\"ok\",verb=\"bind\"} 3\n",
                             "gpupack_extender_requests_total{result=\"no_fit\",verb=\"bind\"} 1\n",
                             "gpupack_extender_requests_total{result=\"bound_elsewhere\",verb=\"bind\"} 1\n"}) {
    EXPECT_NE(text.find(sample), std::string::npos) << sample << text;
  }
}

TEST_F(ExtenderTest, AFailedBindReleasesTheDevices) {
  Extender ext = Make();
  Parse(ext.Filter(FilterBody(PodJson("p", "u1", "8Gi"), all_)));
  backend_.bind_error = Status::Unavailable("API server down");
  json b = Parse(ext.Bind(BindBody("p", "u1", "n-mid")));
  EXPECT_NE(b["Error"].get<std::string>().find("API server down"), std::string::npos);
  EXPECT_EQ(state_.PodCount(), 0u);
  backend_.bind_error = Status::Conflict("pod default/p is already assigned to node n-roomy");
  EXPECT_NE(Parse(ext.Bind(BindBody("p", "u1", "n-mid")))["Error"], "");
  EXPECT_EQ(state_.PodCount(), 0u);
  backend_.bind_error = Status::Ok();
  EXPECT_EQ(Parse(ext.Bind(BindBody("p", "u1", "n-mid")))["Error"], "");
  const std::string text = metrics_.Render();
  for (const char* sample :
       {"gpupack_bind_requests_total{result=\"success\"} 1\n", "gpupack_bind_requests_total{result=\"conflict\"} 1\n",
        "gpupack_bind_requests_total{result=\"error\"} 1\n"}) {
    EXPECT_NE(text.find(sample), std::string::npos) << sample << text;
  }
}

TEST_F(ExtenderTest, BindOfAnUnknownPodOrAfterTheMemoryExpiredIsRefused) {
  Extender ext = Make();
  EXPECT_NE(
      Parse(ext.Bind(BindBody("p", "u1", "n-mid")))["Error"].get<std::string>().find("unknown to the test backend"),
      std::string::npos);
  Parse(ext.Filter(FilterBody(PodJson("p", "u1", "8Gi"), all_)));
  clock_.Advance(std::chrono::minutes(11));
  ext.Maintain();
  EXPECT_FALSE(Parse(ext.Bind(BindBody("p", "u1", "n-mid")))["Error"].get<std::string>().empty());
  EXPECT_EQ(state_.PodCount(), 0u);
}

TEST_F(ExtenderTest, NotSyncedAnswersWithAnError) {
  backend_.synced = false;
  Extender ext = Make();
  EXPECT_NE(
      Parse(ext.Filter(FilterBody(PodJson("p", "u1", "8Gi"), all_)))["Error"].get<std::string>().find("not synced"),
      std::string::npos);
  EXPECT_EQ(ext.Prioritize(FilterBody(PodJson("p", "u1", "8Gi"), all_)).status, 503);
  EXPECT_FALSE(ext.Ready());
}

TEST_F(ExtenderTest, PreemptKeepsOnlyNodesWhereTheVictimsFreeEnoughMemory) {
  Extender ext = Make();
  for (const char* uid : {"v1", "v2"}) {
    Parse(ext.Filter(FilterBody(PodJson(uid, uid, "8Gi"), {"n-mid"})));
    ASSERT_EQ(Parse(ext.Bind(BindBody(uid, uid, "n-mid")))["Error"], "");
  }
  Parse(ext.Filter(FilterBody(PodJson("w", "w", "8Gi"), {"n-tight"})));
  ASSERT_EQ(Parse(ext.Bind(BindBody("w", "w", "n-tight")))["Error"], "");
  json args = {{"Pod", PodJson("big", "big", "12Gi")},
               {"NodeNameToVictims", nullptr},
               {"NodeNameToMetaVictims",
                {{"n-mid", {{"Pods", {{{"UID", "v1"}}}}, {"NumPDBViolations", 0}}},   // frees 8 of 16: not enough
                 {"n-tight", {{"Pods", {{{"UID", "w"}}}}, {"NumPDBViolations", 1}}},  // frees all 12
                 {"n-roomy", {{"Pods", json::array()}, {"NumPDBViolations", 0}}}}}};  // no victims: dropped
  json r = Parse(ext.Preempt(args.dump()));
  EXPECT_EQ(r, json::parse(R"({"NodeNameToMetaVictims":{"n-tight":{"Pods":[{"UID":"w"}],"NumPDBViolations":1}}})"));
  args["NodeNameToMetaVictims"]["n-mid"]["Pods"] = {{{"UID", "v1"}}, {{"UID", "v2"}}};
  r = Parse(ext.Preempt(args.dump()));
  EXPECT_EQ(r["NodeNameToMetaVictims"].size(), 2u);
  EXPECT_EQ(state_.PodCount(), 3u) << "preempt is a dry run";
}

// Plays kube-scheduler against the extender (filter; prioritize when more than one node is left;
// score × weight × 10; highest total wins, ties broken at random) and checks that every pick is
// a node of minimal FGD cost, with and without the decisive filter.
// kube-scheduler sees only scores 0–10 and breaks ties at random; every pick must still be a
// best node: the exact minimum cost, or, when ranking on FGD levels, a node on the best level.
TEST(ExtenderRanking, SurvivesQuantisationAndRandomTieBreaks) {
  for (int variant = 0; variant < 4; ++variant) {
    const bool decisive = variant % 2 == 0;
    const model::MiB level_unit = variant < 2 ? 0 : 81920;
    FakeClock clock;
    ClusterState state(builders::PriorPolicy(model::PolicyKind::kFgd), clock, std::chrono::seconds(0));
    ScriptedBackend backend;
    std::vector<std::string> names;
    for (int i = 0; i < 24; ++i) {
      const std::string name = "node-" + std::to_string(i);
      state.UpsertNode(i % 3 == 0 ? GpuNode(name, 4, 40960) : GpuNode(name, 8, 81920));
      names.push_back(name);
    }
    ExtenderOptions options;
    options.decisive_filter = decisive;
    options.decision.fgd_levels = level_unit > 0;
    options.decision.device_mib = level_unit;
    options.decision.refresh_pods = 0;  // one fixed policy, so costs are comparable across the run
    Extender ext(state, backend, options, clock, nullptr);
    std::mt19937 rng(7);
    const char* sizes[] = {"5Gi", "10Gi", "10Gi", "20Gi", "40Gi", "70Gi"};
    int placed = 0;
    for (int p = 0; p < 150; ++p) {
      const std::string uid = "pod-" + std::to_string(p);
      const json pod = PodJson(uid, uid, sizes[rng() % 6]);
      StatusOr<model::PodRequest> request = translate::ParsePodRequest(pod);
      ASSERT_TRUE(request.ok());
      const std::string shape = ClusterState::ShapeKey(*request);
      double best = 0;
      bool any = false;
      for (const std::string& n : names) {
        auto a = state.Assess(n, *request, shape);
        if (a->verdict.fits() && (!any || a->cost < best)) best = a->cost;
        any = any || a->verdict.fits();
      }
      json filtered = json::parse(ext.Filter(FilterBody(pod, names)).body);
      std::vector<std::string> feasible = filtered["NodeNames"];
      ASSERT_EQ(feasible.empty(), !any);
      if (feasible.empty()) continue;
      std::string chosen = feasible[0];
      if (feasible.size() > 1) {
        json scores = json::parse(ext.Prioritize(FilterBody(pod, feasible)).body);
        int64_t top = -1;
        std::vector<std::string> tied;
        for (const json& hp : scores) {
          const int64_t total = hp["Score"].get<int64_t>() * 10 * 10;  // weight 10, × MaxNodeScore/10
          if (total > top) tied.clear();
          if (total >= top) {
            top = total;
            tied.push_back(hp["Host"]);
          }
        }
        chosen = tied[rng() % tied.size()];
      }
      const double cost = state.Assess(chosen, *request, shape)->cost;
      if (level_unit == 0) {
        EXPECT_NEAR(cost, best, 1e-6) << "pod " << p << " went to " << chosen << (decisive ? " (decisive)" : "");
      } else {
        EXPECT_EQ(placement::FgdScoreLevel(cost, level_unit), placement::FgdScoreLevel(best, level_unit))
            << "pod " << p << " went to " << chosen << (decisive ? " (decisive)" : "");
      }
      ASSERT_EQ(json::parse(ext.Bind(BindBody(uid, uid, chosen)).body)["Error"], "");
      ++placed;
    }
    EXPECT_GT(placed, 50);
  }
}

// On identical nodes every FGD level ties, and the decisive filter keeps exactly the node of
// lowest placement::NodeTieBreakRank under the state's salt: a different tieBreakSeed, another node.
TEST(ExtenderTieBreak, DecisiveFilterKeepsTheNodeOfLowestSaltedRank) {
  std::set<std::string> winners;
  for (uint64_t salt : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}}) {
    FakeClock clock;
    ClusterState state(builders::PriorPolicy(model::PolicyKind::kFgd), clock, std::chrono::seconds(0), salt);
    ScriptedBackend backend;
    std::vector<std::string> names;
    for (int i = 0; i < 16; ++i) {
      names.push_back("node-" + std::to_string(i));
      state.UpsertNode(GpuNode(names.back(), 8, 81920));
    }
    std::string lowest = names[0];
    for (const std::string& n : names) {
      if (placement::NodeTieBreakRank(n, salt) < placement::NodeTieBreakRank(lowest, salt)) lowest = n;
    }
    ExtenderOptions options;
    options.decision.device_mib = 81920;
    Extender ext(state, backend, options, clock, nullptr);
    const json filtered = json::parse(ext.Filter(FilterBody(PodJson("p", "u", "10Gi"), names)).body);
    EXPECT_EQ(filtered["NodeNames"], json::array({lowest})) << "salt " << salt;
    const json scores = json::parse(ext.Prioritize(FilterBody(PodJson("p", "u", "10Gi"), names)).body);
    for (const json& hp : scores) EXPECT_EQ(hp["Score"] == 10, hp["Host"] == lowest) << hp;
    winners.insert(lowest);
  }
  EXPECT_GT(winners.size(), 1u) << "the salt must change the order";
}

// Thousands of identical nodes: the ranked costs differ only in the rank fractions, some of them
// by less than 1e-4 — which a relative float slack on costs of magnitude 10^4–10^5 would merge.
// The decisive filter must still keep exactly one node, for every salt.
TEST(ExtenderTieBreak, NeighbouringRankFractionsStayDistinct) {
  for (uint64_t salt = 0; salt < 10; ++salt) {
    FakeClock clock;
    ClusterState state(builders::PriorPolicy(model::PolicyKind::kFgd), clock, std::chrono::seconds(0), salt);
    std::vector<std::string> names;
    for (int i = 0; i < 3000; ++i) {
      names.push_back("n" + std::to_string(i));
      state.UpsertNode(GpuNode(names.back(), 1, 81920));
    }
    ScriptedBackend backend;
    ExtenderOptions options;
    options.decision.device_mib = 81920;
    Extender ext(state, backend, options, clock, nullptr);
    const json filtered = json::parse(ext.Filter(FilterBody(PodJson("p", "u", "10Gi"), names)).body);
    EXPECT_EQ(filtered["NodeNames"].size(), 1u) << "salt " << salt;
  }
}

// Two nodes on the same FGD level for a CPU-heavy half-GPU pod; the fill level prefers the one
// whose remaining GPUs its CPU can still feed, even when the node order prefers the other
// (arithmetic in placement/placement_test.cc, SeesGpusStrandedByCpuAFewPodsAhead: ΔF = 300
// MiB on both, FGD level 42; ΔF̂ = 1100 on the lean node, fill level 2, and 500 on the rich one,
// fill level 1).
TEST(ExtenderTieBreak, FillLevelDecidesWithinAnFgdLevelBeforeTheNodeOrder) {
  FakeClock clock;
  placement::TypicalSpec whole{12000, 1, 0, model::DeviceKindPreference::kAny, "", {}, .6};
  placement::TypicalSpec half{12000, 1, 500, model::DeviceKindPreference::kAny, "", {}, .4};
  ClusterState state(
      std::make_shared<placement::Policy>(model::PolicyKind::kFgd, placement::TypicalWorkload{{whole, half}},
                                          placement::PlacementOptions{}),
      clock, std::chrono::seconds(0));
  // The lean node gets whichever name the node order puts first.
  std::string lean = "node-a", rich = "node-b";
  if (placement::NodeTieBreakRank(lean, 0) > placement::NodeTieBreakRank(rich, 0)) std::swap(lean, rich);
  model::Node lean_node = GpuNode(lean, 4, 1000);
  lean_node.cpu_milli = 48000;
  model::Node rich_node = GpuNode(rich, 4, 1000);
  rich_node.cpu_milli = 96000;
  state.UpsertNode(lean_node);
  state.UpsertNode(rich_node);
  ScriptedBackend backend;
  ExtenderOptions options;
  options.decision.device_mib = 1000;
  options.decision.refresh_pods = 0;  // the workload above, not one learned from this pod
  Extender ext(state, backend, options, clock, nullptr);
  json pod = PodJson("p", "u", "500Mi");
  pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "24";
  const json filtered = json::parse(ext.Filter(FilterBody(pod, {lean, rich})).body);
  EXPECT_EQ(filtered["NodeNames"], json::array({rich}));
  const json scores = json::parse(ext.Prioritize(FilterBody(pod, {lean, rich})).body);
  for (const json& hp : scores) EXPECT_EQ(hp["Score"] == 10, hp["Host"] == rich) << hp;
  // rankByFill: false is FGD's own rule: the node order decides.
  options.decision.rank_by_fill = false;
  Extender fgd_rule(state, backend, options, clock, nullptr);
  EXPECT_EQ(json::parse(fgd_rule.Filter(FilterBody(pod, {lean, rich})).body)["NodeNames"], json::array({lean}));
}

// The capacity reservation's tests: FGD from the prior on four 8-GPU A100 nodes and the one 2-GPU
// T4 node ("t0") that pods pinned to T4 depend on; 80 GiB devices throughout.
std::shared_ptr<placement::Policy> FgdPrior() { return builders::PriorPolicy(model::PolicyKind::kFgd); }
std::vector<std::string> AddFourA100sAndOneT4(ClusterState& state) {
  std::vector<std::string> names;
  for (int i = 0; i < 4; ++i) {
    names.push_back("a" + std::to_string(i));
    state.UpsertNode(GpuNode(names.back(), 8, 81920));
  }
  names.push_back("t0");
  state.UpsertNode(GpuNode("t0", 2, 81920, "NVIDIA T4"));
  return names;
}
json T4PinnedPod(int i) {
  json pod = PodJson("t4-" + std::to_string(i), "u" + std::to_string(i), "10Gi");
  pod["metadata"]["annotations"] = {{std::string(api::kAnnotationGpuModel), "T4"}};
  return pod;
}

// Every `refresh_pods` binds the policy is rebuilt from the learner, and with it the capacity
// reservation over every shape learned and the nodes as they are (core/reservation_test.cc has the
// arithmetic). Pods pinned to the one T4 node make it a reserving host; the price joins the fill
// level, so it moves the ranked cost by whole fill levels.
TEST(ExtenderReservation, LearnedPinnedShapesPriceTheirNodesAtRefresh) {
  for (bool reserve : {true, false}) {
    FakeClock clock;
    ClusterState state(FgdPrior(), clock, std::chrono::seconds(0));
    const std::vector<std::string> names = AddFourA100sAndOneT4(state);
    ScriptedBackend backend;
    ExtenderOptions options;
    options.decision.device_mib = 81920;
    options.decision.refresh_pods = 2;
    options.decision.reserve_scarce_capacity = reserve;
    Extender ext(state, backend, options, clock, nullptr);
    EXPECT_TRUE(state.policy()->reservation().reserving().empty()) << "no reservation before the first refresh";
    for (int i = 0; i < 2; ++i) {
      const json pod = T4PinnedPod(i);
      ASSERT_EQ(json::parse(ext.Filter(FilterBody(pod, names)).body)["NodeNames"], json::array({"t0"}));
      ASSERT_EQ(json::parse(ext.Bind(BindBody(pod["metadata"]["name"], pod["metadata"]["uid"], "t0")).body)["Error"],
                "");
    }
    double t0_tightness = -1, a0_tightness = -1;
    state.ForEachNode(
        [&](const model::Node& node, const placement::NodeSummary& summary, std::optional<Clock::TimePoint>) {
          if (node.name == "t0") t0_tightness = summary.reservation_tightness;
          if (node.name == "a0") a0_tightness = summary.reservation_tightness;
        });
    EXPECT_EQ(a0_tightness, 0);
    if (!reserve) {
      EXPECT_TRUE(state.policy()->reservation().reserving().empty());
      EXPECT_EQ(t0_tightness, 0);
      continue;
    }
    ASSERT_FALSE(state.policy()->reservation().reserving().empty());
    EXPECT_EQ(state.policy()->reservation().reserving()[0].spec.gpu_models, std::vector<std::string>{"T4"});
    EXPECT_GT(t0_tightness, 0);
    // A price of 1.5 devices is 3 half-device fill levels: the ranked cost rises by exactly 3 fill
    // steps (128 each, below the completion level; RankOf).
    ClusterState::Assessment priced{placement::Verdict::Fits(), -100, 0, 1.5 * 81920, 0, 7};
    ClusterState::Assessment free = priced;
    free.reservation_cost = 0;
    EXPECT_DOUBLE_EQ(ext.RankOf(priced).cost - ext.RankOf(free).cost, 3 * 128);
  }
}

// The completion loss (core/completion_test.cc has the arithmetic): on 1000-MiB GPUs with the
// workload 650 MiB ×1, 320 MiB ×2, 470 MiB ×2 (and whole GPUs ×5), a 320 MiB pod next to a 470 MiB
// one gives up 1/2 of a device's completion value, on an empty GPU 1/3 (a 650 can still join it).
// FGD alone prefers the half-used GPU, which keeps the empty one whole. The completion value is
// built at the first policy refresh (here the first filter, once the backend has synced).
TEST(ExtenderCompletion, RanksTheDeviceAPodCompletesBestFirst) {
  auto slice = [](model::MiB mib, double weight) {
    return placement::TypicalSpec{4000, 1, mib, model::DeviceKindPreference::kAny, "", {}, weight};
  };
  const placement::TypicalWorkload workload{
      {slice(650, .1), slice(320, .2), slice(470, .2),
       placement::TypicalSpec{4000, 1, 0, model::DeviceKindPreference::kAny, "", {}, .5}}};
  for (bool complete : {true, false}) {
    FakeClock clock;
    ClusterState state(
        std::make_shared<placement::Policy>(model::PolicyKind::kFgd, workload, placement::PlacementOptions{}), clock,
        std::chrono::seconds(0));
    state.UpsertNode(GpuNode("half-used", 1, 1000));
    state.UpsertNode(GpuNode("empty", 1, 1000));
    ScriptedBackend backend;
    ExtenderOptions options;
    options.decision.device_mib = 1000;
    options.prior = workload;           // the learner starts from this workload, not the default prior,
    options.decision.prior_pods = 1e9;  // and keeps it: the subject is the ranking it gives
    options.decision.rank_by_completion = complete;
    Extender ext(state, backend, options, clock, nullptr);
    const json first = PodJson("p470", "u470", "470Mi");
    ASSERT_EQ(json::parse(ext.Filter(FilterBody(first, {"half-used"})).body)["NodeNames"], json::array({"half-used"}));
    ASSERT_EQ(json::parse(ext.Bind(BindBody("p470", "u470", "half-used")).body)["Error"], "");
    const json pod = PodJson("p", "u", "320Mi");
    const json filtered = json::parse(ext.Filter(FilterBody(pod, {"half-used", "empty"})).body);
    EXPECT_EQ(filtered["NodeNames"], json::array({complete ? "empty" : "half-used"})) << "complete=" << complete;
    EXPECT_EQ(state.policy()->completion().empty(), !complete);
    if (!complete) continue;
    // Losses of 1/3 and 1/2 device are completion levels 333 and 500, 2^17 apart each: above
    // every fill and FGD level.
    ClusterState::Assessment third{placement::Verdict::Fits(), 0, 0, 0, 1000.0 / 3, 1};
    ClusterState::Assessment half_device = third;
    half_device.completion_loss = 500;
    half_device.cost = -1e6;  // the best FGD level does not outrank a larger loss
    EXPECT_LT(ext.RankOf(third), ext.RankOf(half_device));
    EXPECT_EQ(
        ext.RankOf(half_device).cost - ext.RankOf(third).cost,
        (500 - 333) * double{1 << 17} - (placement::FgdScoreLevel(-1e6, 1000) - placement::FgdScoreLevel(0, 1000)));
    // Equal losses: the fill level decides before FGD's level. better_fgd: FGD level 100 (ΔF
    // −10⁶), fill level 2 (ΔF̂ 1000 MiB = 2 half devices); better_fill: FGD level
    // int(100·σ(0)) = 50, fill level 0. Fill steps are 128, FGD levels 1.
    ClusterState::Assessment better_fgd{placement::Verdict::Fits(), -1e6, 1000, 0, 1000.0 / 3, 1};
    ClusterState::Assessment better_fill{placement::Verdict::Fits(), 0, 0, 0, 1000.0 / 3, 2};
    EXPECT_LT(ext.RankOf(better_fill), ext.RankOf(better_fgd));
    EXPECT_EQ(ext.RankOf(better_fgd).cost - ext.RankOf(better_fill).cost, 2 * 128 - (100 - 50));
  }
}

// A restarted or newly elected extender learns the pods already running as soon as the backend has
// synced (at Maintain or the first filter), once: here 20 pods pinned to the one T4 node (against
// the prior's weight of 100 pods: 1/6 of the blend, inside the typical set), which the rebuilt
// policy's reservation then prices.
TEST(ExtenderWarmStart, LearnsThePodsHoldingDevicesOnceSynced) {
  FakeClock clock;
  ClusterState state(FgdPrior(), clock, std::chrono::seconds(0));
  const std::vector<std::string> names = AddFourA100sAndOneT4(state);
  ScriptedBackend backend;
  backend.synced = false;
  for (int i = 0; i < 20; ++i) {
    StatusOr<model::PodRequest> request = translate::ParsePodRequest(T4PinnedPod(i), 16);
    ASSERT_TRUE(request.ok()) << request.status();
    backend.held.push_back(*request);
  }
  ExtenderOptions options;
  options.decision.device_mib = 81920;
  Extender ext(state, backend, options, clock, nullptr);
  const std::shared_ptr<const placement::Policy> prior = state.policy();
  ext.Maintain();
  EXPECT_EQ(state.policy(), prior) << "nothing to learn before the backend has synced";

  backend.synced = true;
  EXPECT_EQ(ext.Filter(FilterBody(PodJson("p", "u9", "10Gi"), names)).status, 200);
  const std::shared_ptr<const placement::Policy> warmed = state.policy();
  ASSERT_NE(warmed, prior);
  bool pinned_shape = false;
  for (const placement::TypicalSpec& spec : warmed->workload().specs) {
    pinned_shape = pinned_shape || spec.gpu_models == std::vector<std::string>{"T4"};
  }
  EXPECT_TRUE(pinned_shape) << "the running pods' shape is in the typical workload";
  ASSERT_FALSE(warmed->reservation().reserving().empty());
  EXPECT_EQ(warmed->reservation().reserving()[0].spec.gpu_models, std::vector<std::string>{"T4"});
  ext.Maintain();
  EXPECT_EQ(state.policy(), warmed) << "learned once";
}

TEST_F(ExtenderTest, MetricsCountRequestsByVerbAndResult) {
  Extender ext = Make();
  Parse(ext.Filter(FilterBody(PodJson("p", "u1", "8Gi"), all_)));
  Parse(ext.Filter(FilterBody(PodJson("p", "u1", "800Gi"), all_)));
  ext.Filter("{");
  const std::string text = metrics_.Render();
  for (const char* needle : {"gpupack_extender_requests_total{result=\"ok\",verb=\"filter\"} 1",
                             "gpupack_extender_requests_total{result=\"no_fit\",verb=\"filter\"} 1",
                             "gpupack_extender_requests_total{result=\"error\",verb=\"filter\"} 1",
                             "gpupack_extender_request_duration_seconds_count{verb=\"filter\"} 3",
                             "gpupack_gpu_memory_bytes{node=\"n-mid\",gpu_uuid=\"GPU-n-mid-0\",gpu_index=\"0\",gpu_"
                             "model=\"NVIDIA A100-SXM4-80GB\",mig_profile=\"\"} 17179869184",
                             "gpupack_cluster_gpu_memory_bytes ", "gpupack_reservations 0", "gpupack_nodes 4",
                             "gpupack_cluster_fragmentation_ratio ", "gpupack_reservations_expired_total 0"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle << "\n" << text;
  }
}

// ---- the device controls through the verbs: device rules, per-pod policy, the spread key ----

json Annotated(json pod, json annotations) {
  pod["metadata"]["annotations"] = std::move(annotations);
  return pod;
}

TEST_F(ExtenderTest, PinnedPodPassesOnlyItsDeviceAndTheOthersSayWhichRule) {
  Extender ext = Make();
  const json pod = Annotated(PodJson("p", "u1", "8Gi"), {{"gpupack.io/gpu-uuids", "GPU-n-mid-0"}});
  json r = Parse(ext.Filter(FilterBody(pod, all_)));
  EXPECT_EQ(r["NodeNames"], json({"n-mid"}));
  for (const char* node : {"n-tight", "n-roomy", "n-small"}) {
    EXPECT_EQ(r["FailedAndUnresolvableNodes"][node],
              "no device left for any device: 1 device not allowed by gpupack.io/gpu-uuids")
        << node;
  }
  EXPECT_NE(metrics_.Render().find("gpupack_filter_node_rejections_total{reason=\"excluded_by_rule\"} 3"),
            std::string::npos);
}

TEST_F(ExtenderTest, PodNodePolicyOverridesTheClusterRanking) {
  Extender ext = Make();  // the cluster binpacks: n-tight (4 GiB left) wins
  EXPECT_EQ(Parse(ext.Filter(FilterBody(PodJson("p", "u1", "8Gi"), all_)))["NodeNames"], json({"n-tight"}));
  // node-policy spread: the most free memory left wins, n-roomy (81920 − 8192 = 73728 MiB).
  const json spread = Annotated(PodJson("p", "u1", "8Gi"), {{"gpupack.io/node-policy", "spread"}});
  EXPECT_EQ(Parse(ext.Filter(FilterBody(spread, all_)))["NodeNames"], json({"n-roomy"}));
  json p = Parse(ext.Prioritize(FilterBody(spread, {"n-tight", "n-mid", "n-roomy"})));
  EXPECT_EQ(p[2], json({{"Host", "n-roomy"}, {"Score", 10}}));
  EXPECT_EQ(p[0], json({{"Host", "n-tight"}, {"Score", 1}}));
}

TEST(ExtenderRanking, PodNodePolicyRanksExactCostsOnAnFgdCluster) {
  FakeClock clock;
  ClusterState state(builders::PriorPolicy(model::PolicyKind::kFgd), clock, std::chrono::seconds(0));
  ScriptedBackend backend;
  ExtenderOptions options;
  options.decision.device_mib = 81920;
  Extender ext(state, backend, options, clock, nullptr);
  ClusterState::Assessment a;
  a.cost = 12345;  // a binpack / spread cost: free MiB left
  a.fill_cost = 40960;
  EXPECT_EQ(ext.RankOf(a, model::PolicyKind::kBinpack).cost, 12345);
  EXPECT_EQ(ext.RankOf(a, model::PolicyKind::kSpread).tie, 0);
  // No override, or fgd named explicitly: the FGD levels, as for every other pod.
  EXPECT_EQ(ext.RankOf(a).cost, ext.RankOf(a, model::PolicyKind::kFgd).cost);
  EXPECT_NE(ext.RankOf(a).cost, 12345);
}

TEST_F(ExtenderTest, SpreadKeyKeepsReplicasApartAcrossARestart) {
  Extender ext = Make();
  const json first = Annotated(PodJson("web-1", "w1", "8Gi"), {{"gpupack.io/spread-key", "web"}});
  ASSERT_EQ(Parse(ext.Filter(FilterBody(first, all_)))["NodeNames"], json({"n-tight"}));
  ASSERT_EQ(Parse(ext.Bind(BindBody("web-1", "w1", "n-tight")))["Error"], "");
  const std::string allocation = backend_.binds["w1"].annotations[std::string(api::kAnnotationAllocation)];
  EXPECT_NE(allocation.find(R"("spreadKey":"web")"), std::string::npos) << allocation;
  // A 2 GiB replica would fit in n-tight's remaining 12288 − 8192 = 4096 MiB: the key, not the
  // size, moves it.
  const json second = Annotated(PodJson("web-2", "w2", "2Gi"), {{"gpupack.io/spread-key", "web"}});
  json r = Parse(ext.Filter(FilterBody(second, all_)));
  EXPECT_EQ(r["NodeNames"], json({"n-small"}));  // binpack among the rest: 4096 − 2048 = 2048 left
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["n-tight"],
            "no device left for any device: 1 device holds a pod with the same gpupack.io/spread-key \"web\"");
  // Without the key n-tight is as good as n-small (4096 MiB free on each).
  const json unkeyed = PodJson("other", "o1", "2Gi");
  EXPECT_EQ(Parse(ext.Filter(FilterBody(unkeyed, all_)))["NodeNames"], json({"n-tight", "n-small"}));

  // A restarted extender rebuilds its ledger from the pod's allocation annotation alone.
  FakeClock clock;
  ClusterState restarted(builders::PriorPolicy(model::PolicyKind::kBinpack), clock, std::chrono::seconds(0));
  for (const auto& [n, mib] :
       std::map<std::string, model::MiB>{{"n-tight", 12288}, {"n-mid", 16384}, {"n-roomy", 81920}, {"n-small", 4096}}) {
    restarted.UpsertNode(GpuNode(n, 1, mib));
  }
  StatusOr<api::Allocation> decoded = api::DecodeAllocation(allocation);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  restarted.UpsertPodAllocation("w1", "default/web-1", *decoded);
  ScriptedBackend backend;
  Extender ext2(restarted, backend, ExtenderOptions{}, clock, nullptr);
  EXPECT_EQ(Parse(ext2.Filter(FilterBody(second, all_)))["NodeNames"], json({"n-small"}));
}

TEST_F(ExtenderTest, AllocatedMemoryPerNamespaceIsExported) {
  Extender ext = Make();
  json pod = PodJson("p", "u1", "8Gi");
  pod["metadata"]["namespace"] = "team-a";
  ASSERT_EQ(Parse(ext.Filter(FilterBody(pod, all_)))["NodeNames"], json({"n-tight"}));
  ASSERT_EQ(
      Parse(ext.Bind(
          json{{"PodName", "p"}, {"PodNamespace", "team-a"}, {"PodUID", "u1"}, {"Node", "n-tight"}}.dump()))["Error"],
      "");
  // 8 GiB = 8589934592 bytes; a whole-device pod counts its device's size (n-roomy: 80 GiB).
  json whole = PodJson("w", "u2", "", 1);
  ASSERT_EQ(Parse(ext.Filter(FilterBody(whole, {"n-roomy"})))["NodeNames"], json({"n-roomy"}));
  ASSERT_EQ(Parse(ext.Bind(BindBody("w", "u2", "n-roomy")))["Error"], "");
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("gpupack_namespace_gpu_memory_allocated_bytes{namespace=\"team-a\"} 8589934592"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpupack_namespace_gpu_memory_allocated_bytes{namespace=\"default\"} 85899345920"),
            std::string::npos)
      << text;
}

TEST_F(ExtenderTest, AdminExcludedDeviceIsSkippedAndCounted) {
  model::Node tight = GpuNode("n-tight", 1, 12288);
  tight.devices[0].excluded = true;
  state_.UpsertNode(tight);
  Extender ext = Make();
  json r = Parse(ext.Filter(FilterBody(PodJson("p", "u1", "8Gi"), all_)));
  EXPECT_EQ(r["NodeNames"], json({"n-mid"}));
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["n-tight"],
            "no device left for any device: 1 device taken out of the pool by the administrator (node annotation "
            "gpupack.io/excluded-devices)");
  EXPECT_NE(metrics_.Render().find("gpupack_node_excluded_gpus{node=\"n-tight\"} 1"), std::string::npos);
}

// Two sizes that fill a device exactly, in GiB: each device takes one pod of each.
struct ExactFill {
  int device, large, small;
};
constexpr ExactFill kExactFills[] = {{80, 60, 20}, {80, 48, 32}, {80, 45, 35}, {80, 56, 24}, {24, 16, 8}};

// Filters `pod` on `names` and binds it to the first node that passes (the decisive filter passes
// the best only); the devices it got, or none when it did not bind.
std::vector<std::string> FilterAndBind(Extender& ext, ScriptedBackend& backend, const json& pod,
                                       const std::vector<std::string>& names) {
  const json passing = json::parse(ext.Filter(FilterBody(pod, names)).body)["NodeNames"];
  if (!passing.is_array() || passing.empty()) return {};
  const std::string uid = pod["metadata"]["uid"];
  const json reply = json::parse(ext.Bind(BindBody(pod["metadata"]["name"], uid, passing[0])).body);
  if (reply["Error"] != "") return {};
  StatusOr<api::Allocation> allocation =
      api::DecodeAllocation(backend.binds[uid].annotations[std::string(api::kAnnotationAllocation)]);
  std::vector<std::string> devices;
  for (const api::ContainerAllocation& c : allocation->containers) {
    for (const auto& d : c.devices) devices.push_back(d.uuid);
  }
  return devices;
}

// When the extender starts its learner, relative to a burst that fills 12 nodes × 2 GPUs exactly.
enum class Burst { kWaitingAtStart, kCreatedWhileRunning };

// Filters and binds, in the order of `seed`, a burst of 24 pods of each of `fill`'s sizes on 12
// nodes × 2 GPUs, the burst waiting in the backend; the pods bound (48 when all fit).
int BoundOfAnExactFill(const ExactFill& fill, uint64_t seed, Burst burst) {
  FakeClock clock;
  ClusterState state(FgdPrior(), clock, std::chrono::seconds(0));
  std::vector<std::string> names;
  for (int n = 0; n < 12; ++n) {
    names.push_back("g" + std::to_string(n));
    state.UpsertNode(GpuNode(names.back(), 2, model::MiB{1024} * fill.device));
  }
  std::vector<json> pods;
  for (int i = 0; i < 24; ++i) {
    pods.push_back(PodJson("large-" + std::to_string(i), "ul" + std::to_string(i), std::to_string(fill.large) + "Gi"));
    pods.push_back(PodJson("small-" + std::to_string(i), "us" + std::to_string(i), std::to_string(fill.small) + "Gi"));
  }
  std::shuffle(pods.begin(), pods.end(), std::mt19937_64(seed));
  ScriptedBackend backend;
  Extender ext(state, backend, ExtenderOptions{}, clock, nullptr);
  if (burst == Burst::kCreatedWhileRunning) ext.Maintain();  // starts the learner: nothing waits yet
  for (const json& pod : pods) backend.waiting.push_back(*translate::ParsePodRequest(pod, 16));
  int bound = 0;
  for (const json& pod : pods) bound += !FilterAndBind(ext, backend, pod, names).empty();
  return bound;
}

// On a cold extender, a burst that fills 12 nodes × 2 GPUs exactly with two sizes, in
// any order, binds completely when the extender finds it waiting (a restart, a failover, or pods
// created before it started): the learner counts the waiting pods at the first filter, so from
// the first pod the policy knows the large size, and a small pod on a device holding a small one
// would leave d − 2s < large free, which the fragmentation prices (the prior alone, with its
// quarter and eighth devices and its whole devices, prefers that stacking). Seeds 1–20 of each.
TEST(ExtenderLearner, AColdExtenderBindsEveryOrderOfAnExactFillItFindsWaiting) {
  for (const ExactFill& fill : kExactFills) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      EXPECT_EQ(BoundOfAnExactFill(fill, seed, Burst::kWaitingAtStart), 48)
          << fill.large << " + " << fill.small << " GiB on " << fill.device << " GiB, seed " << seed;
    }
  }
}

// The same burst created while the extender runs (its learner started with nothing waiting): the
// first pod asked about makes a refresh due (the gap is 1), and at that early refresh the waiting
// pods count too, so the policy knows both sizes before it ranks the first pod. Counted pod by pod
// instead, two small pods asked about first (24/48 · 23/47 ≈ 24 % of orders) would stack.
TEST(ExtenderLearner, ARunningExtenderCountsAWaitingBurstAtItsFirstRefresh) {
  for (const ExactFill& fill : kExactFills) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      EXPECT_EQ(BoundOfAnExactFill(fill, seed, Burst::kCreatedWhileRunning), 48)
          << fill.large << " + " << fill.small << " GiB on " << fill.device << " GiB, seed " << seed;
    }
  }
}

// The standalone repro, where nothing is waiting: after three pairs of 48 + 32 GiB (or
// 60 + 20) have been bound, two small pods sent to a node with two empty GPUs take one GPU each.
// The six pods hold 93.5 % of the weight (the prior's fixed share is 6.5 %), and a small pod
// beside a small one leaves 80 − 2·32 = 16 GiB (80 − 2·20 = 40) that the large size cannot use;
// with the prior as 100 pods against the six, both went to device 0.
TEST(ExtenderLearner, AFewPairsOutweighThePrior) {
  for (const ExactFill& fill : {kExactFills[0], kExactFills[1]}) {
    FakeClock clock;
    ClusterState state(FgdPrior(), clock, std::chrono::seconds(0));
    const std::vector<std::string> names = {"g0", "g1", "g2", "g3"};
    for (const std::string& name : names) state.UpsertNode(GpuNode(name, 2, 81920));
    ScriptedBackend backend;
    Extender ext(state, backend, ExtenderOptions{}, clock, nullptr);
    const std::string large = std::to_string(fill.large) + "Gi", small = std::to_string(fill.small) + "Gi";
    for (int i = 0; i < 3; ++i) {
      ASSERT_FALSE(
          FilterAndBind(ext, backend, PodJson("l" + std::to_string(i), "ul" + std::to_string(i), large), {"g0", "g1"})
              .empty());
      ASSERT_FALSE(
          FilterAndBind(ext, backend, PodJson("s" + std::to_string(i), "us" + std::to_string(i), small), {"g0", "g1"})
              .empty());
    }
    const std::vector<std::string> first = FilterAndBind(ext, backend, PodJson("s3", "us3", small), {"g3"});
    const std::vector<std::string> second = FilterAndBind(ext, backend, PodJson("s4", "us4", small), {"g3"});
    ASSERT_EQ(first.size(), 1u);
    ASSERT_EQ(second.size(), 1u);
    EXPECT_NE(first[0], second[0]) << fill.small << " GiB pods stacked on one device";
  }
}

}  // namespace
}  // namespace gpupack::extender

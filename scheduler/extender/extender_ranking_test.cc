// Ranking that survives kube-scheduler: quantised scores, tie-breaks, reservation prices and
// completion, through the verbs.
#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "api/allocation.h"
#include "api/annotations.h"
#include "scheduler/extender/extender.h"
#include "scheduler/extender/extender_fixture.h"
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
using testing_fixture::AddFourA100sAndOneT4;
using testing_fixture::Annotated;
using testing_fixture::ExtenderTest;
using testing_fixture::FgdPrior;
using testing_fixture::ScriptedBackend;
using testing_fixture::T4PinnedPod;

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
      std::map<std::string, double> cost_on;  // before the filter, which may hold the pod on its pick
      for (const std::string& n : names) {
        auto a = state.Assess(n, *request, shape);
        cost_on[n] = a->cost;
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
      const double cost = cost_on.at(chosen);
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

}  // namespace
}  // namespace gpupack::extender

// The filter's hold: a pod passed to one node keeps its devices there until its bind, so the next
// pod's filter, which kube-scheduler sends before that bind, is ranked with it.
#include <chrono>

#include <gtest/gtest.h>

#include "scheduler/extender/extender.h"
#include "scheduler/extender/extender_fixture.h"
#include "testing/builders.h"

namespace gpupack::extender {
namespace {

using builders::BindBody;
using builders::FilterBody;
using builders::PodJson;
using nlohmann::json;
using testing_fixture::ExtenderTest;

// Binpack on the fixture's one-GPU nodes: n-small 4096, n-tight 12288, n-mid 16384, n-roomy 81920
// MiB. A 4 GiB pod fits n-small exactly (4096 − 4096 = 0 left), the best binpack can do.
TEST_F(ExtenderTest, TheNextPodsFilterSeesTheHeldPodBeforeItsBind) {
  Extender ext = Make();
  EXPECT_EQ(Parse(ext.Filter(FilterBody(PodJson("a", "ua", "4Gi"), all_)))["NodeNames"], json({"n-small"}));
  EXPECT_EQ(state_.HoldCount(), 1u);
  // kube-scheduler asks about b before a's bind: n-small is held full, so the tightest left is
  // n-tight (12288 − 4096 = 8192 MiB), not n-small again (whose bind would then fail no_fit).
  EXPECT_EQ(Parse(ext.Filter(FilterBody(PodJson("b", "ub", "4Gi"), all_)))["NodeNames"], json({"n-tight"}));
  EXPECT_EQ(state_.HoldCount(), 2u);
  // Both binds take their holds over, with the devices the filter chose.
  ASSERT_EQ(Parse(ext.Bind(BindBody("a", "ua", "n-small")))["Error"], "");
  ASSERT_EQ(Parse(ext.Bind(BindBody("b", "ub", "n-tight")))["Error"], "");
  EXPECT_EQ(state_.HoldCount(), 0u);
  EXPECT_EQ(state_.ReservationCount(), 0u);
  EXPECT_EQ(state_.NodeOfPod("ua"), "n-small");
  EXPECT_EQ(state_.NodeOfPod("ub"), "n-tight");
  EXPECT_NE(metrics_.Render().find("gpupack_filter_holds 0\n"), std::string::npos);
}

TEST_F(ExtenderTest, WithoutHoldsTheNextPodIsOfferedTheSameRoom) {
  ExtenderOptions options;
  options.filter_hold_ttl = std::chrono::seconds(0);
  Extender ext = Make(options);
  EXPECT_EQ(Parse(ext.Filter(FilterBody(PodJson("a", "ua", "4Gi"), all_)))["NodeNames"], json({"n-small"}));
  EXPECT_EQ(Parse(ext.Filter(FilterBody(PodJson("b", "ub", "4Gi"), all_)))["NodeNames"], json({"n-small"}));
  EXPECT_EQ(state_.HoldCount(), 0u);
  ASSERT_EQ(Parse(ext.Bind(BindBody("a", "ua", "n-small")))["Error"], "");
  EXPECT_NE(Parse(ext.Bind(BindBody("b", "ub", "n-small")))["Error"].get<std::string>().find("no longer fits"),
            std::string::npos);
}

TEST_F(ExtenderTest, APodAskedAgainIsNotRefusedByItsOwnHold) {
  Extender ext = Make();
  const json a = PodJson("a", "ua", "4Gi");
  EXPECT_EQ(Parse(ext.Filter(FilterBody(a, all_)))["NodeNames"], json({"n-small"}));
  EXPECT_EQ(Parse(ext.Filter(FilterBody(a, all_)))["NodeNames"], json({"n-small"}));
  EXPECT_EQ(state_.HoldCount(), 1u);
  // Prioritize ranks it without its hold too: n-small is still the best (score 10).
  const json scores = Parse(ext.Prioritize(FilterBody(a, {"n-small", "n-tight"})));
  EXPECT_EQ(scores[0]["Host"], "n-small");
  EXPECT_EQ(scores[0]["Score"], 10);
  EXPECT_EQ(state_.HoldCount(), 0u) << "prioritize released the hold";
}

TEST_F(ExtenderTest, ABindToAnotherNodeMovesTheHold) {
  Extender ext = Make();
  EXPECT_EQ(Parse(ext.Filter(FilterBody(PodJson("a", "ua", "4Gi"), all_)))["NodeNames"], json({"n-small"}));
  // A later kube-scheduler plugin could still pick nothing else, but a bind names the node: n-mid.
  ASSERT_EQ(Parse(ext.Bind(BindBody("a", "ua", "n-mid")))["Error"], "");
  EXPECT_EQ(state_.NodeOfPod("ua"), "n-mid");
  EXPECT_EQ(state_.HoldCount(), 0u);
  // n-small is free again: the next 4 GiB pod fits it exactly.
  EXPECT_EQ(Parse(ext.Filter(FilterBody(PodJson("b", "ub", "4Gi"), all_)))["NodeNames"], json({"n-small"}));
}

TEST_F(ExtenderTest, AHoldWhoseBindNeverComesExpires) {
  ExtenderOptions options;
  options.filter_hold_ttl = std::chrono::seconds(30);
  Extender ext = Make(options);
  EXPECT_EQ(Parse(ext.Filter(FilterBody(PodJson("a", "ua", "4Gi"), all_)))["NodeNames"], json({"n-small"}));
  clock_.Advance(std::chrono::seconds(30));
  ext.Maintain();
  EXPECT_EQ(state_.HoldCount(), 1u) << "30 s is not longer than the 30 s TTL";
  clock_.Advance(std::chrono::seconds(1));
  ext.Maintain();
  EXPECT_EQ(state_.HoldCount(), 0u);
  EXPECT_FALSE(state_.NodeOfPod("ua").has_value());
  EXPECT_NE(metrics_.Render().find("gpupack_filter_holds_expired_total 1\n"), std::string::npos);
  // The bind that comes after all re-checks the fit, as a bind without a hold does.
  ASSERT_EQ(Parse(ext.Bind(BindBody("a", "ua", "n-small")))["Error"], "");
}

TEST_F(ExtenderTest, AFilterThatPassesSeveralNodesHoldsNothing) {
  ExtenderOptions options;
  options.decisive_filter = false;
  Extender ext = Make(options);
  EXPECT_EQ(Parse(ext.Filter(FilterBody(PodJson("a", "ua", "4Gi"), all_)))["NodeNames"].size(), 4u);
  EXPECT_EQ(state_.HoldCount(), 0u) << "kube-scheduler's scores pick among the four, so no node is known";
}

// Under the ledger's invariant a hold is a share like a reservation: a bind of another pod that
// would overbook the held device is refused.
TEST_F(ExtenderTest, AHeldDeviceIsNotGivenToAnotherPodsBind) {
  Extender ext = Make();
  EXPECT_EQ(Parse(ext.Filter(FilterBody(PodJson("a", "ua", "4Gi"), all_)))["NodeNames"], json({"n-small"}));
  // b's filter, asked about n-small alone, fails it; a bind there anyway must not overbook it.
  EXPECT_FALSE(
      Parse(ext.Filter(FilterBody(PodJson("b", "ub", "4Gi"), {"n-small"})))["FailedNodes"]["n-small"].is_null());
  const std::string refused = Parse(ext.Bind(BindBody("b", "ub", "n-small")))["Error"];
  EXPECT_NE(refused.find("no longer fits"), std::string::npos) << refused;
  ASSERT_EQ(Parse(ext.Bind(BindBody("a", "ua", "n-small")))["Error"], "");
}

}  // namespace
}  // namespace gpupack::extender

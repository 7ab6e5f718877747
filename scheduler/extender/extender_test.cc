// The extender's four verbs, request to reply: what filter passes and explains, what prioritize
// scores, what bind reserves and writes, what preempt keeps; metrics and decision logs.
#include "scheduler/extender/extender.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "api/allocation.h"
#include "api/annotations.h"
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
using testing_fixture::Annotated;
using testing_fixture::ExtenderTest;
using testing_fixture::ScriptedBackend;

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

// The bind decides the MPS client priority from spec.priority: a negative one is below normal
// ("mpsClientPriority":1 and the c0 annotation "1"); 0 writes nothing in the allocation and "0".
TEST_F(ExtenderTest, BindMapsThePodsPriorityToTheMpsClientPriority) {
  Extender ext = Make();
  json low = PodJson("low", "u1", "2Gi");
  low["spec"]["priority"] = -10;
  json normal = PodJson("normal", "u2", "2Gi");
  const std::string key = api::ContainerAnnotationKey(false, 0, api::ContainerEnvKey::kMpsClientPriority);
  Parse(ext.Filter(FilterBody(low, all_)));
  ASSERT_EQ(Parse(ext.Bind(BindBody("low", "u1", "n-roomy")))["Error"], "");
  Parse(ext.Filter(FilterBody(normal, all_)));
  ASSERT_EQ(Parse(ext.Bind(BindBody("normal", "u2", "n-roomy")))["Error"], "");
  EXPECT_EQ(backend_.binds["u1"].annotations.at(key), "1");
  EXPECT_EQ(backend_.binds["u2"].annotations.at(key), "0");
  StatusOr<api::Allocation> decoded =
      api::DecodeAllocation(backend_.binds["u1"].annotations.at(std::string(api::kAnnotationAllocation)));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->mps_client_priority, api::kMpsClientPriorityBelowNormal);
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

TEST_F(ExtenderTest, SpreadKeyKeepsReplicasApartAcrossARestart) {
  Extender ext = Make();
  const json first = Annotated(PodJson("web-1", "w1", "8Gi"), {{"gpupack.io/spread-key", "web"}});
  ASSERT_EQ(Parse(ext.Filter(FilterBody(first, all_)))["NodeNames"], json({"n-tight"}));
  ASSERT_EQ(Parse(ext.Bind(BindBody("web-1", "w1", "n-tight")))["Error"], "");
  const std::string allocation = backend_.binds["w1"].annotations[std::string(api::kAnnotationAllocation)];
  EXPECT_NE(allocation.find(R"("spreadKey":"web")"), std::string::npos) << allocation;
  // Without the key n-tight is as good as n-small (4096 MiB free on each).
  const json unkeyed = PodJson("other", "o1", "2Gi");
  EXPECT_EQ(Parse(ext.Filter(FilterBody(unkeyed, all_)))["NodeNames"], json({"n-tight", "n-small"}));
  // A 2 GiB replica would fit in n-tight's remaining 12288 − 8192 = 4096 MiB: the key, not the
  // size, moves it.
  const json second = Annotated(PodJson("web-2", "w2", "2Gi"), {{"gpupack.io/spread-key", "web"}});
  json r = Parse(ext.Filter(FilterBody(second, all_)));
  EXPECT_EQ(r["NodeNames"], json({"n-small"}));  // binpack among the rest: 4096 − 2048 = 2048 left
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["n-tight"],
            "no device left for any device: 1 device holds a pod with the same gpupack.io/spread-key \"web\"");

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

}  // namespace
}  // namespace gpupack::extender

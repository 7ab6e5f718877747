// The workload learner through the verbs: warm start from pods holding devices, exact fills from
// a cold start, a waiting burst counted at the first refresh.
#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "api/allocation.h"
#include "api/annotations.h"
#include "scheduler/extender/extender.h"
#include "scheduler/extender/extender_fixture.h"
#include "scheduler/extender/metrics.h"
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

// Where the burst may go: any node, or (kRareModel) only the 12 nodes of a model that holds a
// third of the cluster's device memory, named by every pod, beside 12 nodes × 4 GPUs of another.
enum class Pinning { kNone, kRareModel };

// Filters and binds, in the order of `seed`, a burst of 24 pods of each of `fill`'s sizes on 12
// nodes × 2 GPUs, the burst waiting in the backend; the pods bound (48 when all fit).
int BoundOfAnExactFill(const ExactFill& fill, uint64_t seed, Burst burst, Pinning pinning = Pinning::kNone) {
  FakeClock clock;
  ClusterState state(FgdPrior(), clock, std::chrono::seconds(0));
  const model::MiB device = model::MiB{1024} * fill.device;
  std::vector<std::string> names;
  for (int n = 0; n < 12; ++n) {
    names.push_back("g" + std::to_string(n));
    state.UpsertNode(pinning == Pinning::kRareModel ? GpuNode(names.back(), 2, device, "NVIDIA H100 80GB HBM3")
                                                    : GpuNode(names.back(), 2, device));
    if (pinning == Pinning::kRareModel) {
      names.push_back("other" + std::to_string(n));
      state.UpsertNode(GpuNode(names.back(), 4, device));
    }
  }
  std::vector<json> pods;
  for (int i = 0; i < 24; ++i) {
    pods.push_back(PodJson("large-" + std::to_string(i), "ul" + std::to_string(i), std::to_string(fill.large) + "Gi"));
    pods.push_back(PodJson("small-" + std::to_string(i), "us" + std::to_string(i), std::to_string(fill.small) + "Gi"));
  }
  if (pinning == Pinning::kRareModel) {
    for (json& pod : pods) pod["metadata"]["annotations"] = {{std::string(api::kAnnotationGpuModel), "H100"}};
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

// The same burst pinned to a model that holds a third of the cluster's memory (the cluster suite's
// TestExactFillBurstOnColdExtenders pins to its H100 nodes). The pods name the model, so the
// learner's model hedge keeps no whole GPUs of it (a hedge for it made small pods stack, and
// seed 1 of 48 + 32 strand a large one, in the cluster suite); the other model is never asked for.
TEST(ExtenderLearner, AnExactFillPinnedToARareModelBindsEveryOrder) {
  for (const ExactFill& fill : kExactFills) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      EXPECT_EQ(BoundOfAnExactFill(fill, seed, Burst::kWaitingAtStart, Pinning::kRareModel), 48)
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

// An extender with metrics, its backend scripted, on nodes g0 and g1 of 2 × 80 GiB.
struct MeteredExtender {
  MeteredExtender() {
    for (const std::string& name : names) state.UpsertNode(GpuNode(name, 2, 81920));
  }
  // The value of one series of the scrape, as exposed ("absent" when it is not).
  std::string Sample(const std::string& series) const {
    const std::string text = metrics.Render();
    const size_t at = text.find("\n" + series + " ");
    if (at == std::string::npos) return "absent";
    const size_t start = at + series.size() + 2;
    return text.substr(start, text.find('\n', start) - start);
  }

  const std::vector<std::string> names = {"g0", "g1"};
  FakeClock clock;
  ClusterState state{FgdPrior(), clock, std::chrono::seconds(0)};
  ExtenderMetrics metrics{&state, false, BuildInfo{"0", "0"}};
  ScriptedBackend backend;
  Extender ext{state, backend, ExtenderOptions{}, clock, &metrics};
};

// The learner's evidence in gpupack_learner_pods_total, each pod once, by where it was first
// seen; gpupack_policy_refreshes_total counts the rebuilds. A restart that finds 2 pods holding
// devices and 1 waiting counts them at the sync (held 2, waiting 1) and refreshes once. A running
// extender (nothing at its sync, one refresh) then gets a burst of 5: the first pod asked about is
// "asked" and makes a refresh due (the gap is 1), which counts the other 4 as "waiting"; asked
// about and bound in turn, or asked about twice, they count no more.
TEST(ExtenderLearner, CountsEachPodOnceByWhereItWasFirstSeen) {
  auto pod = [](const std::string& name) { return PodJson(name, "u" + name, "10Gi"); };
  {
    MeteredExtender restarted;
    restarted.backend.held = {*translate::ParsePodRequest(pod("h0"), 16), *translate::ParsePodRequest(pod("h1"), 16)};
    restarted.backend.waiting = {*translate::ParsePodRequest(pod("w0"), 16)};
    restarted.ext.Maintain();
    EXPECT_EQ(restarted.Sample("gpupack_learner_pods_total{source=\"held\"}"), "2");
    EXPECT_EQ(restarted.Sample("gpupack_learner_pods_total{source=\"waiting\"}"), "1");
    EXPECT_EQ(restarted.Sample("gpupack_learner_pods_total{source=\"asked\"}"), "0");
    EXPECT_EQ(restarted.Sample("gpupack_policy_refreshes_total"), "1");
  }
  MeteredExtender running;
  running.ext.Maintain();
  EXPECT_EQ(running.Sample("gpupack_policy_refreshes_total"), "1");
  std::vector<json> burst;
  for (int i = 0; i < 5; ++i) {
    burst.push_back(pod("b" + std::to_string(i)));
    running.backend.waiting.push_back(*translate::ParsePodRequest(burst.back(), 16));
  }
  EXPECT_EQ(running.ext.Filter(FilterBody(burst[0], running.names)).status, 200);
  EXPECT_EQ(running.Sample("gpupack_learner_pods_total{source=\"asked\"}"), "1");
  EXPECT_EQ(running.Sample("gpupack_learner_pods_total{source=\"waiting\"}"), "4");
  EXPECT_EQ(running.Sample("gpupack_policy_refreshes_total"), "2");
  for (const json& p : burst) EXPECT_FALSE(FilterAndBind(running.ext, running.backend, p, running.names).empty());
  EXPECT_EQ(running.Sample("gpupack_learner_pods_total{source=\"asked\"}"), "1");
  EXPECT_EQ(running.Sample("gpupack_learner_pods_total{source=\"waiting\"}"), "4");
  EXPECT_EQ(running.Sample("gpupack_learner_pods_total{source=\"held\"}"), "0");
  EXPECT_EQ(running.Sample("gpupack_policy_refreshes_total"), "2");
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

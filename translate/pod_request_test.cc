#include "translate/pod_request.h"

#include <vector>

#include <gtest/gtest.h>

#include "api/annotations.h"
#include "api/pod_annotations.h"
#include "api/testing/pod_annotation_cases.h"

namespace gpupack::translate {
namespace {

using nlohmann::json;

// Init containers are a list of their own for the reason below: `{Container(...)}` passed as a
// json is one container, not an array of one, under clang.
json PodWith(json containers, json annotations = json::object(), std::vector<json> init = {}) {
  json pod = {{"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "u-1"}, {"annotations", annotations}}},
              {"spec", {{"containers", containers}}}};
  if (!init.empty()) pod["spec"]["initContainers"] = init;
  return pod;
}
// A braced list of containers is an array under every compiler: clang reads `json{one}` as a copy
// of `one`, gcc as an array holding it.
json PodWith(std::initializer_list<json> containers, json annotations = json::object(), std::vector<json> init = {}) {
  json array = json::array();
  for (const json& c : containers) array.push_back(c);
  return PodWith(std::move(array), std::move(annotations), std::move(init));
}
json Container(std::string name, json limits, json requests = nullptr) {
  json c = {{"name", name}, {"resources", {{"limits", limits}}}};
  if (!requests.is_null()) c["resources"]["requests"] = requests;
  return c;
}

TEST(PodRequest, MemorySplitsEvenlyOverDevices) {
  // 10Gi over 3 devices = 10240 / 3 = 3413.3 → 3414 MiB each.
  auto r = ParsePodRequest(PodWith({Container("main", {{"gpupack.io/gpu-memory", "10Gi"}, {"gpupack.io/gpu", "3"}})}));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->containers.size(), 1u);
  EXPECT_EQ(r->containers[0].device_count, 3);
  EXPECT_EQ(r->containers[0].mem_per_device_mib, 3414);
  EXPECT_EQ(r->Key(), "ml/p");
  EXPECT_EQ(r->uid, "u-1");
}

TEST(PodRequest, DefaultsAndWholeDevices) {
  auto one = ParsePodRequest(PodWith({Container("a", {{"gpupack.io/gpu-memory", "8Gi"}})}));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->containers[0].device_count, 1);
  EXPECT_EQ(one->containers[0].mem_per_device_mib, 8192);
  auto whole = ParsePodRequest(PodWith({Container("a", {{"gpupack.io/gpu", "2"}})}));
  ASSERT_TRUE(whole.ok());
  EXPECT_TRUE(whole->containers[0].whole_device());
  EXPECT_EQ(whole->containers[0].device_count, 2);
}

TEST(PodRequest, ComputeShareIsAWholePercentOfEachDevice) {
  // 30 % of each of 2 devices, beside 20Gi over both (10240 MiB each); requests may repeat it.
  auto r = ParsePodRequest(PodWith(
      {Container("main", {{"gpupack.io/gpu-memory", "20Gi"}, {"gpupack.io/gpu", "2"}, {"gpupack.io/gpu-compute", "30"}},
                 {{"gpupack.io/gpu-compute", "30"}})}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->containers[0].compute_pct, 30);
  EXPECT_EQ(r->containers[0].mem_per_device_mib, 10240);
  EXPECT_TRUE(r->WantsCompute());
  auto memory_only = ParsePodRequest(PodWith({Container("main", {{"gpupack.io/gpu-memory", "8Gi"}})}));
  ASSERT_TRUE(memory_only.ok());
  EXPECT_EQ(memory_only->containers[0].compute_pct, 0);
  EXPECT_FALSE(memory_only->WantsCompute());
  // Bounds: 1 and 100 are accepted.
  for (const char* ok : {"1", "100"}) {
    auto b = ParsePodRequest(
        PodWith({Container("main", {{"gpupack.io/gpu-memory", "8Gi"}, {"gpupack.io/gpu-compute", ok}})}));
    EXPECT_TRUE(b.ok()) << ok << ": " << b.status();
  }
}

TEST(PodRequest, ComputeShareErrorsSayWhatIsWanted) {
  const std::string range = "container \"main\": gpupack.io/gpu-compute \"";
  const std::string why = "\" is not a whole percent of the device's SMs from 1 to 100";
  for (const char* bad : {"0", "101", "30%", "0.5", "-5", "1k"}) {
    auto r = ParsePodRequest(
        PodWith({Container("main", {{"gpupack.io/gpu-memory", "8Gi"}, {"gpupack.io/gpu-compute", bad}})}));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(), range + bad + why);
  }
  const std::string alone =
      "container \"main\": gpupack.io/gpu-compute needs gpupack.io/gpu-memory in the same container: it is a share of "
      "each device the memory is on (a whole device, gpupack.io/gpu alone, has all of its compute)";
  auto without_memory = ParsePodRequest(PodWith({Container("main", {{"gpupack.io/gpu-compute", "30"}})}));
  EXPECT_EQ(without_memory.status().message(), alone);
  auto whole =
      ParsePodRequest(PodWith({Container("main", {{"gpupack.io/gpu", "1"}, {"gpupack.io/gpu-compute", "30"}})}));
  EXPECT_EQ(whole.status().message(), alone);
  auto disagree =
      ParsePodRequest(PodWith({Container("main", {{"gpupack.io/gpu-memory", "8Gi"}, {"gpupack.io/gpu-compute", "30"}},
                                         {{"gpupack.io/gpu-compute", "20"}})}));
  EXPECT_FALSE(disagree.ok());
}

// spec.priority is what admission resolved from the PriorityClass; without one the pod's is 0.
TEST(PodRequest, ReadsThePodsPriority) {
  json pod = PodWith({Container("main", {{"gpupack.io/gpu-memory", "8Gi"}})});
  auto none = ParsePodRequest(pod);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->priority, 0);
  pod["spec"]["priority"] = -100;
  auto low = ParsePodRequest(pod);
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_EQ(low->priority, -100);
  pod["spec"]["priority"] = "high";
  auto bad = ParsePodRequest(pod);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "spec.priority must be an integer");
}

TEST(PodRequest, NonGpupackPodHasNoContainers) {
  json pod = PodWith({Container("web", {{"cpu", "2"}, {"memory", "1Gi"}})});
  EXPECT_FALSE(PodAsksForGpupack(pod));
  auto r = ParsePodRequest(pod);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->WantsDevices());
  EXPECT_EQ(r->cpu_milli, 2000);
  EXPECT_EQ(r->memory_bytes, int64_t{1} << 30);
}

TEST(PodRequest, HostRequestsFollowKubernetesInitRule) {
  // App: 1 + 2 CPU = 3000m. Init: max(4, 1) = 4000m. Effective max(3000, 4000) + overhead 250m.
  json pod = PodWith({Container("a", {{"cpu", "1"}}), Container("b", {{"cpu", "2"}, {"gpupack.io/gpu-memory", "1Gi"}})},
                     json::object(), {Container("i1", {{"cpu", "4"}}), Container("i2", {{"cpu", "1"}})});
  pod["spec"]["overhead"] = {{"cpu", "250m"}};
  auto r = ParsePodRequest(pod);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cpu_milli, 4250);
  ASSERT_EQ(r->containers.size(), 1u);
  EXPECT_EQ(r->containers[0].name, "b");
  EXPECT_EQ(r->containers[0].index, 1);
}

TEST(PodRequest, InitContainersAreMarked) {
  json pod = PodWith({Container("a", {{"gpupack.io/gpu-memory", "4Gi"}})}, json::object(),
                     {Container("warm", {{"gpupack.io/gpu-memory", "2Gi"}})});
  auto r = ParsePodRequest(pod);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->containers.size(), 2u);
  EXPECT_FALSE(r->containers[0].init);
  EXPECT_TRUE(r->containers[1].init);
  EXPECT_EQ(r->TotalMemMiB(), 4096);
  EXPECT_TRUE(PodAsksForGpupack(pod));
}

TEST(PodRequest, Annotations) {
  auto r = ParsePodRequest(
      PodWith({Container("a", {{"gpupack.io/gpu-memory", "5Gi"}})}, {{"gpupack.io/mig-profile", "1g.10gb"},
                                                                     {"gpupack.io/gpu-model", "A100 | H100"},
                                                                     {"gpupack.io/isolation", "hard"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->device_kind, model::DeviceKindPreference::kMig);
  EXPECT_EQ(r->mig_profile, "1g.10gb");
  EXPECT_EQ(r->gpu_models, (std::vector<std::string>{"A100", "H100"}));
  EXPECT_TRUE(r->hard_isolation);
}

// A typo in a gpupack name used to ask for nothing and pass silently.
TEST(PodRequest, UnknownGpupackNamesAreRefusedNamingTheValidOnes) {
  const json typo = PodWith({Container("main", {{"gpupack.io/gpu-mem", "8Gi"}})});
  EXPECT_TRUE(PodAsksForGpupack(typo));
  auto r = ParsePodRequest(typo);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "container \"main\": resources.limits[gpupack.io/gpu-mem]: unknown gpupack resource; the resources are "
            "gpupack.io/gpu-memory, gpupack.io/gpu, gpupack.io/gpu-compute");
  auto annotated =
      ParsePodRequest(PodWith({Container("main", {{"gpupack.io/gpu-memory", "8Gi"}})}, {{"gpupack.io/foo", "x"}}));
  ASSERT_FALSE(annotated.ok());
  EXPECT_EQ(annotated.status().message(),
            "metadata.annotations[\"gpupack.io/foo\"]: unknown gpupack annotation; the annotations a pod may set are " +
                api::JoinNames(api::UserAnnotationNames()));
  // What the scheduler writes at bind is known: a bound pod parses again (the extender's restart).
  auto bound = ParsePodRequest(
      PodWith({Container("main", {{"gpupack.io/gpu-memory", "8Gi"}})}, {{"gpupack.io/allocation", "{}"},
                                                                        {"gpupack.io/c0-memory-limit-mib", "8192"},
                                                                        {"example.com/gpupack.io-note", "x"}}));
  EXPECT_TRUE(bound.ok()) << bound.status();
  // Other vendors' names are none of gpupack's business.
  EXPECT_FALSE(PodAsksForGpupack(PodWith({Container("main", {{"example.com/gpu-mem", "8Gi"}})})));
}

struct BadCase {
  json pod;
  const char* message;
};

TEST(PodRequest, EveryMalformedRequestNamesTheField) {
  const BadCase cases[] = {
      {PodWith({Container("main", {{"gpupack.io/gpu-memory", "8GB"}})}),
       "container \"main\": gpupack.io/gpu-memory: invalid quantity \"8GB\": unknown suffix \"GB\""},
      {PodWith({Container("main", {{"gpupack.io/gpu-memory", "0"}})}),
       "container \"main\": gpupack.io/gpu-memory: quantity \"0\" must be positive"},
      {PodWith({Container("main", {{"gpupack.io/gpu-memory", "-1Gi"}})}),
       "container \"main\": gpupack.io/gpu-memory: quantity \"-1Gi\" is negative"},
      {PodWith({Container("main", {{"gpupack.io/gpu", "0"}})}),
       "container \"main\": gpupack.io/gpu must be at least 1, got 0"},
      {PodWith({Container("main", {{"gpupack.io/gpu", "17"}})}),
       "container \"main\": gpupack.io/gpu 17 exceeds the maximum of 16 devices per container"},
      {PodWith({Container("main", {{"gpupack.io/gpu", "1.5"}})}),
       "container \"main\": gpupack.io/gpu: \"1.5\" is not a whole number"},
      {PodWith({Container("main", {{"gpupack.io/gpu-memory", "8Gi"}, {"nvidia.com/gpu", "1"}})}),
       "container \"main\": asks for both nvidia.com/gpu and gpupack resources; use one"},
      {PodWith({Container("main", {{"gpupack.io/gpu-memory", "8Gi"}}, {{"gpupack.io/gpu-memory", "4Gi"}})}),
       "container \"main\": resources.limits[gpupack.io/gpu-memory] \"8Gi\" and resources.requests \"4Gi\" disagree"},
      {PodWith({Container("main", {{"gpupack.io/gpu-memory", true}})}),
       "container \"main\": resources.limits[gpupack.io/gpu-memory]: want a quantity string, got boolean"},
      {PodWith({Container("main", {{"gpupack.io/gpu-memory", "1Gi"}})}, {{"gpupack.io/isolation", 1}}),
       "annotation gpupack.io/isolation must be a string"},
      {json::array(), "pod must be a JSON object"},
      {json{{"spec", {{"containers", "x"}}}}, "spec.containers must be an array"},
      {json{{"metadata", {{"name", 3}}}, {"spec", {{"containers", json::array()}}}}, "metadata.name must be a string"},
      {PodWith({Container("main", {{"cpu", "lots"}})}),
       "container \"main\": resources.cpu: invalid quantity \"lots\": no digits"},
  };
  for (const auto& c : cases) {
    auto r = ParsePodRequest(c.pod);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message);
  }
}

TEST(PodRequest, NullsAreTolerated) {
  json pod = {
      {"metadata", {{"name", "p"}, {"annotations", nullptr}}},
      {"spec",
       {{"containers",
         {{{"name", "a"}, {"resources", {{"limits", nullptr}, {"requests", {{"gpupack.io/gpu-memory", "1Gi"}}}}}}}},
        {"initContainers", nullptr}}}};
  auto r = ParsePodRequest(pod);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->containers[0].mem_per_device_mib, 1024);
}

// ---- the device controls: device rules, per-pod policy, spread key, whole-device charge ----

json OneGpu() { return json::array({Container("main", {{"gpupack.io/gpu-memory", "8Gi"}})}); }

TEST(PodRequest, DeviceRulesPolicyAndSpreadKeyAreParsed) {
  auto r = ParsePodRequest(PodWith(OneGpu(), {{"gpupack.io/gpu-uuids", "GPU-a1, GPU-b2"},
                                              {"gpupack.io/gpu-uuids-exclude", "MIG-c3"},
                                              {"gpupack.io/gpu-model-exclude", "Tesla T4|V100"},
                                              {"gpupack.io/node-policy", "spread"},
                                              {"gpupack.io/device-policy", "binpack"},
                                              {"gpupack.io/spread-key", "web-frontend"},
                                              {"gpupack.io/spread-scope", "node"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->gpu_uuids, (std::vector<std::string>{"GPU-a1", "GPU-b2"}));
  EXPECT_EQ(r->excluded_gpu_uuids, std::vector<std::string>{"MIG-c3"});
  EXPECT_EQ(r->excluded_gpu_models, (std::vector<std::string>{"Tesla T4", "V100"}));
  EXPECT_EQ(r->node_policy, model::PolicyKind::kSpread);
  EXPECT_EQ(r->device_policy, model::PolicyKind::kBinpack);
  EXPECT_EQ(r->spread_key, "web-frontend");
  EXPECT_TRUE(r->spread_across_nodes);
  // "default" (or no annotation) leaves the cluster's policy; "fgd" names it explicitly.
  auto d =
      ParsePodRequest(PodWith(OneGpu(), {{"gpupack.io/node-policy", "default"}, {"gpupack.io/device-policy", "fgd"}}));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->node_policy.has_value());
  EXPECT_EQ(d->device_policy, model::PolicyKind::kFgd);
  EXPECT_FALSE(d->spread_across_nodes);
}

// The pod parser reads the annotations through the table (api/pod_annotations.h), so every
// shared case holds for a pod: what the table accepts a pod may set, and the request read writes
// back the same; what it refuses is refused with the same message.
TEST(PodRequest, AnnotationsAreReadByTheTable) {
  for (const api::testing::AcceptedCase& c : api::testing::kAcceptedCases) {
    SCOPED_TRACE(json(c.set).dump());
    auto r = ParsePodRequest(PodWith(OneGpu(), c.set));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(api::WritePodAnnotations(*r), c.written);
  }
  for (const api::testing::RefusedCase& c : api::testing::kRefusedCases) {
    SCOPED_TRACE(json(c.set).dump());
    auto r = ParsePodRequest(PodWith(OneGpu(), c.set));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message);
  }
}

TEST(PodRequest, WholeDeviceChargeKeepsWholeDevices) {
  // The webhook charged c0's two whole devices 2 × 16384 MiB for the quota: still whole devices.
  json charged = Container("main", {{"gpupack.io/gpu", "2"}, {"gpupack.io/gpu-memory", "32768Mi"}},
                           {{"gpupack.io/gpu", "2"}, {"gpupack.io/gpu-memory", "32768Mi"}});
  auto r = ParsePodRequest(PodWith({charged}, {{"gpupack.io/whole-device-charge", "c0"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->containers[0].whole_device());
  EXPECT_EQ(r->containers[0].device_count, 2);
  // Without the annotation the same container is a 16384 MiB share per device.
  auto plain = ParsePodRequest(PodWith({charged}));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->containers[0].mem_per_device_mib, 16384);
  // A listed container without gpupack.io/gpu is refused.
  auto bad = ParsePodRequest(PodWith(OneGpu(), {{"gpupack.io/whole-device-charge", "c0"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "container \"main\": listed in gpupack.io/whole-device-charge but asks for no gpupack.io/gpu");
}

// gpupack.io/gpu-memory-limit on pods of several containers (the shared cases are for one): the
// ceiling is each container's total, split over its devices like its gpu-memory.
TEST(PodRequest, MemoryLimitNamesContainersAndSplitsOverTheirDevices) {
  const json two = {Container("trainer", {{"gpupack.io/gpu-memory", "16Gi"}, {"gpupack.io/gpu", "2"}}),
                    Container("sidecar", {{"gpupack.io/gpu-memory", "2Gi"}}), Container("cpu", {{"cpu", "1"}})};
  // trainer: 40Gi over 2 devices = 40960 / 2 = 20480 MiB per device above its 16384 / 2 = 8192;
  // sidecar names no ceiling and cannot burst.
  auto r = ParsePodRequest(PodWith(two, {{"gpupack.io/gpu-memory-limit", "trainer=40Gi"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->containers[0].mem_per_device_mib, 8192);
  EXPECT_EQ(r->containers[0].mem_limit_per_device_mib, 20480);
  EXPECT_EQ(r->containers[1].mem_limit_per_device_mib, 0);
  EXPECT_TRUE(r->Burstable());
  EXPECT_EQ(api::WritePodAnnotations(*r).at("gpupack.io/gpu-memory-limit"), "trainer=40960Mi");
  // An odd total rounds up per device, as gpu-memory does: 20481 MiB over 2 = 10240.5 → 10241.
  auto odd = ParsePodRequest(PodWith(two, {{"gpupack.io/gpu-memory-limit", "trainer=20481Mi"}}));
  ASSERT_TRUE(odd.ok()) << odd.status();
  EXPECT_EQ(odd->containers[0].mem_limit_per_device_mib, 10241);

  struct Bad {
    json annotations;
    std::string message;
  } bad[] = {
      {{{"gpupack.io/gpu-memory-limit", "40Gi"}},
       "annotation gpupack.io/gpu-memory-limit: \"40Gi\" names no container, but the pod has 2 gpupack containers "
       "(trainer, sidecar): write NAME=QUANTITY for each one that may burst"},
      // "cpu" is a container of the pod, but asks for no gpupack memory.
      {{{"gpupack.io/gpu-memory-limit", "cpu=4Gi"}},
       "annotation gpupack.io/gpu-memory-limit: \"cpu\" is not a container of this pod that asks for "
       "gpupack.io/gpu-memory (the pod's are: trainer, sidecar)"},
      // 12Gi over 2 devices = 6144 per device < 8192: the trainer's 16Gi total is 16384 MiB.
      {{{"gpupack.io/gpu-memory-limit", "trainer=12Gi"}},
       "annotation gpupack.io/gpu-memory-limit: container \"trainer\": \"12Gi\" is below its gpupack.io/gpu-memory "
       "of 16384 MiB; the ceiling is the most it may use, at least what it is guaranteed"},
  };
  for (const Bad& b : bad) {
    auto refused = ParsePodRequest(PodWith(two, b.annotations));
    ASSERT_FALSE(refused.ok()) << b.annotations.dump();
    EXPECT_EQ(refused.status().message(), b.message);
  }
  // A whole-device container holds all of its devices already.
  auto whole = ParsePodRequest(
      PodWith({Container("train", {{"gpupack.io/gpu", "2"}})}, {{"gpupack.io/gpu-memory-limit", "train=100Gi"}}));
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(whole.status().message(),
            "annotation gpupack.io/gpu-memory-limit: container \"train\" takes whole devices (gpupack.io/gpu without "
            "gpupack.io/gpu-memory), which it holds all of already; a ceiling is for a gpupack.io/gpu-memory share");
  // A pod without any gpupack container has nothing to burst.
  auto none =
      ParsePodRequest(PodWith({Container("web", {{"cpu", "1"}})}, {{"gpupack.io/gpu-memory-limit", "web=1Gi"}}));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "annotation gpupack.io/gpu-memory-limit: \"web\" is not a container of this pod that asks for "
            "gpupack.io/gpu-memory (it has none)");
}

}  // namespace
}  // namespace gpupack::translate

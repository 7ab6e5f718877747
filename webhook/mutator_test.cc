// Long file: the table tests of one component (the mutating webhook).
#include "webhook/mutator.h"

#include <set>

#include <gtest/gtest.h>

#include "api/allocation.h"
#include "api/annotations.h"
#include "api/testing/pod_annotation_cases.h"
#include "translate/pod_request.h"
#include "webhook/testing/review_testing.h"

namespace gpupack::webhook {
namespace {

using nlohmann::json;
using namespace webhook::testing;

std::string FieldPathOf(bool init, int index, api::ContainerEnvKey key) {
  return "metadata.annotations['" + api::ContainerAnnotationKey(init, index, key) + "']";
}

// The env a gpupack container must start with: one entry per key, read from its annotation.
void ExpectInjectedEnvFirst(const json& env, bool init, int index) {
  ASSERT_TRUE(env.is_array());
  ASSERT_GE(env.size(), std::size(api::kAllContainerEnvKeys));
  size_t i = 0;
  for (api::ContainerEnvKey key : api::kAllContainerEnvKeys) {
    const json& entry = env[i++];
    EXPECT_EQ(entry.value("name", ""), api::ContainerEnvName(key));
    EXPECT_FALSE(entry.contains("value")) << entry;
    EXPECT_EQ(entry["valueFrom"]["fieldRef"]["fieldPath"], FieldPathOf(init, index, key)) << entry;
  }
}

std::vector<std::string> EnvNames(const json& env) {
  std::vector<std::string> names;
  for (const json& entry : env) names.push_back(entry.value("name", ""));
  return names;
}

TEST(Mutator, PatchesTheCapturedDeploymentPod) {
  Mutator mutator{StripConfig()};
  json review = CapturedDeploymentReview();
  Answer a = Ask(mutator, review);
  EXPECT_EQ(a.result.outcome, Outcome::kPatched);
  EXPECT_EQ(a.result.http_status, 200);
  EXPECT_EQ(a.response["uid"], kCapturedUid);
  EXPECT_EQ(a.response["allowed"], true);
  ASSERT_TRUE(a.patch.is_array());
  EXPECT_EQ(a.response["warnings"],
            json::array({"container \"server\" (spec.containers[0]): removed NVIDIA_GPU_MEMORY_LIMIT, "
                         "NVIDIA_VISIBLE_DEVICES, which a pod may not set itself; GPU devices and caps come only from "
                         "the scheduler's allocation"}));

  const json& before = review["request"]["object"];
  json after = PatchedPod(review, a);
  EXPECT_EQ(after["spec"]["schedulerName"], "gpupack-scheduler");

  // server (app 0): user-set NVIDIA_GPU_MEMORY_LIMIT and NVIDIA_VISIBLE_DEVICES are gone, ours
  // come first, the rest keep their order; envFrom stays.
  const json& server = after["spec"]["containers"][0];
  ExpectInjectedEnvFirst(server["env"], false, 0);
  EXPECT_EQ(EnvNames(server["env"]),
            (std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES", "NVIDIA_GPU_MEMORY_LIMIT", "NVIDIA_GPU_MEMORY_REQUEST",
                                      "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                                      "CUDA_MPS_CLIENT_PRIORITY", "MODEL", "POD_NAME", "LOG_LEVEL"}));
  EXPECT_EQ(server["env"][7], before["spec"]["containers"][0]["env"][2]);  // POD_NAME, intact
  EXPECT_EQ(server["envFrom"], before["spec"]["containers"][0]["envFrom"]);
  // metrics-sidecar (app 1) asks for no GPU: untouched.
  EXPECT_EQ(after["spec"]["containers"][1], before["spec"]["containers"][1]);
  // trainer (app 2) had envFrom only and no env.
  const json& trainer = after["spec"]["containers"][2];
  ExpectInjectedEnvFirst(trainer["env"], false, 2);
  EXPECT_EQ(trainer["env"].size(), std::size(api::kAllContainerEnvKeys));
  EXPECT_EQ(trainer["envFrom"], before["spec"]["containers"][2]["envFrom"]);
  // warmup (init 0) is a gpupack container keyed "i0"; fetch-weights (init 1) is untouched.
  ExpectInjectedEnvFirst(after["spec"]["initContainers"][0]["env"], true, 0);
  EXPECT_EQ(after["spec"]["initContainers"][1], before["spec"]["initContainers"][1]);

  // Nothing else changed.
  json after_rest = after, before_rest = before;
  for (json* pod : {&after_rest, &before_rest}) {
    (*pod)["spec"].erase("schedulerName");
    for (int i : {0, 2}) (*pod)["spec"]["containers"][size_t(i)].erase("env");
    (*pod)["spec"]["initContainers"][0].erase("env");
  }
  EXPECT_EQ(after_rest, before_rest);
}

TEST(Mutator, PatchOpsAddMissingEnvAndReplaceExistingEnv) {
  Mutator mutator{Config{}};
  json review = AdmissibleDeploymentReview();
  Answer a = Ask(mutator, review);
  std::map<std::string, std::string> ops;
  for (const json& op : a.patch) ops[op["path"]] = op["op"];
  EXPECT_EQ(ops["/spec/schedulerName"], "replace");
  EXPECT_EQ(ops["/spec/containers/0/env"], "replace");
  EXPECT_EQ(ops["/spec/containers/2/env"], "add");
  EXPECT_EQ(ops["/spec/initContainers/0/env"], "add");
  EXPECT_EQ(ops.size(), 4u);
}

TEST(Mutator, APatchedAnswerIsExactlyWhatNlohmannWritesForIt) {
  // The patched answer is written without nlohmann (mutator.cc, PatchedReviewBody); it must be
  // the same bytes, a uid that needs escaping included.
  Mutator mutator{Config{}};
  for (const std::string uid : {kCapturedUid, "a\"b\\c\u00e9\n"}) {
    json review = AdmissibleDeploymentReview();
    review["request"]["uid"] = uid;
    ReviewResult result = mutator.Review(review.dump());
    ASSERT_EQ(result.outcome, Outcome::kPatched) << result.body;
    EXPECT_EQ(result.body, json::parse(result.body).dump());
    EXPECT_EQ(json::parse(result.body)["response"]["uid"], uid);
  }
}

TEST(Mutator, EveryContainerGetsTheEnvOfItsOwnPosition) {
  // The entries of the first 16 containers of each list are built once; later ones are built
  // per review. Both read the annotations of the container's own index.
  json containers = json::array();
  for (int i = 0; i < 18; ++i) containers.push_back(GpuContainer("c" + std::to_string(i), "1Gi"));
  Mutator mutator{Config{}};
  json review = ReviewOf(PodWith(containers));
  Answer a = Ask(mutator, review);
  ASSERT_EQ(a.result.outcome, Outcome::kPatched);
  json after = PatchedPod(review, a);
  for (int i : {0, 15, 16, 17}) ExpectInjectedEnvFirst(after["spec"]["containers"][size_t(i)]["env"], false, i);
}

// The patched pod carries gpupack's own env entries under device variable names: they are not
// the pod's own choice of device, in either mode.
TEST(Mutator, ASecondReviewOfThePatchedPodChangesNothing) {
  for (const Config& config : {Config{}, StripConfig()}) {
    Mutator mutator{config};
    json review = AdmissibleDeploymentReview();
    json again = review;
    again["request"]["object"] = PatchedPod(review, Ask(mutator, review));
    Answer a = Ask(mutator, again);
    EXPECT_EQ(a.result.outcome, Outcome::kSkipped) << a.result.body;
    EXPECT_EQ(a.response["allowed"], true);
    EXPECT_FALSE(a.response.contains("patch"));
  }
}

TEST(Mutator, AWorkloadCannotRaiseItsOwnCap) {
  json container = GpuContainer("main", "8Gi");
  container["env"] = json::array({
      {{"name", "NVIDIA_GPU_MEMORY_LIMIT"}, {"value", "999999"}},
      {{"name", "A"}, {"value", "1"}},
      {{"name", "NVIDIA_GPU_MEMORY_LIMIT"}, {"value", "888888"}},  // duplicates: the last wins in k8s
      {{"name", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"},
       {"valueFrom", {{"configMapKeyRef", {{"name", "x"}, {"key", "y"}}}}}},
      {{"name", "NVIDIA_GPU_MEMORY_REQUEST"},
       {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.annotations['mine']"}}}}}},
  });
  json review = ReviewOf(PodWith(json::array({container})));
  EXPECT_EQ(Ask(Mutator{Config{}}, review).result.outcome, Outcome::kDenied);
  json after = PatchedPod(review, Ask(Mutator{StripConfig()}, review));
  const json& env = after["spec"]["containers"][0]["env"];
  ExpectInjectedEnvFirst(env, false, 0);
  EXPECT_EQ(EnvNames(env),
            (std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES", "NVIDIA_GPU_MEMORY_LIMIT", "NVIDIA_GPU_MEMORY_REQUEST",
                                      "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                                      "CUDA_MPS_CLIENT_PRIORITY", "A"}));
}

api::ContainerAllocation OneDevice(const std::string& name, int index, bool init, const std::string& uuid,
                                   model::MiB mem_mib) {
  api::ContainerAllocation c;
  c.name = name;
  c.index = index;
  c.init = init;
  api::AllocatedDevice device;
  device.uuid = uuid;
  device.mem_mib = mem_mib;
  c.devices.push_back(device);
  return c;
}

// The env the webhook injects must read exactly the annotations the extender's bind writes
// (api::AllocationAnnotations), for every container index, app and init: otherwise a container
// would start without its cap. This resolves the downward API by hand against the bind output.
TEST(Mutator, InjectedEnvReadsExactlyTheAnnotationsTheBindWrites) {
  json containers = json::array();
  json init_containers = json::array();
  api::Allocation allocation;
  allocation.node = "gpu-a1";
  for (int i = 0; i < 12; ++i) {
    bool gpu = i % 3 != 1;  // some containers in between ask for nothing
    containers.push_back(gpu ? GpuContainer("app-" + std::to_string(i), "8Gi")
                             : json{{"name", "plain-" + std::to_string(i)}, {"image", "busybox"}});
    if (gpu) {
      allocation.containers.push_back(
          OneDevice("app-" + std::to_string(i), i, false, "GPU-" + std::to_string(i), 8192));
    }
  }
  for (int i = 0; i < 3; ++i) {
    init_containers.push_back(GpuContainer("init-" + std::to_string(i), "2Gi"));
    allocation.containers.push_back(OneDevice("init-" + std::to_string(i), i, true, "GPU-init", 2048));
  }
  json pod = PodWith(containers);
  pod["spec"]["initContainers"] = init_containers;
  json review = ReviewOf(pod);
  json after = PatchedPod(review, Ask(Mutator{Config{}}, review));

  std::map<std::string, std::string> bind = api::AllocationAnnotations(allocation);
  std::set<std::string> read;
  for (const api::ContainerAllocation& c : allocation.containers) {
    const json& container = after["spec"][c.init ? "initContainers" : "containers"][size_t(c.index)];
    std::map<std::string, std::string> env;
    for (const json& entry : container["env"]) {
      std::string path = entry["valueFrom"]["fieldRef"]["fieldPath"];
      const std::string prefix = "metadata.annotations['";
      ASSERT_EQ(path.rfind(prefix, 0), 0u) << path;
      std::string key = path.substr(prefix.size(), path.size() - prefix.size() - 2);
      ASSERT_TRUE(bind.count(key)) << c.name << " reads " << key << ", which the bind never writes";
      read.insert(key);
      env[entry["name"]] = bind[key];
    }
    EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], c.devices[0].uuid) << c.name;
    EXPECT_EQ(env["NVIDIA_GPU_MEMORY_LIMIT"], std::to_string(c.devices[0].mem_mib)) << c.name;
    EXPECT_EQ(env["NVIDIA_GPU_MEMORY_REQUEST"], std::to_string(c.devices[0].mem_mib)) << c.name;
    EXPECT_EQ(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=" + std::to_string(c.devices[0].mem_mib) + "M") << c.name;
    EXPECT_EQ(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], std::to_string(api::ActiveThreadPercentage(c))) << c.name;
    EXPECT_EQ(env["CUDA_MPS_CLIENT_PRIORITY"], "0") << c.name;
  }
  // ...and nothing the bind writes per container goes unread.
  for (const auto& [key, value] : bind) {
    if (key == api::kAnnotationAllocation) continue;
    EXPECT_TRUE(read.count(key)) << key << " is written at bind but read by no container";
  }
  // Containers that ask for nothing get no env.
  for (int i = 1; i < 12; i += 3) {
    EXPECT_FALSE(after["spec"]["containers"][size_t(i)].contains("env")) << i;
  }
}

TEST(Mutator, SchedulerNamePolicy) {
  struct Case {
    json name;  // null = field absent
    bool allow_custom;
    std::string expected;
  } cases[] = {
      {nullptr, false, "gpupack-scheduler"},
      {"default-scheduler", false, "gpupack-scheduler"},
      {"", false, "gpupack-scheduler"},
      {"gpupack-scheduler", false, "gpupack-scheduler"},
      {"team-scheduler", false, "gpupack-scheduler"},
      {"team-scheduler", true, "team-scheduler"},
      {"default-scheduler", true, "gpupack-scheduler"},
  };
  for (const Case& c : cases) {
    Config config;
    config.allow_custom_scheduler_name = c.allow_custom;
    json pod = PodWith(json::array({GpuContainer("main", "1Gi")}));
    if (!c.name.is_null()) pod["spec"]["schedulerName"] = c.name;
    json review = ReviewOf(pod);
    json after = PatchedPod(review, Ask(Mutator{config}, review));
    EXPECT_EQ(after["spec"]["schedulerName"], c.expected) << c.name << " " << c.allow_custom;
  }
}

TEST(Mutator, PodsWithoutGpupackResourcesAreLeftAlone) {
  Mutator mutator{Config{}};
  Answer a = Ask(mutator, LoadReview("review_plain_pod.json"));
  EXPECT_EQ(a.result.outcome, Outcome::kSkipped);
  EXPECT_EQ(a.response["uid"], "0d4b7f2a-5e61-4c3b-8f1d-9a2e6c7b8d01");
  EXPECT_EQ(a.response["allowed"], true);
  EXPECT_FALSE(a.response.contains("patch"));
}

TEST(Mutator, OtherOperationsAndResourcesAreLeftAlone) {
  Mutator mutator{Config{}};
  json update = CapturedDeploymentReview();
  update["request"]["operation"] = "UPDATE";
  json binding = CapturedDeploymentReview();
  binding["request"]["subResource"] = "binding";
  json deployment = CapturedDeploymentReview();
  deployment["request"]["resource"] = {{"group", "apps"}, {"version", "v1"}, {"resource", "deployments"}};
  for (const json& review : {update, binding, deployment}) {
    Answer a = Ask(mutator, review);
    EXPECT_EQ(a.result.outcome, Outcome::kSkipped);
    EXPECT_EQ(a.response["allowed"], true);
    EXPECT_FALSE(a.response.contains("patch"));
  }
}

TEST(Mutator, InvalidRequestsAreDeniedWithMessagesNamingContainerAndField) {
  Config config;
  config.max_device_memory_mib = 80 * 1024;
  Mutator mutator{config};
  auto with = [](json container) {
    return PodWith(json::array({{{"name", "sidecar"}, {"image", "x"}}, std::move(container)}));
  };
  json zero_count = GpuContainer("main", "8Gi");
  zero_count["resources"]["limits"]["gpupack.io/gpu"] = "0";
  json too_many = GpuContainer("main", "8Gi");
  too_many["resources"]["limits"]["gpupack.io/gpu"] = "17";
  json mixed = GpuContainer("main", "8Gi");
  mixed["resources"]["limits"]["nvidia.com/gpu"] = "1";
  json mixed_count = {{"name", "main"},
                      {"resources", {{"limits", {{"gpupack.io/gpu", "1"}, {"nvidia.com/gpu", "1"}}}}}};
  json two_big_devices = GpuContainer("main", "200Gi");
  two_big_devices["resources"]["limits"]["gpupack.io/gpu"] = "2";  // 100 GiB each
  json two_fitting_devices = GpuContainer("main", "160Gi");
  two_fitting_devices["resources"]["limits"]["gpupack.io/gpu"] = "2";  // 80 GiB each: fine

  struct Case {
    json pod;
    std::vector<std::string> expected;
  } cases[] = {
      {with(GpuContainer("main", "eight")), {"\"main\"", "gpupack.io/gpu-memory", "eight"}},
      {with(GpuContainer("main", "-1Gi")), {"\"main\"", "gpupack.io/gpu-memory"}},
      {with(GpuContainer("main", "0")), {"\"main\"", "gpupack.io/gpu-memory"}},
      {with(zero_count), {"\"main\"", "gpupack.io/gpu"}},
      {with(too_many), {"\"main\"", "gpupack.io/gpu", "17"}},
      {with(mixed), {"\"main\"", "nvidia.com/gpu"}},
      {with(mixed_count), {"\"main\"", "nvidia.com/gpu"}},
      {with(GpuContainer("main", "81Gi")),
       {"\"main\"", "spec.containers[1]", "gpupack.io/gpu-memory", "largest device"}},
      {with(two_big_devices), {"\"main\"", "spec.containers[1]", "102400 MiB", "largest device"}},
  };
  for (const Case& c : cases) {
    Denial d = DenialOf(mutator, c.pod);
    EXPECT_EQ(d.code, 400) << d.message;
    for (const std::string& part : c.expected) {
      EXPECT_NE(d.message.find(part), std::string::npos) << "\"" << part << "\" not in: " << d.message;
    }
  }
  EXPECT_EQ(Ask(mutator, ReviewOf(with(two_fitting_devices))).result.outcome, Outcome::kPatched);

  json conflicting = with(GpuContainer("main", "8Gi"));
  conflicting["metadata"]["annotations"] = {{"gpupack.io/device-kind", "gpu"}, {"gpupack.io/mig-profile", "1g.10gb"}};
  Denial d = DenialOf(mutator, conflicting);
  EXPECT_EQ(d.code, 400);
  EXPECT_NE(d.message.find("gpupack.io/mig-profile"), std::string::npos) << d.message;
}

// A compute share is validated at admission like memory: a bad value never reaches the scheduler.
TEST(Mutator, DeniesABadComputeShareNamingTheContainer) {
  Mutator mutator{Config{}};
  json over = PodWith(json::array({GpuContainer("main", "8Gi")}));
  over["spec"]["containers"][0]["resources"]["limits"]["gpupack.io/gpu-compute"] = "150";
  Denial d = DenialOf(mutator, over);
  EXPECT_EQ(d.code, 400);
  EXPECT_NE(d.message.find("container \"main\": gpupack.io/gpu-compute \"150\" is not a whole percent of the "
                           "device's SMs from 1 to 100"),
            std::string::npos)
      << d.message;
  json alone = PodWith(json::array(
      {{{"name", "main"}, {"image", "x"}, {"resources", {{"limits", {{"gpupack.io/gpu-compute", "30"}}}}}}}));
  d = DenialOf(mutator, alone);
  EXPECT_EQ(d.code, 400);
  EXPECT_NE(d.message.find("gpupack.io/gpu-compute needs gpupack.io/gpu-memory in the same container"),
            std::string::npos)
      << d.message;
}

// docs/webhook.md promised it; a typo (gpupack.io/gpu-mem) used to be skipped as a pod that asks
// for nothing, and gpupack.io/foo was admitted.
TEST(Mutator, DeniesUnknownGpupackNamesListingTheValidOnesAndLogsTheDenial) {
  Mutator mutator{Config{}};
  const json typo = PodWith(
      json::array({{{"name", "main"}, {"image", "x"}, {"resources", {{"limits", {{"gpupack.io/gpu-mem", "8Gi"}}}}}}}));
  ::testing::internal::CaptureStderr();
  Denial d = DenialOf(mutator, typo);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(d.code, 400);
  EXPECT_NE(d.message.find("resources.limits[gpupack.io/gpu-mem]: unknown gpupack resource; the resources are "
                           "gpupack.io/gpu-memory, gpupack.io/gpu, gpupack.io/gpu-compute"),
            std::string::npos)
      << d.message;
  EXPECT_NE(log.find("INFO webhook: denied pod ml/p (uid " + std::string(kCapturedUid) + "): container \"main\""),
            std::string::npos)
      << log;

  json annotated = PodWith(json::array({GpuContainer("main", "8Gi")}));
  annotated["metadata"]["annotations"] = {{"gpupack.io/foo", "bar"}};
  d = DenialOf(mutator, annotated);
  EXPECT_EQ(d.code, 400);
  EXPECT_NE(d.message.find("metadata.annotations[\"gpupack.io/foo\"]: unknown gpupack annotation; the annotations a "
                           "pod may set are gpupack.io/device-kind, gpupack.io/mig-profile"),
            std::string::npos)
      << d.message;
}

TEST(Mutator, PodsMayNotPresetWhatOnlyTheSchedulerWrites) {
  Mutator mutator{Config{}};
  for (const std::string& key : {api::ContainerAnnotationKey(false, 0, api::ContainerEnvKey::kMemoryLimitMiB),
                                 api::ContainerAnnotationKey(true, 3, api::ContainerEnvKey::kVisibleDevices),
                                 api::ContainerAnnotationKey(false, 15, api::ContainerEnvKey::kMpsMemoryLimit),
                                 std::string(api::kAnnotationAllocation)}) {
    json pod = PodWith(json::array({GpuContainer("main", "8Gi")}));
    pod["metadata"]["annotations"] = {{key, "999999"}};
    Denial d = DenialOf(mutator, pod);
    EXPECT_EQ(d.code, 403);
    EXPECT_NE(d.message.find(key), std::string::npos) << d.message;
  }
  // Look-alikes under gpupack.io/ are not reserved, but unknown: a 400, not a 403. Others' are fine.
  json pod = PodWith(json::array({GpuContainer("main", "8Gi")}));
  pod["metadata"]["annotations"] = {{"gpupack.io/c0-notes", "x"}};
  EXPECT_EQ(DenialOf(mutator, pod).code, 400);
  pod["metadata"]["annotations"] = {{"example.com/c0-memory-limit-mib", "1"}};
  EXPECT_EQ(Ask(mutator, ReviewOf(pod)).result.outcome, Outcome::kPatched);

  json pinned = PodWith(json::array({GpuContainer("main", "8Gi")}));
  pinned["spec"]["nodeName"] = "gpu-a1";
  Denial d = DenialOf(mutator, pinned);
  EXPECT_EQ(d.code, 403);
  EXPECT_NE(d.message.find("spec.nodeName"), std::string::npos) << d.message;
}

TEST(Mutator, BodiesThatAreNoReviewGetAWellFormedBadRequest) {
  Mutator mutator{Config{}};
  json no_uid = CapturedDeploymentReview();
  no_uid["request"].erase("uid");
  json v1beta1 = CapturedDeploymentReview();
  v1beta1["apiVersion"] = "admission.k8s.io/v1beta1";
  for (const std::string& body : {std::string("not json"), std::string(""), std::string("[1,2]"), std::string("{}"),
                                  std::string("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}"),
                                  no_uid.dump(), v1beta1.dump(), std::string("{\"request\":") + "[" + "]}"}) {
    ReviewResult r = mutator.Review(body);
    EXPECT_EQ(r.outcome, Outcome::kError) << body;
    EXPECT_EQ(r.http_status, 400) << body;
    json answer = json::parse(r.body);
    EXPECT_EQ(answer["kind"], "AdmissionReview");
    EXPECT_EQ(answer["response"]["allowed"], false);
    EXPECT_EQ(answer["response"]["status"]["code"], 400);
    EXPECT_NE(answer["response"]["status"]["message"].get<std::string>().find("malformed"), std::string::npos);
  }
}

TEST(Mutator, UnprocessableReviewsFollowTheFailurePolicy) {
  json review = CapturedDeploymentReview();
  review["request"]["object"] = "not a pod";

  Config fail_closed;
  Answer denied = Ask(Mutator{fail_closed}, review);
  EXPECT_EQ(denied.result.outcome, Outcome::kError);
  EXPECT_EQ(denied.result.http_status, 200);
  EXPECT_EQ(denied.response["uid"], kCapturedUid);
  EXPECT_EQ(denied.response["allowed"], false);
  EXPECT_EQ(denied.response["status"]["code"], 500);

  Config fail_open;
  fail_open.failure_policy = FailurePolicy::kIgnore;
  Answer allowed = Ask(Mutator{fail_open}, review);
  EXPECT_EQ(allowed.result.outcome, Outcome::kError);
  EXPECT_EQ(allowed.response["allowed"], true);
  EXPECT_FALSE(allowed.response.contains("patch"));
  ASSERT_EQ(allowed.response["warnings"].size(), 1u);
  EXPECT_NE(allowed.response["warnings"][0].get<std::string>().find("Ignore"), std::string::npos);
}

// Wrong JSON types anywhere in the pod: every answer is a well-formed review for the same uid,
// never a crash or an exception.
TEST(Mutator, WrongTypesAnywhereInThePodNeverCrash) {
  Mutator mutator{Config{}};
  const json original = AdmissibleDeploymentReview();
  std::vector<json::json_pointer> paths;
  std::function<void(const json&, const json::json_pointer&)> walk = [&](const json& node,
                                                                         const json::json_pointer& at) {
    paths.push_back(at);
    if (node.is_object()) {
      for (const auto& entry : node.items()) walk(entry.value(), at / entry.key());
    } else if (node.is_array()) {
      for (size_t i = 0; i < node.size(); ++i) walk(node[i], at / i);
    }
  };
  walk(original["request"]["object"], json::json_pointer("/request/object"));
  ASSERT_GT(paths.size(), 100u);
  int denied = 0;
  for (const json::json_pointer& path : paths) {
    for (const json& replacement : {json("x"), json(7), json(nullptr), json::array(), json::object()}) {
      json review = original;
      review[path] = replacement;
      ReviewResult r = mutator.Review(review.dump());
      json answer = json::parse(r.body);
      EXPECT_EQ(answer["response"]["uid"], kCapturedUid) << path;
      EXPECT_TRUE(answer["response"]["allowed"].is_boolean()) << path;
      if (r.outcome == Outcome::kDenied) ++denied;
    }
  }
  EXPECT_GT(denied, 0);  // the mutations do reach the validation
}

// ---- the device controls' annotations and the whole-device quota charge ----

// The webhook validates a pod's annotations with the pod parser, which reads them by the rows of
// api/pod_annotations.h: every shared case holds at admission, an accepted one patched, a
// refused one denied (400) with its message.
TEST(Mutator, AnnotationsAreAdmittedOrDeniedAsTheTableSays) {
  Mutator mutator{Config{}};
  for (const api::testing::AcceptedCase& c : api::testing::kAcceptedCases) {
    json pod = PodWith(json::array({GpuContainer("main", "8Gi")}));
    pod["metadata"]["annotations"] = c.set;
    EXPECT_EQ(Ask(mutator, ReviewOf(pod)).result.outcome, Outcome::kPatched) << json(c.set).dump();
  }
  for (const api::testing::RefusedCase& c : api::testing::kRefusedCases) {
    json pod = PodWith(json::array({GpuContainer("main", "8Gi")}));
    pod["metadata"]["annotations"] = c.set;
    Denial d = DenialOf(mutator, pod);
    EXPECT_EQ(d.code, 400) << json(c.set).dump();
    EXPECT_EQ(d.message, c.message);
  }
}

// A share no larger than the least per-process overhead of any GPU (256 MiB,
// model::SmallestProcessOverheadMiB) leaves 256 − 256 = 0 MiB for tensors: denied, saying why.
// 512Mi over 2 devices is 256 per device, the same; 257 MiB leaves 1 MiB and is admitted.
TEST(Mutator, SharesTooSmallForAProcessAreDeniedWithTheReason) {
  Mutator mutator{Config{}};
  json one = {{"name", "tiny"}, {"image", "x"}, {"resources", {{"limits", {{"gpupack.io/gpu-memory", "200Mi"}}}}}};
  Denial d = DenialOf(mutator, PodWith(json::array({one})));
  EXPECT_EQ(d.code, 400);
  EXPECT_EQ(
      d.message,
      "container \"tiny\": 1 process × 256 MiB overhead (its CUDA context and the driver's reserve, the least any "
      "GPU takes) would leave this 200 MiB share 0 MiB for tensors; ask for more than 256 MiB of "
      "gpupack.io/gpu-memory per device (docs/placement.md, \"Per-process overhead\")");
  json split = {{"name", "split"},
                {"image", "x"},
                {"resources", {{"limits", {{"gpupack.io/gpu-memory", "512Mi"}, {"gpupack.io/gpu", "2"}}}}}};
  EXPECT_NE(DenialOf(mutator, PodWith(json::array({split}))).message.find("this 256 MiB share 0 MiB for tensors"),
            std::string::npos);
  EXPECT_EQ(Ask(mutator, ReviewOf(PodWith(json::array({GpuContainer("main", "257Mi")})))).result.outcome,
            Outcome::kPatched);
  // Whole devices have no share to be too small.
  json whole = {{"name", "train"}, {"image", "x"}, {"resources", {{"limits", {{"gpupack.io/gpu", "1"}}}}}};
  EXPECT_EQ(Ask(mutator, ReviewOf(PodWith(json::array({whole})))).result.outcome, Outcome::kPatched);
}

TEST(Mutator, WholeDevicePodsAreChargedToTheGpuMemoryQuota) {
  Config config;
  config.whole_device_charge_mib = 16384;
  Mutator mutator{config};
  json whole = {{"name", "train"}, {"image", "x"}, {"resources", {{"limits", {{"gpupack.io/gpu", "2"}}}}}};
  json review = ReviewOf(PodWith(json::array({GpuContainer("infer", "8Gi"), whole})));
  Answer a = Ask(mutator, review);
  ASSERT_EQ(a.result.outcome, Outcome::kPatched);
  const json pod = PatchedPod(review, a);
  // 2 whole devices × 16384 MiB = 32768Mi, in requests and limits alike; the share pod's own
  // gpu-memory is already what the quota counts.
  EXPECT_EQ(pod["spec"]["containers"][1]["resources"]["limits"]["gpupack.io/gpu-memory"], "32768Mi");
  EXPECT_EQ(pod["spec"]["containers"][1]["resources"]["requests"]["gpupack.io/gpu-memory"], "32768Mi");
  EXPECT_EQ(pod["spec"]["containers"][1]["resources"]["limits"]["gpupack.io/gpu"], "2");
  EXPECT_FALSE(pod["spec"]["containers"][0]["resources"].contains("requests"));
  EXPECT_EQ(pod["metadata"]["annotations"][std::string(api::kAnnotationWholeDeviceCharge)], "c1");
  // The patched pod still asks for two whole devices, and reviewing it again changes nothing more
  // than its charge would (the annotation is the webhook's own, so a user may not preset it).
  auto parsed = translate::ParsePodRequest(pod);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->containers.size(), 2u);
  EXPECT_TRUE(parsed->containers[1].whole_device());
  json preset = PodWith(json::array({whole}));
  preset["metadata"]["annotations"] = {{std::string(api::kAnnotationWholeDeviceCharge), "c0"}};
  Denial d = DenialOf(mutator, preset);
  EXPECT_EQ(d.code, 403);
  EXPECT_NE(d.message.find("gpupack.io/whole-device-charge"), std::string::npos) << d.message;
  // Off by default: no charge, no annotation.
  Answer off = Ask(Mutator{Config{}}, review);
  EXPECT_FALSE(
      PatchedPod(review, off)["spec"]["containers"][1]["resources"]["limits"].contains("gpupack.io/gpu-memory"));
}

}  // namespace
}  // namespace gpupack::webhook

// What a pod may not say about GPUs itself, whatever it asks for: device and cap env in any
// container, and the annotations only gpupack's components write (docs/security.md). The probe
// rows are what a tenant tried against the built webhook before every pod was reviewed.
#include <gtest/gtest.h>

#include "api/annotations.h"
#include "webhook/mutator.h"
#include "webhook/testing/review_testing.h"

namespace gpupack::webhook {
namespace {

using nlohmann::json;
using namespace webhook::testing;

json Env(const std::string& name, const std::string& value) { return {{"name", name}, {"value", value}}; }

json Plain(const std::string& name, json env = nullptr) {
  json container = {{"name", name}, {"image", "cuda:13.4"}};
  if (!env.is_null()) container["env"] = std::move(env);
  return container;
}

json WithEnv(json container, json env) {
  container["env"] = std::move(env);
  return container;
}

json NvidiaGpuContainer(const std::string& name) {
  return {{"name", name}, {"image", "cuda:13.4"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}};
}

const std::string kWhy = " itself; GPU devices and caps come only from the scheduler's allocation";

struct Probe {
  const char* what;
  json pod;
  std::string message;  // the whole denial message
};

std::vector<Probe> Probes() {
  json sidecar = PodWith(json::array(
      {GpuContainer("main", "8Gi"), Plain("sidecar", json::array({Env("NVIDIA_VISIBLE_DEVICES", "all")}))}));
  json plain_all = PodWith(json::array({Plain("main", json::array({Env("NVIDIA_VISIBLE_DEVICES", "all")}))}));
  json plain_caps =
      PodWith(json::array({Plain("main", json::array({Env("NVIDIA_GPU_MEMORY_LIMIT", "999999"),
                                                      Env("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=999999M")}))}));
  json init = PodWith(json::array({GpuContainer("main", "8Gi")}));
  init["spec"]["initContainers"] = json::array(
      {Plain("fetch", json::array({Env("NVIDIA_VISIBLE_DEVICES", "GPU-8c2f1e4a-5b6d-4e7f-9a0b-1c2d3e4f5a6b")}))});
  json annotated = PodWith(json::array({Plain("main")}));
  annotated["metadata"]["annotations"] = {
      {"gpupack.io/c0-visible-devices", "GPU-8c2f1e4a-5b6d-4e7f-9a0b-1c2d3e4f5a6b"}};

  json config_map = PodWith(json::array(
      {Plain("main", json::array({{{"name", "CUDA_VISIBLE_DEVICES"},
                                   {"valueFrom", {{"configMapKeyRef", {{"name", "gpus"}, {"key", "ids"}}}}}}}))}));
  json secret = PodWith(json::array(
      {Plain("main", json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"},
                                   {"valueFrom", {{"secretKeyRef", {{"name", "gpus"}, {"key", "ids"}}}}}}}))}));
  // The downward API aimed at the annotation the bind writes for another container: that
  // container's devices, without its cap.
  json borrowed = PodWith(json::array(
      {GpuContainer("main", "8Gi"),
       Plain("sidecar",
             json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"},
                           {"valueFrom",
                            {{"fieldRef",
                              {{"apiVersion", "v1"},
                               {"fieldPath", "metadata.annotations['gpupack.io/c0-visible-devices']"}}}}}}}))}));
  json expanded = PodWith(
      json::array({Plain("main", json::array({Env("DEVICES", "all"), Env("NVIDIA_VISIBLE_DEVICES", "$(DEVICES)")}))}));
  json own_cap = PodWith(
      json::array({WithEnv(GpuContainer("main", "8Gi"), json::array({Env("NVIDIA_GPU_MEMORY_LIMIT", "999999")}))}));
  json nvidia =
      PodWith(json::array({WithEnv(NvidiaGpuContainer("main"), json::array({Env("NVIDIA_VISIBLE_DEVICES", "all")}))}));
  json ephemeral = PodWith(json::array({Plain("main")}));
  ephemeral["spec"]["ephemeralContainers"] =
      json::array({Plain("debug", json::array({Env("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100")}))});
  json allocation = PodWith(json::array({Plain("main")}));
  allocation["metadata"]["annotations"] = {{std::string(api::kAnnotationAllocation), R"({"v":1})"}};
  json charge = PodWith(json::array({Plain("main")}));
  charge["metadata"]["annotations"] = {{std::string(api::kAnnotationWholeDeviceCharge), "c0"}};

  const std::string scheduler_only =
      "\"]: only the gpupack scheduler may set this annotation (it records the device and memory cap chosen at "
      "bind); remove it from the pod";
  return {
      {"(a) a sidecar beside a gpupack container", sidecar,
       "container \"sidecar\" (spec.containers[1]) sets NVIDIA_VISIBLE_DEVICES" + kWhy},
      {"(b) a pod with no gpupack resources", plain_all,
       "container \"main\" (spec.containers[0]) sets NVIDIA_VISIBLE_DEVICES" + kWhy},
      {"(c) caps in a pod with no gpupack resources, the first named", plain_caps,
       "container \"main\" (spec.containers[0]) sets NVIDIA_GPU_MEMORY_LIMIT" + kWhy},
      {"(d) an init container beside a gpupack app container", init,
       "container \"fetch\" (spec.initContainers[0]) sets NVIDIA_VISIBLE_DEVICES" + kWhy},
      {"(e) a scheduler annotation on a pod with no gpupack resources", annotated,
       "metadata.annotations[\"gpupack.io/c0-visible-devices" + scheduler_only},
      {"a ConfigMap value", config_map, "container \"main\" (spec.containers[0]) sets CUDA_VISIBLE_DEVICES" + kWhy},
      {"a Secret value", secret, "container \"main\" (spec.containers[0]) sets NVIDIA_VISIBLE_DEVICES" + kWhy},
      {"another container's annotation through the downward API", borrowed,
       "container \"sidecar\" (spec.containers[1]) sets NVIDIA_VISIBLE_DEVICES" + kWhy},
      {"a $(VAR) reference", expanded, "container \"main\" (spec.containers[0]) sets NVIDIA_VISIBLE_DEVICES" + kWhy},
      {"a gpupack container raising its own cap", own_cap,
       "container \"main\" (spec.containers[0]) sets NVIDIA_GPU_MEMORY_LIMIT" + kWhy},
      {"a container of NVIDIA's device plugin choosing its devices", nvidia,
       "container \"main\" (spec.containers[0]) sets NVIDIA_VISIBLE_DEVICES" + kWhy},
      {"an ephemeral container", ephemeral,
       "container \"debug\" (spec.ephemeralContainers[0]) sets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" + kWhy},
      {"the allocation on a pod with no gpupack resources", allocation,
       "metadata.annotations[\"gpupack.io/allocation" + scheduler_only},
      {"the webhook's charge on a pod with no gpupack resources", charge,
       "metadata.annotations[\"gpupack.io/whole-device-charge\"]: only gpupack-webhook may set this annotation (it "
       "marks the quota charge it adds to whole-device requests); remove it from the pod"},
  };
}

TEST(Trust, EveryProbeIsDeniedNamingTheContainerAndTheVariable) {
  Mutator mutator{Config{}};
  for (const Probe& probe : Probes()) {
    Denial d = DenialOf(mutator, probe.pod);
    EXPECT_EQ(d.code, 403) << probe.what;
    EXPECT_EQ(d.message, probe.message) << probe.what;
  }
}

TEST(Trust, DenialsAreLoggedNamingThePod) {
  ::testing::internal::CaptureStderr();
  DenialOf(Mutator{Config{}}, Probes()[1].pod);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("INFO webhook: denied pod ml/p (uid " + std::string(kCapturedUid) +
                     "): container \"main\" (spec.containers[0]) sets NVIDIA_VISIBLE_DEVICES itself"),
            std::string::npos)
      << log;
}

// Strip mode: the same pods are admitted without the entries, every other entry in its order;
// annotations are still refused (there is nothing to strip them to).
TEST(Trust, StripModeRemovesTheEntriesAndSaysSo) {
  Mutator mutator{StripConfig()};
  for (const Probe& probe : Probes()) {
    Answer a = Ask(mutator, ReviewOf(probe.pod));
    if (probe.message.starts_with("metadata.annotations")) {
      EXPECT_EQ(a.result.outcome, Outcome::kDenied) << probe.what;
      continue;
    }
    ASSERT_EQ(a.result.outcome, Outcome::kPatched) << probe.what << ": " << a.result.body;
    ASSERT_EQ(a.response["warnings"].size(), 1u) << probe.what;
    const std::string warning = a.response["warnings"][0];
    const std::string label = probe.message.substr(0, probe.message.find(" sets "));
    EXPECT_TRUE(warning.starts_with(label + ": removed ")) << probe.what << ": " << warning;
    json after = PatchedPod(ReviewOf(probe.pod), a);
    for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
      if (!after["spec"].contains(list)) continue;
      for (const json& container : after["spec"][list]) {
        for (const json& entry : container.value("env", json::array())) {
          const std::string name = entry["name"];
          const bool ours =
              entry.contains("valueFrom") && entry["valueFrom"].contains("fieldRef") && container.contains("resources");
          EXPECT_TRUE(!api::IsDeviceEnvName(name) || ours) << probe.what << ": " << entry;
        }
      }
    }
  }
}

TEST(Trust, StripModeReplacesEachEnvListWhole) {
  // Entries to remove at several positions of two containers: ops that removed them one index at a
  // time would shift each other; the answer replaces each list once.
  json pod = PodWith(json::array(
      {Plain("a",
             json::array({Env("NVIDIA_VISIBLE_DEVICES", "all"), Env("KEEP_1", "1"), Env("CUDA_VISIBLE_DEVICES", "0,1"),
                          Env("KEEP_2", "2"), Env("NVIDIA_VISIBLE_DEVICES", "0"), Env("CUDA_VISIBLE_DEVICES", "-1")})),
       Plain("b", json::array({Env("KEEP_3", "3")})),
       Plain("c", json::array({Env("CUDA_MPS_PIPE_DIRECTORY", "/mps")}))}));
  json review = ReviewOf(pod);
  ::testing::internal::CaptureStderr();
  Answer a = Ask(Mutator{StripConfig()}, review);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(a.result.outcome, Outcome::kPatched) << a.result.body;
  EXPECT_EQ(a.patch,
            json::array(
                {{{"op", "replace"},
                  {"path", "/spec/containers/0/env"},
                  {"value", json::array({Env("KEEP_1", "1"), Env("KEEP_2", "2"), Env("CUDA_VISIBLE_DEVICES", "-1")})}},
                 {{"op", "replace"}, {"path", "/spec/containers/2/env"}, {"value", json::array()}}}));
  EXPECT_EQ(a.response["warnings"],
            json::array({"container \"a\" (spec.containers[0]): removed NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, "
                         "NVIDIA_VISIBLE_DEVICES, which a pod may not set itself; GPU devices and caps come only from "
                         "the scheduler's allocation",
                         "container \"c\" (spec.containers[2]): removed CUDA_MPS_PIPE_DIRECTORY, which a pod may not "
                         "set itself; GPU devices and caps come only from the scheduler's allocation"}));
  EXPECT_NE(log.find("INFO webhook: stripped pod ml/p (uid " + std::string(kCapturedUid) + "): container \"a\""),
            std::string::npos)
      << log;
}

TEST(Trust, ValuesThatGiveNoDeviceAreAdmittedUnchanged) {
  Mutator mutator{Config{}};
  for (json entry :
       {Env("NVIDIA_VISIBLE_DEVICES", "none"), Env("NVIDIA_VISIBLE_DEVICES", "void"), Env("NVIDIA_VISIBLE_DEVICES", ""),
        json{{"name", "NVIDIA_VISIBLE_DEVICES"}}, Env("CUDA_VISIBLE_DEVICES", ""), Env("CUDA_VISIBLE_DEVICES", "-1"),
        Env("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"), Env("NVIDIA_REQUIRE_CUDA", "cuda>=13.0")}) {
    Answer a = Ask(mutator, ReviewOf(PodWith(json::array({Plain("main", json::array({entry}))}))));
    EXPECT_EQ(a.result.outcome, Outcome::kSkipped) << entry << ": " << a.result.body;
    EXPECT_EQ(a.response["allowed"], true);
    EXPECT_FALSE(a.response.contains("patch"));
  }
}

// NVIDIA's device plugin gives a container its devices when the container is created, not through
// the pod spec: its pods set none of these variables and pass untouched, beside gpupack's.
TEST(Trust, NvidiaDevicePluginPodsKeepWorkingBesideGpupackPods) {
  Mutator mutator{Config{}};
  json nvidia = PodWith(json::array(
      {WithEnv(NvidiaGpuContainer("train"), json::array({Env("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")}))}));
  Answer a = Ask(mutator, ReviewOf(nvidia));
  EXPECT_EQ(a.result.outcome, Outcome::kSkipped) << a.result.body;
  EXPECT_FALSE(a.response.contains("patch"));

  // One pod, both kinds: the gpupack container is patched, the nvidia.com/gpu one is not touched.
  json mixed = PodWith(json::array({NvidiaGpuContainer("train"), GpuContainer("infer", "8Gi")}));
  json review = ReviewOf(mixed);
  a = Ask(mutator, review);
  ASSERT_EQ(a.result.outcome, Outcome::kPatched) << a.result.body;
  json after = PatchedPod(review, a);
  EXPECT_EQ(after["spec"]["containers"][0], mixed["spec"]["containers"][0]);
  EXPECT_EQ(after["spec"]["containers"][1]["env"].size(), std::size(api::kAllContainerEnvKeys));
  EXPECT_EQ(after["spec"]["schedulerName"], "gpupack-scheduler");

  // ...and the nvidia.com/gpu container may not choose devices itself either.
  mixed["spec"]["containers"][0]["env"] = json::array({Env("NVIDIA_VISIBLE_DEVICES", "all")});
  EXPECT_EQ(DenialOf(mutator, mixed).message,
            "container \"train\" (spec.containers[0]) sets NVIDIA_VISIBLE_DEVICES" + kWhy);
}

json EphemeralReview(json old_containers, json new_containers) {
  json old_pod = PodWith(json::array({Plain("main")}));
  if (!old_containers.is_null()) old_pod["spec"]["ephemeralContainers"] = std::move(old_containers);
  json pod = old_pod;
  pod["spec"]["ephemeralContainers"] = std::move(new_containers);
  json review = ReviewOf(pod);
  review["request"]["operation"] = "UPDATE";
  review["request"]["subResource"] = "ephemeralcontainers";
  review["request"]["oldObject"] = old_pod;
  return review;
}

// kubectl debug adds ephemeral containers to a running pod through the subresource; only the
// ones it adds are reviewed.
TEST(Trust, EphemeralContainersAddedLaterAreReviewedToo) {
  json debugger = Plain("debugger", json::array({Env("NVIDIA_VISIBLE_DEVICES", "all")}));
  Answer a = Ask(Mutator{Config{}}, EphemeralReview(nullptr, json::array({debugger})));
  EXPECT_EQ(a.result.outcome, Outcome::kDenied);
  EXPECT_EQ(a.response["status"]["message"],
            "container \"debugger\" (spec.ephemeralContainers[0]) sets NVIDIA_VISIBLE_DEVICES" + kWhy);

  json review = EphemeralReview(json::array({debugger}), json::array({debugger, Plain("shell")}));
  a = Ask(Mutator{Config{}}, review);
  EXPECT_EQ(a.result.outcome, Outcome::kSkipped) << "an existing one is not judged again: " << a.result.body;

  review = EphemeralReview(nullptr, json::array({Plain("shell"), debugger}));
  a = Ask(Mutator{StripConfig()}, review);
  ASSERT_EQ(a.result.outcome, Outcome::kPatched) << a.result.body;
  EXPECT_EQ(a.patch,
            json::array({{{"op", "replace"}, {"path", "/spec/ephemeralContainers/1/env"}, {"value", json::array()}}}));
  // Other updates of a pod are not the webhook's.
  review["request"]["subResource"] = "status";
  EXPECT_EQ(Ask(Mutator{Config{}}, review).result.outcome, Outcome::kSkipped);
}

TEST(Trust, TheCapturedPodSettingItsOwnCapIsRefusedByDefault) {
  Answer a = Ask(Mutator{Config{}}, CapturedDeploymentReview());
  EXPECT_EQ(a.result.outcome, Outcome::kDenied);
  EXPECT_EQ(a.response["status"]["code"], 403);
  EXPECT_EQ(a.response["status"]["message"],
            "container \"server\" (spec.containers[0]) sets NVIDIA_GPU_MEMORY_LIMIT" + kWhy);
}

}  // namespace
}  // namespace gpupack::webhook

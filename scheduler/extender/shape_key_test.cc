#include "scheduler/extender/shape_key.h"

#include <array>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "placement/placement.h"
#include "testing/builders.h"
#include "translate/pod_request.h"

namespace gpupack::extender {
namespace {

using builders::GpuNode;

// A parsed pod that sets every annotation the parser knows, so that every field has a value to
// mutate: an 8 GiB app container at 30 % compute, an init container on one whole device, 2 CPUs.
model::PodRequest ParsedPod() {
  nlohmann::json pod = builders::PodJson("train-0", "uid-0", "8Gi");
  pod["spec"]["initContainers"] =
      nlohmann::json::array({{{"name", "warm"}, {"resources", {{"limits", {{"cpu", "1"}, {"gpupack.io/gpu", "1"}}}}}}});
  pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "2";
  pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "4Gi";
  pod["spec"]["containers"][0]["resources"]["limits"]["gpupack.io/gpu-compute"] = "30";
  pod["metadata"]["annotations"] = {
      {"gpupack.io/device-kind", "gpu"},         {"gpupack.io/gpu-model", "A100|H100"},
      {"gpupack.io/isolation", "best-effort"},   {"gpupack.io/gpu-uuids", "GPU-a100-0,GPU-a100-1,GPU-t4-0"},
      {"gpupack.io/gpu-uuids-exclude", "GPU-x"}, {"gpupack.io/gpu-model-exclude", "V100"},
      {"gpupack.io/node-policy", "binpack"},     {"gpupack.io/device-policy", "spread"},
      {"gpupack.io/spread-key", "train"},        {"gpupack.io/spread-scope", "device"},
  };
  StatusOr<model::PodRequest> parsed = translate::ParsePodRequest(pod);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : model::PodRequest{};
}

// A change of each kind of field: every mutation makes the field differ from what it was.
void Mutate(bool& v) { v = !v; }
void Mutate(int& v) { ++v; }
void Mutate(int64_t& v) { v += 1024; }
void Mutate(std::string& v) { v += "x"; }
void Mutate(std::vector<std::string>& v) { v.push_back("x"); }
void Mutate(model::DeviceKindPreference& v) {
  v = v == model::DeviceKindPreference::kGpu ? model::DeviceKindPreference::kMig : model::DeviceKindPreference::kGpu;
}
void Mutate(std::optional<model::PolicyKind>& v) {
  v = v == model::PolicyKind::kFgd ? model::PolicyKind::kSpread : model::PolicyKind::kFgd;
}

struct Field {
  std::string label;
  bool identity;  // a field the key leaves out: it must change no verdict
  std::function<void(model::PodRequest&)> mutate;
};

// Every field of the request by reference, by structured binding as ShapeKey binds them: a field
// added to model::PodRequest fails to compile here (and in shape_key.cc) until it is listed.
auto FieldsOf(model::PodRequest& pod) {
  auto& [ns, name, uid, cpu_milli, memory_bytes, containers, device_kind, mig_profile, gpu_models, hard_isolation,
         gpu_uuids, excluded_gpu_uuids, excluded_gpu_models, node_policy, device_policy, spread_key,
         spread_across_nodes, priority, movable] = pod;
  return std::tie(ns, name, uid, cpu_milli, memory_bytes, containers, device_kind, mig_profile, gpu_models,
                  hard_isolation, gpu_uuids, excluded_gpu_uuids, excluded_gpu_models, node_policy, device_policy,
                  spread_key, spread_across_nodes, priority, movable);
}
// The same for a container.
auto FieldsOf(model::ContainerRequest& container) {
  auto& [name, index, init, device_count, mem_per_device_mib, mem_limit_per_device_mib, compute_pct] = container;
  return std::tie(name, index, init, device_count, mem_per_device_mib, mem_limit_per_device_mib, compute_pct);
}

void Mutate(std::vector<model::ContainerRequest>& v) { v.push_back(v.front()); }

// Each field of FieldsOf's tuples in order: its name, and whether it is identity. The sizes must
// match the tuples', so a field cannot be left out of the test either.
using Label = std::pair<const char*, bool>;
constexpr std::array<Label, 19> kPodFields = {{
    {"ns", true},
    {"name", true},
    {"uid", true},
    {"cpu_milli", false},
    {"memory_bytes", false},
    {"containers (one more)", false},
    {"device_kind", false},
    {"mig_profile", false},
    {"gpu_models", false},
    {"hard_isolation", false},
    {"gpu_uuids", false},
    {"excluded_gpu_uuids", false},
    {"excluded_gpu_models", false},
    {"node_policy", false},
    {"device_policy", false},
    {"spread_key", false},
    {"spread_across_nodes", false},
    {"priority", true},  // the bind reads it from the pod (MPS client priority); placement never does
    {"movable", true},   // the defragmenter reads it from the pod; placement never does
}};
constexpr std::array<Label, 7> kContainerFields = {{
    {"name", true},
    {"index", false},
    {"init", false},
    {"device_count", false},
    {"mem_per_device_mib", false},
    {"mem_limit_per_device_mib", false},
    {"compute_pct", false},
}};
static_assert(kPodFields.size() == std::tuple_size_v<decltype(FieldsOf(std::declval<model::PodRequest&>()))>);
static_assert(kContainerFields.size() ==
              std::tuple_size_v<decltype(FieldsOf(std::declval<model::ContainerRequest&>()))>);

// One Field per element of the tuple `of(pod)` returns.
template <size_t N, typename Of, size_t... I>
void AddFields(std::vector<Field>& fields, const std::string& prefix, const std::array<Label, N>& labels, Of of,
               std::index_sequence<I...>) {
  (fields.push_back({prefix + labels[I].first, labels[I].second,
                     [of](model::PodRequest& pod) { Mutate(std::get<I>(FieldsOf(of(pod)))); }}),
   ...);
}

// Every field of the request (every field of each of `containers` containers too), each with a
// mutation of it.
std::vector<Field> EveryField(size_t containers) {
  std::vector<Field> fields;
  AddFields(
      fields, "", kPodFields, [](model::PodRequest& pod) -> model::PodRequest& { return pod; },
      std::make_index_sequence<kPodFields.size()>());
  for (size_t c = 0; c < containers; ++c) {
    AddFields(
        fields, "containers[" + std::to_string(c) + "].", kContainerFields,
        [c](model::PodRequest& pod) -> model::ContainerRequest& { return pod.containers[c]; },
        std::make_index_sequence<kContainerFields.size()>());
  }
  return fields;
}

// What the memo serves, per node: the verdict's message and the costs.
std::vector<std::string> Answers(const model::PodRequest& pod) {
  const placement::Policy policy(model::PolicyKind::kFgd, placement::DefaultPriorWorkload(16384),
                                 placement::PlacementOptions{});
  std::vector<std::string> answers;
  for (model::Node node : {GpuNode("a100", 2, 16384), GpuNode("t4", 1, 16384, "Tesla T4")}) {
    node.cpu_milli = 8000;
    const placement::NodeEvaluation e = policy.Evaluate(node, pod);
    answers.push_back(e.verdict.Message() + " cost " + std::to_string(e.cost) + " fill " + std::to_string(e.fill_cost) +
                      " reservation " + std::to_string(e.reservation_cost) + " completion " +
                      std::to_string(e.completion_loss));
  }
  return answers;
}

TEST(ShapeKey, ChangesWithEveryFieldButThePodsIdentity) {
  const model::PodRequest base = ParsedPod();
  ASSERT_EQ(base.containers.size(), 2u) << "the app container and the init container";
  const std::string key = ShapeKey(base);
  const std::vector<std::string> answers = Answers(base);
  for (const Field& field : EveryField(base.containers.size())) {
    model::PodRequest mutated = base;
    field.mutate(mutated);
    if (field.identity) {
      EXPECT_EQ(ShapeKey(mutated), key) << field.label << " is identity: replicas must share a key";
      EXPECT_EQ(Answers(mutated), answers) << field.label << " changes a verdict: it belongs in the key";
    } else {
      EXPECT_NE(ShapeKey(mutated), key) << field.label << " is missing from the shape key";
    }
  }
}

// The verdict side of the same contract, on mutations that do change an answer here: wherever the
// answers differ, the keys must too.
TEST(ShapeKey, DiffersWheneverAnAnswerDiffers) {
  const model::PodRequest base = ParsedPod();
  int changed = 0;
  for (const Field& field : EveryField(base.containers.size())) {
    model::PodRequest mutated = base;
    field.mutate(mutated);
    if (Answers(mutated) == Answers(base)) continue;
    ++changed;
    EXPECT_NE(ShapeKey(mutated), ShapeKey(base)) << field.label;
  }
  EXPECT_GT(changed, 0) << "the nodes must be able to tell some mutation apart";
}

// Self-delimited: the same characters split between two fields differently are two keys.
TEST(ShapeKey, FieldBoundariesAreNotAmbiguous) {
  model::PodRequest a = ParsedPod(), b = a;
  a.gpu_models = {"A100", "H100"};
  b.gpu_models = {"A100H100"};
  EXPECT_NE(ShapeKey(a), ShapeKey(b));
  a.mig_profile = "1g";
  a.spread_key = "x";
  b = a;
  b.mig_profile = "1gx";
  b.spread_key = "";
  EXPECT_NE(ShapeKey(a), ShapeKey(b));
}

}  // namespace
}  // namespace gpupack::extender

#include "webhook/mutator.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "api/annotations.h"
#include "api/json_fields.h"
#include "api/pod_annotations.h"
#include "common/log.h"
#include "common/quantity.h"
#include "model/process_overhead.h"
#include "translate/pod_request.h"
#include "webhook/device_env.h"

namespace gpupack::webhook {
namespace {

using nlohmann::json;

constexpr std::string_view kReviewApiVersion = "admission.k8s.io/v1";
constexpr std::string_view kDefaultSchedulerName = "default-scheduler";

// Appends the base64 of `bytes` to `out`.
void AppendBase64(std::string_view bytes, std::string& out) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  out.reserve(out.size() + (bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += kAlphabet[n >> 18];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  if (i + 1 == bytes.size()) {
    uint32_t n = uint8_t(bytes[i]) << 16;
    out += kAlphabet[n >> 18];
    out += kAlphabet[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += kAlphabet[n >> 18];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += '=';
  }
}

std::string ReviewBody(json response) {
  return json{{"apiVersion", kReviewApiVersion}, {"kind", "AdmissionReview"}, {"response", std::move(response)}}.dump();
}

// Byte for byte ReviewBody({{"uid", uid}, {"allowed", true}, {"patchType", "JSONPatch"},
// {"patch", base64 of patch_json}}) (keys in nlohmann's sorted order), written directly: the
// base64 text, most of the body, needs no escaping, and going through nlohmann would copy it
// into a json value and escape-check it byte by byte.
std::string PatchedReviewBody(const std::string& uid, std::string_view patch_json) {
  std::string body = R"({"apiVersion":")" + std::string(kReviewApiVersion) +
                     R"(","kind":"AdmissionReview","response":{"allowed":true,"patch":")";
  AppendBase64(patch_json, body);
  body += R"(","patchType":"JSONPatch","uid":)";
  body += json(uid).dump();
  body += "}}";
  return body;
}

ReviewResult Allow(const std::string& uid, Outcome outcome) {
  return {outcome, 200, ReviewBody({{"uid", uid}, {"allowed", true}})};
}

ReviewResult Refuse(const std::string& uid, Outcome outcome, int http_status, int code, std::string_view reason,
                    const std::string& message) {
  json status = {{"status", "Failure"}, {"code", code}, {"reason", reason}, {"message", message}};
  return {outcome, http_status, ReviewBody({{"uid", uid}, {"allowed", false}, {"status", std::move(status)}})};
}

ReviewResult Malformed(const std::string& uid, const std::string& message) {
  return Refuse(uid, Outcome::kError, 400, 400, "BadRequest", "gpupack-webhook: malformed AdmissionReview: " + message);
}

using api::FieldOf;
using api::StringField;

std::string ContainerLabel(const json& container, std::string_view list, size_t index) {
  std::string name = StringField(container, "name");
  return "container \"" + name + "\" (spec." + std::string(list) + "[" + std::to_string(index) + "])";
}

// The env entries that carry one container's cap, in api::kAllContainerEnvKeys order.
json BuildInjectedEnv(bool init, int index) {
  json env = json::array();
  for (api::ContainerEnvKey key : api::kAllContainerEnvKeys) {
    std::string field_path = "metadata.annotations['" + api::ContainerAnnotationKey(init, index, key) + "']";
    env.push_back({{"name", api::ContainerEnvName(key)},
                   {"valueFrom", {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", field_path}}}}}});
  }
  return env;
}

// BuildInjectedEnv, built once for the first containers of each list (pods rarely have more):
// copying the entries costs a review less than formatting their annotation keys again.
json InjectedEnv(bool init, int index) {
  constexpr int kBuiltOnce = 16;
  auto build_list = [](bool init_list) {
    std::vector<json> envs;
    for (int i = 0; i < kBuiltOnce; ++i) envs.push_back(BuildInjectedEnv(init_list, i));
    return envs;
  };
  static const std::vector<json> app_envs = build_list(false), init_envs = build_list(true);
  if (index < 0 || index >= kBuiltOnce) return BuildInjectedEnv(init, index);
  return (init ? init_envs : app_envs)[size_t(index)];
}

// The container lists whose env is reviewed, in the order a denial reports them. Ephemeral
// containers cannot be set at CREATE (the API server refuses them), but cost nothing to look at.
constexpr std::string_view kContainerLists[] = {"containers", "initContainers", "ephemeralContainers"};

// Who may write a component row of api::PodAnnotations(), as the refusal names them.
std::string_view WriterName(api::AnnotationWriter writer) {
  switch (writer) {
    case api::AnnotationWriter::kScheduler:
      return "the gpupack scheduler";
    case api::AnnotationWriter::kWebhook:
      return "gpupack-webhook";
    case api::AnnotationWriter::kUser:
      break;
  }
  return "the pod's author";
}

// The annotations only gpupack's components write (the rows of api::PodAnnotations() whose writer
// is not the user); refused on every pod.
Status CheckComponentAnnotations(const json& pod) {
  const json* metadata = FieldOf(pod, "metadata");
  const json* annotations = metadata != nullptr ? FieldOf(*metadata, "annotations") : nullptr;
  if (annotations == nullptr || !annotations->is_object()) return Status::Ok();
  for (const auto& entry : annotations->items()) {
    const std::string& key = entry.key();
    const api::PodAnnotation* row = api::FindPodAnnotation(key);
    if (row != nullptr && row->writer != api::AnnotationWriter::kUser) {
      return Status::PermissionDenied("metadata.annotations[\"" + key + "\"]: only " +
                                      std::string(WriterName(row->writer)) + " may set this annotation (" +
                                      std::string(row->purpose) + "); remove it from the pod");
    }
  }
  return Status::Ok();
}

Status CheckNodeName(const json& spec) {
  std::string node_name = StringField(spec, "nodeName");
  if (node_name.empty()) return Status::Ok();
  return Status::PermissionDenied("spec.nodeName is set to \"" + node_name +
                                  "\": a pod that asks for gpupack resources must be placed by the gpupack scheduler, "
                                  "which chooses its device and records its memory cap");
}

std::string PodName(const json& pod) {
  const json* metadata = FieldOf(pod, "metadata");
  std::string name = metadata != nullptr ? StringField(*metadata, "name") : std::string();
  if (name.empty() && metadata != nullptr) name = StringField(*metadata, "generateName") + "*";
  return name;
}

// A share no larger than one process's overhead (model/process_overhead.h: the least any GPU
// family takes, since the webhook cannot know the device) leaves nothing for tensors, whether the
// cap holds the context (R615 partitioning) or the node adds it outside; refused at admission
// rather than discovered as an out-of-memory error at the first allocation.
Status CheckMinimumShares(const model::PodRequest& request) {
  const model::MiB overhead = model::SmallestProcessOverheadMiB();
  for (const model::ContainerRequest& c : request.containers) {
    if (c.whole_device() || c.mem_per_device_mib > overhead) continue;
    return Status::InvalidArgument(
        "container \"" + c.name + "\": 1 process × " + std::to_string(overhead) +
        " MiB overhead (its CUDA context and the driver's reserve, the least any GPU takes) would leave this " +
        std::to_string(c.mem_per_device_mib) + " MiB share 0 MiB for tensors; ask for more than " +
        std::to_string(overhead) + " MiB of " + std::string(api::kResourceGpuMemory) +
        " per device (docs/placement.md, \"Per-process overhead\")");
  }
  return Status::Ok();
}

}  // namespace

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPatched:
      return "patched";
    case Outcome::kSkipped:
      return "skipped";
    case Outcome::kDenied:
      return "denied";
    case Outcome::kError:
      return "error";
  }
  return "error";
}

Mutator::Mutator(Config config) : config_(std::move(config)) {}

json Mutator::SchedulerNamePatch(const json& spec) const {
  const json* current = FieldOf(spec, "schedulerName");
  if (current == nullptr || current->is_null()) {
    return {{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", config_.scheduler_name}};
  }
  std::string name = current->is_string() ? current->get<std::string>() : std::string();
  bool custom = !name.empty() && name != kDefaultSchedulerName;
  if (name == config_.scheduler_name || (custom && config_.allow_custom_scheduler_name)) {
    return nullptr;
  }
  return {{"op", "replace"}, {"path", "/spec/schedulerName"}, {"value", config_.scheduler_name}};
}

Status Mutator::ReviewEnv(const json& container, std::string_view list, size_t index, const json& own,
                          PodPatch& patch) const {
  const json* old_env = FieldOf(container, "env");
  if (old_env != nullptr && !old_env->is_null() && !old_env->is_array()) {
    return Status::InvalidArgument(ContainerLabel(container, list, index) + ": env must be a list");
  }
  ContainerEnvReview review = ReviewContainerEnv(old_env != nullptr ? *old_env : json(), own);
  if (!review.refused.empty()) {
    if (config_.user_device_env == UserDeviceEnvPolicy::kRefuse) {
      return Status::PermissionDenied(ContainerLabel(container, list, index) + " sets " + review.refused.front() +
                                      " itself; GPU devices and caps come only from the scheduler's allocation");
    }
    std::string names;
    for (const std::string& name : review.refused) names += (names.empty() ? "" : ", ") + name;
    patch.warnings.push_back(ContainerLabel(container, list, index) + ": removed " + names +
                             ", which a pod may not set itself; GPU devices and caps come only from the "
                             "scheduler's allocation");
  }
  const bool unchanged = old_env != nullptr && old_env->is_array() ? review.env == *old_env : review.env.empty();
  if (unchanged) return Status::Ok();
  // The whole list is replaced: ops that remove entries by index would shift each other.
  json::json_pointer path = json::json_pointer("/spec") / std::string(list) / index / "env";
  patch.ops.push_back(
      {{"op", old_env != nullptr ? "replace" : "add"}, {"path", path.to_string()}, {"value", std::move(review.env)}});
  return Status::Ok();
}

StatusOr<PodPatch> Mutator::PatchFor(const json& pod) const {
  GPUPACK_RETURN_IF_ERROR(CheckComponentAnnotations(pod));
  PodPatch patch;
  model::PodRequest request;  // no containers: the pod asks gpupack for nothing
  if (translate::PodAsksForGpupack(pod)) {
    GPUPACK_ASSIGN_OR_RETURN(request, translate::ParsePodRequest(pod, config_.max_devices_per_container));
    GPUPACK_RETURN_IF_ERROR(CheckMinimumShares(request));
    GPUPACK_RETURN_IF_ERROR(CheckNodeName(pod.at("spec")));
  }
  const json* spec = FieldOf(pod, "spec");
  if (spec == nullptr || !spec->is_object()) return patch;
  std::string charged;  // api::kAnnotationWholeDeviceCharge: "c0,i1"
  for (const model::ContainerRequest& container : request.containers) {
    std::string_view list = container.init ? "initContainers" : "containers";
    const json& object = spec->at(list).at(static_cast<size_t>(container.index));
    if (config_.whole_device_charge_mib > 0 && container.whole_device()) {
      // Charge whole devices to the namespace's gpu-memory quota: requests and limits alike
      // (Kubernetes wants them equal for extended resources).
      const json* old = FieldOf(object, "resources");
      if (old != nullptr && !old->is_null() && !old->is_object()) {
        return Status::InvalidArgument(ContainerLabel(object, list, container.index) + ": resources must be an object");
      }
      json resources = old != nullptr && old->is_object() ? *old : json::object();
      const std::string charge = std::to_string(config_.whole_device_charge_mib * container.device_count) + "Mi";
      for (const char* section : {"limits", "requests"}) {
        if (!resources[section].is_object()) resources[section] = json::object();
        resources[section][std::string(api::kResourceGpuMemory)] = charge;
      }
      json::json_pointer path =
          json::json_pointer("/spec") / std::string(list) / static_cast<size_t>(container.index) / "resources";
      patch.ops.push_back(
          {{"op", old != nullptr ? "replace" : "add"}, {"path", path.to_string()}, {"value", resources}});
      charged +=
          (charged.empty() ? "" : ",") + std::string(container.init ? "i" : "c") + std::to_string(container.index);
    }
    if (config_.max_device_memory_mib > 0 && container.mem_per_device_mib > config_.max_device_memory_mib) {
      return Status::InvalidArgument(
          ContainerLabel(object, list, container.index) + ": " + std::string(api::kResourceGpuMemory) + " asks for " +
          FormatMiB(container.mem_per_device_mib) + " on each of its " + std::to_string(container.device_count) +
          " device(s), more than the largest device in the cluster has (" + FormatMiB(config_.max_device_memory_mib) +
          ")");
    }
  }
  for (std::string_view list : kContainerLists) {
    const json* containers = FieldOf(*spec, list);
    if (containers == nullptr || !containers->is_array()) continue;
    for (size_t i = 0; i < containers->size(); ++i) {
      const bool init = list == "initContainers";
      const bool gpupack =
          list != "ephemeralContainers" &&
          std::any_of(request.containers.begin(), request.containers.end(),
                      [&](const model::ContainerRequest& c) { return c.init == init && size_t(c.index) == i; });
      GPUPACK_RETURN_IF_ERROR(
          ReviewEnv((*containers)[i], list, i, gpupack ? InjectedEnv(init, int(i)) : json::array(), patch));
    }
  }
  if (!charged.empty()) {
    const json* metadata = FieldOf(pod, "metadata");
    const json* annotations = metadata != nullptr ? FieldOf(*metadata, "annotations") : nullptr;
    if (annotations != nullptr && annotations->is_object()) {
      patch.ops.push_back(
          {{"op", "add"},
           {"path",
            (json::json_pointer("/metadata/annotations") / std::string(api::kAnnotationWholeDeviceCharge)).to_string()},
           {"value", charged}});
    } else {
      patch.ops.push_back({{"op", "add"},
                           {"path", "/metadata/annotations"},
                           {"value", {{std::string(api::kAnnotationWholeDeviceCharge), charged}}}});
    }
  }
  if (!request.containers.empty()) {
    json scheduler = SchedulerNamePatch(*spec);
    if (!scheduler.is_null()) patch.ops.insert(patch.ops.begin(), std::move(scheduler));
  }
  return patch;
}

StatusOr<PodPatch> Mutator::EphemeralContainersPatchFor(const json& pod, const json& old_pod) const {
  PodPatch patch;
  const json* spec = FieldOf(pod, "spec");
  const json* containers = spec != nullptr ? FieldOf(*spec, "ephemeralContainers") : nullptr;
  if (containers == nullptr || !containers->is_array()) return patch;
  const json* old_spec = FieldOf(old_pod, "spec");
  const json* old_containers = old_spec != nullptr ? FieldOf(*old_spec, "ephemeralContainers") : nullptr;
  for (size_t i = 0; i < containers->size(); ++i) {
    const std::string name = StringField((*containers)[i], "name");
    const bool added = old_containers == nullptr || !old_containers->is_array() ||
                       std::none_of(old_containers->begin(), old_containers->end(),
                                    [&](const json& old) { return StringField(old, "name") == name; });
    if (added) GPUPACK_RETURN_IF_ERROR(ReviewEnv((*containers)[i], "ephemeralContainers", i, json::array(), patch));
  }
  return patch;
}

ReviewResult Mutator::Review(std::string_view body) const {
  json review = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (review.is_discarded()) return Malformed("", "the body is not valid JSON");
  if (!review.is_object()) return Malformed("", "the body is not a JSON object");
  if (StringField(review, "apiVersion") != kReviewApiVersion || StringField(review, "kind") != "AdmissionReview") {
    return Malformed("", "expected apiVersion admission.k8s.io/v1 and kind AdmissionReview");
  }
  const json* request = FieldOf(review, "request");
  if (request == nullptr || !request->is_object()) return Malformed("", "request is missing");
  std::string uid = StringField(*request, "uid");
  if (uid.empty()) return Malformed("", "request.uid is missing or not a string");

  // Past this point the body is a review the API server could have sent; whatever goes wrong now
  // is answered as the failure policy says.
  auto failed = [&](const std::string& what) {
    if (config_.failure_policy == FailurePolicy::kFail) {
      return Refuse(uid, Outcome::kError, 200, 500, "InternalError",
                    "gpupack-webhook could not process the pod (failurePolicy Fail): " + what);
    }
    ReviewResult result = Allow(uid, Outcome::kError);
    result.body = ReviewBody({{"uid", uid},
                              {"allowed", true},
                              {"warnings", json::array({"gpupack-webhook could not process the pod and admitted it "
                                                        "unchanged (failurePolicy Ignore): " +
                                                        what})}});
    return result;
  };
  try {
    const json* resource = FieldOf(*request, "resource");
    const bool pods =
        resource != nullptr && StringField(*resource, "group").empty() && StringField(*resource, "resource") == "pods";
    const std::string subresource = StringField(*request, "subResource");
    const std::string operation = StringField(*request, "operation");
    const bool create = pods && subresource.empty() && operation == "CREATE";
    const bool debug = pods && subresource == "ephemeralcontainers" && operation == "UPDATE";
    if (!create && !debug) return Allow(uid, Outcome::kSkipped);
    const json* pod = FieldOf(*request, "object");
    if (pod == nullptr || !pod->is_object()) return failed("request.object is not a Pod object");
    const json* old_pod = FieldOf(*request, "oldObject");
    StatusOr<PodPatch> patch =
        create ? PatchFor(*pod) : EphemeralContainersPatchFor(*pod, old_pod != nullptr ? *old_pod : json());
    auto pod_label = [&] { return StringField(*request, "namespace") + "/" + PodName(*pod) + " (uid " + uid + ")"; };
    if (!patch.ok()) {
      bool forbidden = patch.status().code() == StatusCode::kPermissionDenied;
      GPUPACK_LOG(kInfo, "webhook") << "denied pod " << pod_label() << ": " << patch.status().message();
      return Refuse(uid, Outcome::kDenied, 200, forbidden ? 403 : 400, forbidden ? "Forbidden" : "BadRequest",
                    patch.status().message());
    }
    if (patch->ops.empty()) return Allow(uid, Outcome::kSkipped);
    if (patch->warnings.empty()) return {Outcome::kPatched, 200, PatchedReviewBody(uid, patch->ops.dump())};
    for (const std::string& warning : patch->warnings) {
      GPUPACK_LOG(kInfo, "webhook") << "stripped pod " << pod_label() << ": " << warning;
    }
    std::string patch_base64;
    AppendBase64(patch->ops.dump(), patch_base64);
    return {Outcome::kPatched, 200,
            ReviewBody({{"uid", uid},
                        {"allowed", true},
                        {"patchType", "JSONPatch"},
                        {"patch", std::move(patch_base64)},
                        {"warnings", patch->warnings}})};
  } catch (const std::exception& e) {
    // nlohmann and the standard library throw on shapes no typed Pod can have; never crash.
    return failed(e.what());
  }
}

}  // namespace gpupack::webhook

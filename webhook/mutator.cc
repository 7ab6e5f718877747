#include "webhook/mutator.h"

#include <exception>
#include <utility>

#include "api/annotations.h"
#include "common/log.h"
#include "common/quantity.h"
#include "translate/pod_request.h"

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

const json* Field(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string StringField(const json& object, std::string_view key) {
  const json* value = Field(object, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

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

bool IsInjectedName(const json& entry) {
  const json* name = Field(entry, "name");
  if (name == nullptr || !name->is_string()) return false;
  for (api::ContainerEnvKey key : api::kAllContainerEnvKeys) {
    if (name->get_ref<const std::string&>() == api::ContainerEnvName(key)) return true;
  }
  return false;
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

Status Mutator::CheckWebhookRules(const json& pod) const {
  const json* metadata = Field(pod, "metadata");
  const json* annotations = metadata != nullptr ? Field(*metadata, "annotations") : nullptr;
  if (annotations != nullptr && annotations->is_object()) {
    for (const auto& entry : annotations->items()) {
      const std::string& key = entry.key();
      if (api::IsSchedulerAnnotation(key)) {
        return Status::PermissionDenied(
            "metadata.annotations[\"" + key +
            "\"]: only the gpupack scheduler may set this annotation (it records the device and "
            "memory cap chosen at bind); remove it from the pod");
      }
      if (key == api::kAnnotationWholeDeviceCharge) {
        return Status::PermissionDenied(
            "metadata.annotations[\"" + key +
            "\"]: only gpupack-webhook may set this annotation (it marks the quota charge it adds to "
            "whole-device requests); remove it from the pod");
      }
    }
  }
  const json* spec = Field(pod, "spec");
  std::string node_name = spec != nullptr ? StringField(*spec, "nodeName") : std::string();
  if (!node_name.empty()) {
    return Status::PermissionDenied(
        "spec.nodeName is set to \"" + node_name +
        "\": a pod that asks for gpupack resources must be placed by the gpupack scheduler, "
        "which chooses its device and records its memory cap");
  }
  return Status::Ok();
}

json Mutator::SchedulerNamePatch(const json& spec) const {
  const json* current = Field(spec, "schedulerName");
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

StatusOr<json> Mutator::PatchFor(const json& pod) const {
  GPUPACK_ASSIGN_OR_RETURN(model::PodRequest request,
                           translate::ParsePodRequest(pod, config_.max_devices_per_container));
  GPUPACK_RETURN_IF_ERROR(CheckWebhookRules(pod));
  const json& spec = pod.at("spec");
  json patch = json::array();
  std::string charged;  // api::kAnnotationWholeDeviceCharge: "c0,i1"
  for (const model::ContainerRequest& container : request.containers) {
    std::string_view list = container.init ? "initContainers" : "containers";
    const json& object = spec.at(list).at(static_cast<size_t>(container.index));
    if (config_.whole_device_charge_mib > 0 && container.whole_device()) {
      // Charge whole devices to the namespace's gpu-memory quota: requests and limits alike
      // (Kubernetes wants them equal for extended resources).
      const json* old = Field(object, "resources");
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
      patch.push_back({{"op", old != nullptr ? "replace" : "add"}, {"path", path.to_string()}, {"value", resources}});
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
    json env = InjectedEnv(container.init, container.index);
    const json* old_env = Field(object, "env");
    if (old_env != nullptr && !old_env->is_null() && !old_env->is_array()) {
      return Status::InvalidArgument(ContainerLabel(object, list, container.index) + ": env must be a list");
    }
    if (old_env != nullptr && old_env->is_array()) {
      for (const json& entry : *old_env) {
        if (!IsInjectedName(entry)) env.push_back(entry);
      }
      if (env == *old_env) continue;
    }
    json::json_pointer path =
        json::json_pointer("/spec") / std::string(list) / static_cast<size_t>(container.index) / "env";
    patch.push_back(
        {{"op", old_env != nullptr ? "replace" : "add"}, {"path", path.to_string()}, {"value", std::move(env)}});
  }
  if (!charged.empty()) {
    const json* metadata = Field(pod, "metadata");
    const json* annotations = metadata != nullptr ? Field(*metadata, "annotations") : nullptr;
    if (annotations != nullptr && annotations->is_object()) {
      patch.push_back(
          {{"op", "add"},
           {"path",
            (json::json_pointer("/metadata/annotations") / std::string(api::kAnnotationWholeDeviceCharge)).to_string()},
           {"value", charged}});
    } else {
      patch.push_back({{"op", "add"},
                       {"path", "/metadata/annotations"},
                       {"value", {{std::string(api::kAnnotationWholeDeviceCharge), charged}}}});
    }
  }
  json scheduler = SchedulerNamePatch(spec);
  if (!scheduler.is_null()) patch.insert(patch.begin(), std::move(scheduler));
  return patch;
}

ReviewResult Mutator::Review(std::string_view body) const {
  json review = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (review.is_discarded()) return Malformed("", "the body is not valid JSON");
  if (!review.is_object()) return Malformed("", "the body is not a JSON object");
  if (StringField(review, "apiVersion") != kReviewApiVersion || StringField(review, "kind") != "AdmissionReview") {
    return Malformed("", "expected apiVersion admission.k8s.io/v1 and kind AdmissionReview");
  }
  const json* request = Field(review, "request");
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
    const json* resource = Field(*request, "resource");
    bool is_pod = resource != nullptr && StringField(*resource, "group").empty() &&
                  StringField(*resource, "resource") == "pods" && StringField(*request, "subResource").empty();
    if (!is_pod || StringField(*request, "operation") != "CREATE") {
      return Allow(uid, Outcome::kSkipped);
    }
    const json* pod = Field(*request, "object");
    if (pod == nullptr || !pod->is_object()) return failed("request.object is not a Pod object");
    if (!translate::PodAsksForGpupack(*pod)) return Allow(uid, Outcome::kSkipped);
    StatusOr<json> patch = PatchFor(*pod);
    if (!patch.ok()) {
      bool forbidden = patch.status().code() == StatusCode::kPermissionDenied;
      const json* metadata = Field(*pod, "metadata");
      std::string name = metadata != nullptr ? StringField(*metadata, "name") : std::string();
      if (name.empty() && metadata != nullptr) name = StringField(*metadata, "generateName") + "*";
      GPUPACK_LOG(kInfo, "webhook") << "denied pod " << StringField(*request, "namespace") << "/" << name << " (uid "
                                    << uid << "): " << patch.status().message();
      return Refuse(uid, Outcome::kDenied, 200, forbidden ? 403 : 400, forbidden ? "Forbidden" : "BadRequest",
                    patch.status().message());
    }
    if (patch->empty()) return Allow(uid, Outcome::kSkipped);
    return {Outcome::kPatched, 200, PatchedReviewBody(uid, patch->dump())};
  } catch (const std::exception& e) {
    // nlohmann and the standard library throw on shapes no typed Pod can have; never crash.
    return failed(e.what());
  }
}

}  // namespace gpupack::webhook

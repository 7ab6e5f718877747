#include "agent/pods.h"

#include "api/annotations.h"
#include "api/json_fields.h"
#include "common/quantity.h"

namespace gpupack::agent {
namespace {

using Json = nlohmann::json;

using api::ObjectField;
using api::StringField;

const Json& ArrayAt(const Json& obj, const char* key) {
  static const Json empty = Json::array();
  if (!obj.is_object()) return empty;
  auto it = obj.find(key);
  return it != obj.end() && it->is_array() ? *it : empty;
}

// "containerd://abc" → "abc".
std::string StripScheme(const std::string& id) {
  const size_t at = id.find("://");
  return at == std::string::npos ? id : id.substr(at + 3);
}

void AddContainers(const Json& spec, const Json& status, bool init, PodInfo* pod) {
  const Json& specs = ArrayAt(spec, init ? "initContainers" : "containers");
  const Json& statuses = ArrayAt(status, init ? "initContainerStatuses" : "containerStatuses");
  for (size_t i = 0; i < specs.size(); ++i) {
    PodContainer c;
    c.name = StringField(specs[i], "name");
    c.index = static_cast<int>(i);
    c.init = init;
    for (const Json& st : statuses) {
      if (StringField(st, "name") != c.name) continue;
      c.container_id = StripScheme(StringField(st, "containerID"));
      c.running = ObjectField(st, "state").contains("running");
    }
    pod->containers.push_back(std::move(c));
  }
}

}  // namespace

PodInfo PodInfoFromJson(const nlohmann::json& pod) {
  PodInfo info;
  const Json& meta = ObjectField(pod, "metadata");
  info.uid = StringField(meta, "uid");
  info.ns = StringField(meta, "namespace");
  info.name = StringField(meta, "name");
  info.workload = translate::WorkloadOfPod(pod);
  const Json& status = ObjectField(pod, "status");
  const std::string phase = StringField(status, "phase");
  info.finished = phase == "Succeeded" || phase == "Failed";
  info.terminating = meta.contains("deletionTimestamp") || info.finished;
  AddContainers(ObjectField(pod, "spec"), status, /*init=*/false, &info);
  AddContainers(ObjectField(pod, "spec"), status, /*init=*/true, &info);

  const Json& annotations = ObjectField(meta, "annotations");
  const std::string text = StringField(annotations, std::string(api::kAnnotationAllocation).c_str());
  if (text.empty()) return info;
  auto allocation = api::DecodeAllocation(text);
  if (!allocation.ok()) {
    info.allocation_error = allocation.status().message();
    return info;
  }
  info.gpupack = true;
  for (const api::ContainerAllocation& ca : allocation->containers) {
    for (PodContainer& c : info.containers) {
      if (c.init != ca.init || c.index != ca.index) continue;
      c.devices = ca.devices;
      const std::string key = api::ContainerAnnotationKey(c.init, c.index, api::ContainerEnvKey::kMemoryRequestMiB);
      const std::string request = StringField(annotations, key.c_str());
      if (!request.empty()) {
        auto mib = ParseCount(request, key);
        if (mib.ok()) c.request_mib = *mib;
      }
    }
  }
  return info;
}

}  // namespace gpupack::agent

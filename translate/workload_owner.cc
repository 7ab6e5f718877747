#include "translate/workload_owner.h"

namespace gpupack::translate {
namespace {

using Json = nlohmann::json;

std::string StringAt(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

WorkloadRef WorkloadOfPod(const nlohmann::json& pod) {
  static const Json kEmpty = Json::object();
  const Json& meta = pod.is_object() && pod.contains("metadata") ? pod["metadata"] : kEmpty;
  WorkloadRef self{"Pod", StringAt(meta, "name")};
  if (!meta.is_object() || !meta.contains("ownerReferences") || !meta["ownerReferences"].is_array()) return self;
  for (const Json& owner : meta["ownerReferences"]) {
    if (!owner.is_object() || !owner.value("controller", false)) continue;
    WorkloadRef ref{StringAt(owner, "kind"), StringAt(owner, "name")};
    if (ref.kind.empty() || ref.name.empty()) return self;
    const Json& labels = meta.contains("labels") ? meta["labels"] : kEmpty;
    const std::string hash = StringAt(labels, "pod-template-hash");
    if (ref.kind == "ReplicaSet" && !hash.empty() && EndsWith(ref.name, "-" + hash)) {
      return {"Deployment", ref.name.substr(0, ref.name.size() - hash.size() - 1)};
    }
    return ref;
  }
  return self;
}

}  // namespace gpupack::translate

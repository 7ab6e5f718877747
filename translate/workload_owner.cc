#include "translate/workload_owner.h"

#include "api/json_fields.h"

namespace gpupack::translate {
namespace {

using Json = nlohmann::json;

using api::StringField;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

WorkloadRef WorkloadOfPod(const nlohmann::json& pod) {
  static const Json kEmpty = Json::object();
  const Json& meta = pod.is_object() && pod.contains("metadata") ? pod["metadata"] : kEmpty;
  WorkloadRef self{"Pod", StringField(meta, "name")};
  if (!meta.is_object() || !meta.contains("ownerReferences") || !meta["ownerReferences"].is_array()) return self;
  for (const Json& owner : meta["ownerReferences"]) {
    if (!owner.is_object() || !owner.value("controller", false)) continue;
    WorkloadRef ref{StringField(owner, "kind"), StringField(owner, "name")};
    if (ref.kind.empty() || ref.name.empty()) return self;
    const Json& labels = meta.contains("labels") ? meta["labels"] : kEmpty;
    const std::string hash = StringField(labels, "pod-template-hash");
    if (ref.kind == "ReplicaSet" && !hash.empty() && EndsWith(ref.name, "-" + hash)) {
      return {"Deployment", ref.name.substr(0, ref.name.size() - hash.size() - 1)};
    }
    return ref;
  }
  return self;
}

}  // namespace gpupack::translate

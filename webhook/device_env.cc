#include "webhook/device_env.h"

#include <algorithm>

#include "api/annotations.h"

namespace gpupack::webhook {
namespace {

using nlohmann::json;

// A plain value (no valueFrom) that gives no device. An absent value is the empty string.
bool GivesNoDevice(const json& entry, const std::string& name) {
  auto value_from = entry.find("valueFrom");
  if (value_from != entry.end() && !value_from->is_null()) return false;
  auto value = entry.find("value");
  if (value == entry.end() || value->is_null()) return api::GivesNoDevice(name, "");
  return value->is_string() && api::GivesNoDevice(name, value->get_ref<const std::string&>());
}

bool SetsName(const json& env, const std::string& name) {
  return std::any_of(env.begin(), env.end(), [&](const json& entry) { return entry.value("name", "") == name; });
}

}  // namespace

ContainerEnvReview ReviewContainerEnv(const json& env, const json& own) {
  ContainerEnvReview review{own, {}};
  if (!env.is_array()) return review;
  for (const json& entry : env) {
    auto name_field = entry.find("name");  // end() for an entry that is no object
    if (name_field == entry.end() || !name_field->is_string() ||
        !api::IsDeviceEnvName(name_field->get_ref<const std::string&>())) {
      review.env.push_back(entry);
      continue;
    }
    const std::string& name = name_field->get_ref<const std::string&>();
    if (std::find(own.begin(), own.end(), entry) != own.end()) continue;  // gpupack's own: already first
    if (GivesNoDevice(entry, name)) {
      if (!SetsName(own, name)) review.env.push_back(entry);
      continue;
    }
    review.refused.push_back(name);
  }
  return review;
}

}  // namespace gpupack::webhook

// Reading one field of a JSON object that may not be one: the lookups every decoder of Kubernetes
// objects and gpupack's own wire types makes, in one place. A missing field, a field of another
// type and a value that is not an object all read as absent; never an exception.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpupack::api {

// The field `key` of `object`, or null when `object` is not an object or has no such field.
inline const nlohmann::json* FieldOf(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// The string field `key` of `object`, or "" when there is none.
inline std::string StringField(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json* value = FieldOf(object, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

// The object field `key` of `object`, or an empty object when there is none.
inline const nlohmann::json& ObjectField(const nlohmann::json& object, std::string_view key) {
  static const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json* value = FieldOf(object, key);
  return value != nullptr && value->is_object() ? *value : empty;
}

}  // namespace gpupack::api

#include "scheduler/extender/shape_key.h"

#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

namespace gpupack::extender {

namespace {

// [[maybe_unused]]: it is named only in a discarded branch, which clang counts as unused.
template <typename T>
[[maybe_unused]] constexpr bool kAlwaysFalse = false;

// One field into the key: integers and enums as decimal and a comma, strings length-prefixed,
// so that a field's end is never a guess.
template <typename T>
void Append(std::string& key, const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    key += value ? 't' : 'f';
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    key += std::to_string(static_cast<int64_t>(value));
    key += ',';
  } else if constexpr (std::is_same_v<T, std::string>) {
    key += std::to_string(value.size());
    key += ':';
    key += value;
  } else {
    static_assert(kAlwaysFalse<T>, "a request field of a type the shape key cannot encode yet");
  }
}

void Append(std::string& key, const model::ContainerRequest& container);

template <typename T>
void Append(std::string& key, const std::optional<T>& value) {
  key += value ? '+' : '-';
  if (value) Append(key, *value);
}

template <typename T>
void Append(std::string& key, const std::vector<T>& values) {
  Append(key, values.size());
  for (const T& value : values) Append(key, value);
}

void Append(std::string& key, const model::ContainerRequest& container) {
  const auto& [name, index, init, device_count, mem_per_device_mib, mem_limit_per_device_mib, compute_pct] = container;
  // Which container is which in the allocation; Evaluate's verdict and costs never read it.
  (void)name;
  Append(key, index);
  Append(key, init);
  Append(key, device_count);
  Append(key, mem_per_device_mib);
  Append(key, mem_limit_per_device_mib);  // the ceiling decides which devices the bound leaves
  Append(key, compute_pct);
}

}  // namespace

std::string ShapeKey(const model::PodRequest& pod) {
  const auto& [ns, name, uid, cpu_milli, memory_bytes, containers, device_kind, mig_profile, gpu_models, hard_isolation,
               gpu_uuids, excluded_gpu_uuids, excluded_gpu_models, node_policy, device_policy, spread_key,
               spread_across_nodes, priority, movable] = pod;
  // The pod's identity: replicas of one shape share their answers.
  (void)ns;
  (void)name;
  (void)uid;
  // Read at bind from the pod itself (the MPS client priority), never by placement.
  (void)priority;
  // Whether the defragmenter may move the pod once it runs; placement never reads it.
  (void)movable;
  std::string key;
  key.reserve(64);
  Append(key, cpu_milli);
  Append(key, memory_bytes);
  Append(key, containers);
  Append(key, device_kind);
  Append(key, mig_profile);
  Append(key, gpu_models);
  Append(key, hard_isolation);
  Append(key, gpu_uuids);
  Append(key, excluded_gpu_uuids);
  Append(key, excluded_gpu_models);
  Append(key, node_policy);
  Append(key, device_policy);
  Append(key, spread_key);
  Append(key, spread_across_nodes);
  return key;
}

}  // namespace gpupack::extender

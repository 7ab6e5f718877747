// The names users write the request's device rules under: the pod and node annotations that the
// model's rule fields (PodRequest::gpu_uuids, spread_key, Device::excluded, ...) are read from.
// They live in the model because the placement library explains a refusal in the user's words
// ("2 devices excluded by gpupack.io/gpu-uuids-exclude") without knowing the wire types, and
// api/annotations.h defines its constants from these, so the wire and the explanations cannot
// drift.
#pragma once

#include <string_view>

namespace gpupack::model {

inline constexpr std::string_view kRuleGpuModelExclude = "gpupack.io/gpu-model-exclude";
inline constexpr std::string_view kRuleGpuUuids = "gpupack.io/gpu-uuids";
inline constexpr std::string_view kRuleGpuUuidsExclude = "gpupack.io/gpu-uuids-exclude";
inline constexpr std::string_view kRuleSpreadKey = "gpupack.io/spread-key";
inline constexpr std::string_view kRuleSpreadScope = "gpupack.io/spread-scope";
inline constexpr std::string_view kRuleGpuMemoryLimit = "gpupack.io/gpu-memory-limit";
inline constexpr std::string_view kRuleNodeExcludedDevices = "gpupack.io/excluded-devices";

}  // namespace gpupack::model

// Builders shared by the extender's tests and benchmarks: nodes with GPUs, pods as kube-scheduler
// sends them. Test-only; not part of the library.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model.h"

namespace gpupack::extender::testing {

// A node with `gpus` whole GPUs of `mib` MiB each, UUIDs "GPU-<node>-<i>".
inline model::Node GpuNode(const std::string& name, int gpus, model::MiB mib,
                           const std::string& model = "NVIDIA A100-SXM4-80GB") {
  model::Node node;
  node.name = name;
  for (int i = 0; i < gpus; ++i) {
    model::Device d;
    d.uuid = "GPU-" + name + "-" + std::to_string(i);
    d.index = i;
    d.model = model;
    d.capacity_mib = mib;
    node.devices.push_back(std::move(d));
  }
  return node;
}

// A pod asking for `gpu_memory` (a quantity) on each of `gpus` devices in one container "main";
// an empty gpu_memory with gpus > 0 asks for whole GPUs; gpus == 0 asks for nothing.
inline nlohmann::json PodJson(const std::string& name, const std::string& uid, const std::string& gpu_memory,
                              int gpus = 1) {
  nlohmann::json limits = nlohmann::json::object();
  limits["cpu"] = "1";
  if (!gpu_memory.empty()) limits["gpupack.io/gpu-memory"] = gpu_memory;
  if (gpus > 1 || (gpu_memory.empty() && gpus > 0)) limits["gpupack.io/gpu"] = std::to_string(gpus);
  return {{"metadata", {{"name", name}, {"namespace", "default"}, {"uid", uid}}},
          {"spec", {{"containers", nlohmann::json::array({{{"name", "main"}, {"resources", {{"limits", limits}}}}})}}}};
}

inline std::string FilterBody(const nlohmann::json& pod, const std::vector<std::string>& names) {
  return nlohmann::json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", names}}.dump();
}

inline std::string BindBody(const std::string& name, const std::string& uid, const std::string& node) {
  return nlohmann::json{{"PodName", name}, {"PodNamespace", "default"}, {"PodUID", uid}, {"Node", node}}.dump();
}

}  // namespace gpupack::extender::testing

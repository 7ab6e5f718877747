#include "testing/builders.h"

#include <chrono>

namespace gpupack::builders {

model::Node GpuNode(const std::string& name, int gpus, model::MiB mib, const std::string& model) {
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

nlohmann::json PodJson(const std::string& name, const std::string& uid, const std::string& gpu_memory, int gpus) {
  nlohmann::json limits = nlohmann::json::object();
  limits["cpu"] = "1";
  if (!gpu_memory.empty()) limits["gpupack.io/gpu-memory"] = gpu_memory;
  if (gpus > 1 || (gpu_memory.empty() && gpus > 0)) limits["gpupack.io/gpu"] = std::to_string(gpus);
  return {{"metadata", {{"name", name}, {"namespace", "default"}, {"uid", uid}}},
          {"spec", {{"containers", nlohmann::json::array({{{"name", "main"}, {"resources", {{"limits", limits}}}}})}}}};
}

std::string FilterBody(const nlohmann::json& pod, const std::vector<std::string>& names) {
  return nlohmann::json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", names}}.dump();
}

std::string BindBody(const std::string& name, const std::string& uid, const std::string& node) {
  return nlohmann::json{{"PodName", name}, {"PodNamespace", "default"}, {"PodUID", uid}, {"Node", node}}.dump();
}

api::GpuNodeStatus SampleGpuNodeStatus() {
  api::GpuNodeStatus s;
  api::GpuNodeDevice whole;
  whole.uuid = "GPU-aaaa";
  whole.index = 0;
  whole.model = "NVIDIA H100 80GB HBM3";
  whole.memory_mib = 81559;
  whole.used_mib = 1200;
  whole.allocated_mib = 16384;
  s.devices.push_back(whole);
  api::GpuNodeDevice mig;
  mig.uuid = "GPU-bbbb";
  mig.index = 1;
  mig.model = "NVIDIA A100-SXM4-40GB";
  mig.memory_mib = 40960;
  mig.used_mib = 300;
  mig.mig_enabled = true;
  mig.healthy = false;
  mig.mig_instances.push_back({"MIG-1", "3g.20gb", 19968, 100, 1, 0, 4});
  mig.mig_instances.push_back({"MIG-2", "1g.5gb", 4864, 200, 7, 6, 1});
  s.devices.push_back(mig);
  s.processes.push_back({4242, "GPU-aaaa", 900, "uid-1", "ns/p", "main", "abc123"});
  s.enforcement = {"cgroup-dmem", "615.20", "13.4", ""};
  s.audit.push_back({"over-cap", "GPU-aaaa", "uid-1", "ns/p", "main", 4242, 9000, 8192, "uses more than its cap"});
  s.max_pods_per_device = 16;
  s.heartbeat_time = Clock::TimePoint(std::chrono::seconds(1'800'000'000));
  return s;
}

api::Allocation TwoContainerAllocation() {
  api::Allocation a;
  a.node = "n1";
  api::ContainerAllocation main;
  main.name = "main";
  main.index = 0;
  main.devices = {{"GPU-a", 0, 8192, "", ""}, {"GPU-b", 1, 8192, "", ""}};
  api::ContainerAllocation setup;
  setup.name = "setup";
  setup.index = 0;
  setup.init = true;
  setup.within_pod = true;
  setup.devices = {{"MIG-x", 2, 10240, "GPU-c", "1g.10gb"}};
  a.containers = {main, setup};
  return a;
}

std::string MutatedBody(std::string body, std::mt19937& rng) {
  static const std::string alphabet = "{}[]\":,0123456789.eE+-nulltruefalse \\u00\x01\xff";
  const int edits = 1 + static_cast<int>(rng() % 6);
  for (int e = 0; e < edits && !body.empty(); ++e) {
    const size_t pos = rng() % body.size();
    switch (rng() % 3) {
      case 0:
        body[pos] = alphabet[rng() % alphabet.size()];
        break;
      case 1:
        body.erase(pos, 1 + rng() % 4);
        break;
      default:
        body.insert(pos, 1, alphabet[rng() % alphabet.size()]);
        break;
    }
  }
  return body;
}

}  // namespace gpupack::builders

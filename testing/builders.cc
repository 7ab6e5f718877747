#include "testing/builders.h"

#include <chrono>
#include <set>
#include <utility>

namespace gpupack::builders {

model::DeviceShare OtherPodShare(model::MiB mem_mib) {
  return model::DeviceShare{"other", "ns/other", "main", mem_mib, false};
}

model::Device Gpu(std::string uuid, model::MiB capacity_mib, model::MiB allocated_mib, std::string model) {
  model::Device d;
  d.uuid = std::move(uuid);
  d.model = std::move(model);
  d.capacity_mib = capacity_mib;
  if (allocated_mib > 0) d.shares.push_back(OtherPodShare(allocated_mib));
  return d;
}

model::Device Gpu(model::MiB capacity_mib, model::MiB allocated_mib, std::string model) {
  return Gpu("GPU-" + std::to_string(capacity_mib) + "-" + std::to_string(allocated_mib), capacity_mib, allocated_mib,
             std::move(model));
}

model::Device Mig(std::string profile, model::MiB capacity_mib) {
  model::Device d = Gpu("MIG-" + profile, capacity_mib);
  d.kind = model::DeviceKind::kMig;
  d.mig_profile = std::move(profile);
  return d;
}

model::Node NodeOf(std::vector<model::Device> devices, int64_t cpu_milli) {
  model::Node n;
  n.name = "n1";
  n.cpu_milli = cpu_milli;
  std::set<std::string> taken;
  for (size_t i = 0; i < devices.size(); ++i) {
    devices[i].index = static_cast<int>(i);
    if (taken.count(devices[i].uuid)) devices[i].uuid.append("-").append(std::to_string(i));
    taken.insert(devices[i].uuid);
  }
  n.devices = std::move(devices);
  return n;
}

model::Node GpuNode(const std::string& name, int gpus, model::MiB mib, const std::string& model) {
  model::Node node;
  node.name = name;
  for (int i = 0; i < gpus; ++i) {
    model::Device d = Gpu("GPU-" + name + "-" + std::to_string(i), mib, 0, model);
    d.index = i;
    node.devices.push_back(std::move(d));
  }
  return node;
}

model::PodRequest NamedPod(const std::string& name, int devices, model::MiB mem_per_device_mib, int64_t cpu_milli) {
  model::PodRequest p;
  p.ns = "default";
  p.name = name;
  p.uid = "uid-" + name;
  p.cpu_milli = cpu_milli;
  if (devices > 0) p.containers.push_back(model::ContainerRequest{"main", 0, false, devices, mem_per_device_mib});
  return p;
}

model::PodRequest Pod(int devices, model::MiB mem_per_device_mib, int64_t cpu_milli) {
  return NamedPod("p", devices, mem_per_device_mib, cpu_milli);
}

placement::TypicalSpec Spec(int64_t cpu_milli, int devices, model::MiB mem_per_device_mib, double weight,
                            std::vector<std::string> gpu_models) {
  placement::TypicalSpec s;
  s.cpu_milli = cpu_milli;
  s.device_count = devices;
  s.mem_per_device_mib = mem_per_device_mib;
  s.gpu_models = std::move(gpu_models);
  s.weight = weight;
  return s;
}

std::shared_ptr<placement::Policy> PriorPolicy(model::PolicyKind kind, model::MiB device_mib) {
  return std::make_shared<placement::Policy>(kind, placement::DefaultPriorWorkload(device_mib),
                                             placement::PlacementOptions{});
}

nlohmann::json PodJson(const std::string& name, const std::string& uid, const std::string& gpu_memory, int gpus) {
  nlohmann::json limits = nlohmann::json::object();
  limits["cpu"] = "1";
  if (!gpu_memory.empty()) limits["gpupack.io/gpu-memory"] = gpu_memory;
  if (gpus > 1 || (gpu_memory.empty() && gpus > 0)) limits["gpupack.io/gpu"] = std::to_string(gpus);
  nlohmann::json metadata = {{"name", name}, {"namespace", "default"}};
  if (!uid.empty()) metadata["uid"] = uid;
  return {{"metadata", metadata},
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
  s.devices.push_back({.uuid = "GPU-aaaa",
                       .index = 0,
                       .model = "NVIDIA H100 80GB HBM3",
                       .memory_mib = 81559,
                       .used_mib = 1200,
                       .allocated_mib = 16384,
                       .compute_enforcement = "mps-client",
                       .allocated_compute_pct = 40,
                       .sm_util_pct = 35});
  s.devices.push_back(
      {.uuid = "GPU-bbbb",
       .index = 1,
       .model = "NVIDIA A100-SXM4-40GB",
       .memory_mib = 40960,
       .used_mib = 300,
       .healthy = false,
       .mig_enabled = true,
       .mig_instances = {{"MIG-1", "3g.20gb", 19968, 100, 1, 0, 4}, {"MIG-2", "1g.5gb", 4864, 200, 7, 6, 1}}});
  s.devices.back().mig_instances[0].compute_enforcement = "mps-client";
  s.processes.push_back({4242, "GPU-aaaa", 900, "uid-1", "ns/p", "main", "abc123", 30});
  s.enforcement = {"cgroup-dmem", "615.20", "13.4", "", "MPS control pipe found"};
  s.audit.push_back({"over-cap", "GPU-aaaa", "uid-1", "ns/p", "main", 4242, 9000, 8192, "uses more than its cap"});
  s.audit.push_back(
      {"over-compute", "GPU-aaaa", "uid-1", "ns/p", "main", 4242, 0, 0, "uses more than its compute share", 55, 30});
  s.max_pods_per_device = 16;
  s.heartbeat_time = Clock::TimePoint(std::chrono::seconds(1'800'000'000));
  s.conditions = {{"MemoryEnforced", true, "Enforced", "hard limits through cgroup-dmem",
                   Clock::TimePoint(std::chrono::seconds(1'799'999'000))},
                  {"ComputeEnforced", false, "ComputeMissing", "1 of 2 GPUs hold compute shares by scheduling only",
                   Clock::TimePoint(std::chrono::seconds(1'799'999'000))}};
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

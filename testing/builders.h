// Builders and sample values for tests in more than one folder, so that a test states only what
// differs from a known starting point. Each returns a plain value the test may change further;
// the defaults written here are part of the contract, and tests rely on them. Test-only.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/allocation.h"
#include "api/gpunode.h"
#include "model/model.h"
#include "placement/policy.h"
#include "placement/workload.h"

namespace gpupack::builders {

// ---- devices, nodes and pods of the domain model ----

// The GPU model a built device has unless the test names another.
inline constexpr char kA100[] = "NVIDIA A100-SXM4-80GB";

// A share of `mem_mib` on a device, held by another pod: uid "other", pod "ns/other", container
// "main", not exclusive, no spread key, reserving no compute.
model::DeviceShare OtherPodShare(model::MiB mem_mib);

// A healthy whole GPU named `uuid` with `capacity_mib` of memory, index 0 (NodeOf numbers it);
// when `allocated_mib` > 0 it already holds OtherPodShare(allocated_mib).
model::Device Gpu(std::string uuid, model::MiB capacity_mib, model::MiB allocated_mib = 0, std::string model = kA100);
// The same GPU named after its memory: UUID "GPU-<capacity>-<allocated>".
model::Device Gpu(model::MiB capacity_mib, model::MiB allocated_mib = 0, std::string model = kA100);
// A MIG instance of `profile` (UUID "MIG-<profile>", model kA100) with `capacity_mib` of memory,
// no parent UUID, nothing allocated.
model::Device Mig(std::string profile, model::MiB capacity_mib);

// Node "n1" holding `devices` in order, each one's index its position; a UUID that an earlier
// device of the node already has gets "-<index>" appended, so that alike devices stay apart.
// `cpu_milli` allocatable CPU (-1: unknown, so unlimited); host memory unknown.
model::Node NodeOf(std::vector<model::Device> devices, int64_t cpu_milli = -1);
// Node `name` with `gpus` empty whole GPUs of `mib` each, of model `model`, UUIDs
// "GPU-<name>-<i>"; CPU and host memory unknown.
model::Node GpuNode(const std::string& name, int gpus, model::MiB mib, const std::string& model = kA100);

// Pod "default/<name>" (uid "uid-<name>") asking for `cpu_milli` of CPU and, when `devices` > 0,
// one app container "main" (index 0) asking for `devices` distinct devices with
// `mem_per_device_mib` each (0: whole devices, taken exclusively); no host memory, no controls.
model::PodRequest NamedPod(const std::string& name, int devices, model::MiB mem_per_device_mib, int64_t cpu_milli = 0);
// Pod "default/p" (uid "uid-p"): NamedPod("p", devices, mem_per_device_mib, cpu_milli).
model::PodRequest Pod(int devices, model::MiB mem_per_device_mib, int64_t cpu_milli = 0);

// A typical pod shape of a workload: `cpu_milli` of CPU and `devices` devices with
// `mem_per_device_mib` each (0 with devices > 0: whole devices; devices 0: CPU only), of any
// device kind, popularity `weight`, restricted to `gpu_models` when not empty; no host memory.
placement::TypicalSpec Spec(int64_t cpu_milli, int devices, model::MiB mem_per_device_mib, double weight = 0,
                            std::vector<std::string> gpu_models = {});

// The placement policy of `kind` against the cold-start prior workload for devices of
// `device_mib` (placement::DefaultPriorWorkload), default placement options: the extender's
// policy before it has learned anything.
std::shared_ptr<placement::Policy> PriorPolicy(model::PolicyKind kind, model::MiB device_mib = 81920);

// ---- what kube-scheduler sends the extender ----

// A pod asking for `gpu_memory` (a quantity) on each of `gpus` devices in one container "main",
// with a CPU limit of 1, in namespace "default" (uid left out when empty); an empty gpu_memory
// with gpus > 0 asks for whole GPUs; gpus == 0 asks for nothing.
nlohmann::json PodJson(const std::string& name, const std::string& uid, const std::string& gpu_memory, int gpus = 1);
// A filter or prioritize body (ExtenderArgs) for `pod` against the node names `names`.
std::string FilterBody(const nlohmann::json& pod, const std::vector<std::string>& names);
// A bind body (ExtenderBindingArgs) for pod "default/<name>" with `uid` onto `node`.
std::string BindBody(const std::string& name, const std::string& uid, const std::string& node);

// ---- wire samples ----

// A GPUNode status with one whole H100 (cgroup-dmem enforcement, one process, one audit finding)
// and one unhealthy A100 in MIG mode with a 3g.20gb and a 1g.5gb instance; heartbeat at
// 1'800'000'000 s since the epoch.
api::GpuNodeStatus SampleGpuNodeStatus();

// An allocation on node n1: container "main" (index 0) with 8192 MiB on GPU-a and GPU-b, and
// init container "setup" (index 0, within the pod's devices) with 10240 MiB of MIG-x (1g.10gb on
// GPU-c).
api::Allocation TwoContainerAllocation();

// `body` after 1 to 6 random edits (replace, erase 1-4 bytes, insert), drawn from JSON's
// punctuation, digits, literals' letters and a few bytes that are never valid: the randomized
// decoder tests' inputs. Deterministic for a given `rng` state.
std::string MutatedBody(std::string body, std::mt19937& rng);

}  // namespace gpupack::builders

// Builders and sample values for tests in more than one folder (and the benchmarks), so a test
// states only what differs from a known starting point. Test-only.
#pragma once

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/allocation.h"
#include "api/gpunode.h"
#include "model/model.h"

namespace gpupack::builders {

// ---- the extender's inputs: nodes with GPUs, and what kube-scheduler sends ----

// A node with `gpus` whole GPUs of `mib` MiB each, UUIDs "GPU-<node>-<i>".
model::Node GpuNode(const std::string& name, int gpus, model::MiB mib,
                    const std::string& model = "NVIDIA A100-SXM4-80GB");

// A pod asking for `gpu_memory` (a quantity) on each of `gpus` devices in one container "main";
// an empty gpu_memory with gpus > 0 asks for whole GPUs; gpus == 0 asks for nothing.
nlohmann::json PodJson(const std::string& name, const std::string& uid, const std::string& gpu_memory, int gpus = 1);

// A filter or prioritize body (ExtenderArgs) for `pod` against the node names `names`.
std::string FilterBody(const nlohmann::json& pod, const std::vector<std::string>& names);

// A bind body (ExtenderBindingArgs) for pod default/`name` with `uid` onto `node`.
std::string BindBody(const std::string& name, const std::string& uid, const std::string& node);

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

// Sample values for tests in more than one folder, so a test states only what differs from a
// known starting point.
#pragma once

#include <random>
#include <string>

#include "api/allocation.h"
#include "api/gpunode.h"

namespace gpupack::builders {

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

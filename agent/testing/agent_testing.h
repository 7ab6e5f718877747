// Test helpers for the agent (temporary directories: testing/temp_dir.h): files, fake /proc and cgroup trees, and the
// fake NVML's state file (agent/testing/fake_nvml.cc).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"

namespace gpupack::agent::testing {

// Writes `state` as the fake NVML's state file inside `dir` and points $GPUPACK_FAKE_NVML_STATE at
// it (read at the next nvmlInit_v2).
void SetFakeNvmlState(const TempDir& dir, const nlohmann::json& state);

// Pod UIDs and container ids that look real to the cgroup parser.
inline constexpr const char* kPodUid1 = "0b7e1c2a-3f4d-4e5f-8a9b-0c1d2e3f4a5b";
inline constexpr const char* kPodUid2 = "11111111-2222-4333-8444-555555555555";
inline constexpr const char* kContainerA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
inline constexpr const char* kContainerB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

// The systemd-driver cgroup path of a container of a burstable pod.
std::string SystemdContainerPath(const std::string& pod_uid, const std::string& container_id);

}  // namespace gpupack::agent::testing

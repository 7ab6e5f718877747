// Test helpers for the agent (temporary directories: testing/temp_dir.h): files, fake /proc and cgroup trees, the
// fake NVML's state file (agent/testing/fake_nvml.cc), and pods as the API server lists them to the agent.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "testing/temp_dir.h"

namespace gpupack::agent::testing {

// Writes `state` as the fake NVML's state file inside `dir` and points $GPUPACK_FAKE_NVML_STATE at
// it (read at the next nvmlInit_v2).
void SetFakeNvmlState(const TempDir& dir, const nlohmann::json& state);

// The driver generations the doctor tells apart, as the fake NVML plays them: a build of the fake
// library (agent/CMakeLists.txt: with or without the R615 calls) and the state it reads.
enum class FakeDriver {
  kR580,                     // before R615: no per-cgroup memory-limit calls, driver 580.65.06
  kR615,                     // R615: the calls, driver 615.20, CUDA 13.4, one whole GPU
  kR615LibraryWithoutCalls,  // the kernel driver says 615.20, the loaded library lacks the calls
  kR615Mig,                  // R615, one whole GPU and one in MIG mode with two instances
  kR615MigWithoutInstances,  // R615, one GPU in MIG mode with no instance yet
};
struct FakeNvmlFlavour {
  std::string library;  // the fake libnvidia-ml.so.1 to load
  nlohmann::json state;
};
FakeNvmlFlavour FakeNvmlFlavourOf(FakeDriver driver);

// Pod UIDs and container ids that look real to the cgroup parser.
inline constexpr const char* kPodUid1 = "0b7e1c2a-3f4d-4e5f-8a9b-0c1d2e3f4a5b";
inline constexpr const char* kPodUid2 = "11111111-2222-4333-8444-555555555555";
inline constexpr const char* kContainerA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
inline constexpr const char* kContainerB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

// The systemd-driver cgroup path of a container of a burstable pod.
std::string SystemdContainerPath(const std::string& pod_uid, const std::string& container_id);

// A container of a pod as its status reports it: name, container id, running or terminated.
struct TestContainer {
  std::string name;
  std::string id;
  bool running = true;
};

// A pod "ml/<name>" (uid `uid`) in phase Running as the API server lists it to the agent, with
// `containers` in order. `devices` (UUID, MiB) is the first container's allocation on node n1, in
// the allocation annotation (none when empty; a "MIG-" UUID is a 3g.20gb instance on GPU-2);
// `request_mib`, when not empty, is that container's memory-request annotation.
nlohmann::json RunningPodJson(const std::string& uid, const std::string& name,
                              const std::vector<TestContainer>& containers,
                              const std::vector<std::pair<std::string, model::MiB>>& devices,
                              const std::string& request_mib = "");

}  // namespace gpupack::agent::testing
